"""MCP servers: their configuration (config.py), the client that runs their tools on an event
loop of its own, off the GUI thread (client.py), and its stdio transport, which reads a
server's messages with bounded memory and time (stdio.py)."""
