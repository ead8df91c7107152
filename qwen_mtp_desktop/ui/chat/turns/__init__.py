"""A chat's turns of the model: the controller that starts each answer, the MCP tool loop,
the model session in the engine process, the live figures while an answer streams, and what the
user does to messages (edit, answer again, versions, delete)."""
