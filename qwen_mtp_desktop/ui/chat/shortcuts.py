"""The chat's own keys, and how Help › Keyboard shortcuts lists them."""

from __future__ import annotations

from PySide6.QtGui import QKeySequence

#: The chat's own keys (portable text; Help > Keyboard shortcuts shows them natively).
REGENERATE_KEYS = "Ctrl+R"
PREVIOUS_VERSION_KEYS = "Alt+Left"
NEXT_VERSION_KEYS = "Alt+Right"


def chat_shortcuts() -> list[tuple[str, str]]:
    """The chat's keys as Help > Keyboard shortcuts lists them (ui.main_window.shortcuts)."""

    def native(keys: str) -> str:
        return QKeySequence(keys).toString(QKeySequence.SequenceFormat.NativeText)

    versions = f"{native(PREVIOUS_VERSION_KEYS)} / {native(NEXT_VERSION_KEYS)}"
    return [
        ("Up (in an empty message box)", "Edit your last message in place"),
        ("Enter / Esc (editing a message)", "Send the edit (answers again) / cancel it"),
        (native(REGENERATE_KEYS), "Answer your last message again (earlier answers are kept)"),
        (versions, "Previous / next version of the last answer"),
        ("Tab / Shift+Tab", "Move through the chat's controls"),
    ]
