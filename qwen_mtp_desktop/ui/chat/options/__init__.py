"""Chat options, per chat (apart from the app's Settings): the panel (model, device, MTP,
sampling, system prompt), presets and the chat's MCP tools."""
