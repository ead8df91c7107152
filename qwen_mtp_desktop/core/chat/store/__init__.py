"""Chats: records (settings, conversations, messages, errors), migrations (the versioned
schema and the search index), database (opening the file: damage, migrations, search), versions
(the tree of message versions), store (`ChatStore`, every chat operation), export_format and
export_names (a chat as a file)."""
