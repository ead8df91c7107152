"""MCP servers: their configuration (config.py) and the client that runs their tools on an
event loop of its own, off the GUI thread (client.py)."""
