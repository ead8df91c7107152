"""The Models panel's parts (the panel itself is ui.models_panel.ModelsPanel)."""
