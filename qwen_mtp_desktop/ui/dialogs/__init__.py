"""The app-wide dialogs: Settings, the local API server, MCP servers, About, and the crash
report."""
