"""A conversation, Qt-free: its turns, its stored history, its tools and what its window shows.

`turns` runs a chat turn (Auto, tools, the engine); `store` keeps chats in SQLite; `tools` is a
chat's MCP tools as the model sees them; `context_usage`, `decoding_words`, `markdown` and
`link_display` are what the chat view shows about an answer; `generation_defaults` is what a chat
samples with until the user changes it."""
