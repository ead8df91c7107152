"""Remote servers (OpenAI-compatible APIs) in the chat: the header's picker, the add/edit
dialog and Tools > Remote servers…."""
