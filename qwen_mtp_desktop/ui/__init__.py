"""Widgets only. Work that takes time runs in qwen_mtp_desktop.workers, never on the GUI thread."""
