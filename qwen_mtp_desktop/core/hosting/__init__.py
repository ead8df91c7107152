"""The engine in its own process, seen from both sides: the pipe protocol (protocol.py), the
child process (process.py), its restart policy and model reload (supervisor.py), the engine's
interface over it (client.py: HostedEngine) and the request queue every front end shares
(service.py: EngineService)."""
