"""The Chat panel (chat_panel.ChatPanel) and its parts."""
