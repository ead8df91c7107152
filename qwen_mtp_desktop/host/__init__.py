"""The engine host: the process that runs the engine for the app's window (and, on request,
the local API server), so a crash inside the runtime cannot take the window down."""
