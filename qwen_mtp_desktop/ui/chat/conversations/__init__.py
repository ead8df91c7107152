"""The chat list and the open chat: the list (pinned, newest first, searchable), its actions
(pin, rename, delete with Undo, export) and the open chat's trips to the chat store."""
