"""The Models panel (panel.ModelsPanel) and its parts."""
