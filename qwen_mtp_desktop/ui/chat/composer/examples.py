"""Example prompts as clickable chips, shown in an empty chat: a first message in one click."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from qwen_mtp_desktop.core.chat.turns import example_prompts
from qwen_mtp_desktop.ui.widgets.flow_layout import FlowLayout


class ExamplePrompts(QWidget):
    """Signals:
    chosen(str): the user clicked an example; the chat sends it.
    discover_requested(): the user wants to find a real model (the Discover list).
    """

    chosen = Signal(str)
    discover_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("examplePrompts")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 8, 20, 4)
        layout.setSpacing(6)
        self.title = QLabel()
        self.title.setObjectName("muted")
        layout.addWidget(self.title)
        self._chips_box = QWidget()
        self._flow = FlowLayout(self._chips_box)
        layout.addWidget(self._chips_box)
        # Where a newcomer looks first: an empty chat. The demo only counts and repeats.
        self.discover_button = QPushButton("Find a real model: discover Qwen3.5 models…")
        self.discover_button.setObjectName("discoverLink")
        self.discover_button.setFlat(True)
        self.discover_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.discover_button.setToolTip(
            "The Qwen3.5 family with the memory each needs on this computer; one click opens "
            "the export wizard"
        )
        self.discover_button.clicked.connect(self.discover_requested)
        row = QHBoxLayout()
        row.setContentsMargins(0, 4, 0, 0)
        row.addWidget(self.discover_button)
        row.addStretch(1)
        layout.addLayout(row)
        self.chips: list[QPushButton] = []
        self._prompts: tuple[str, ...] = ()

    def set_prompts(self, title: str, prompts: Sequence[str]) -> None:
        if tuple(prompts) == self._prompts and title == self.title.text():
            return
        self._prompts = tuple(prompts)
        self.title.setText(title)
        for chip in self.chips:
            self._flow.removeWidget(chip)
            chip.deleteLater()
        self.chips = []
        for prompt in prompts:
            chip = QPushButton(prompt)
            chip.setObjectName("promptChip")
            chip.setToolTip("Send this message")
            chip.clicked.connect(lambda _checked=False, text=prompt: self.chosen.emit(text))
            self._flow.addWidget(chip)
            self.chips.append(chip)


def show_examples(
    examples: ExamplePrompts, demo_note: QWidget, demo: bool, busy: bool, answered: bool
) -> None:
    """Example prompts in an empty chat only (`busy`: it has messages or an answer is coming):
    the demo's own skills, or everyday tasks; the demo's one-turn note once it has answered."""
    heading = "Try what the demo model can do:" if demo else "Try an example:"
    examples.set_prompts(heading, example_prompts(demo))
    examples.setVisible(not busy)
    demo_note.setVisible(demo and answered)
