"""Chats: records (settings, conversations, messages, errors), migrations (the versioned
schema and the search index), database (opening the file: damage, migrations, search), versions
(the tree of message versions), store (`ChatStore`, every chat operation), chat_file and
chat_file_names (a chat saved as a file: "Export chat" in the window, apart from model export)."""
