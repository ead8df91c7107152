"""Chats: records (settings, conversations, messages, errors), migrations (the versioned
schema and the search index) and store (`ChatStore`, the SQLite store every chat lives in)."""
