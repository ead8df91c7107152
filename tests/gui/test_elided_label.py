"""ElidedLabel: long header texts end in "…" instead of being clipped or widening the window."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QPushButton, QWidget
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.ui.widgets.elided_label import MIN_WIDTH, ElidedLabel

LONG = "Auto · MTP n=1: not benchmarked on this device yet; measuring drafts and step costs"


def test_long_text_shrinks_with_its_layout_and_keeps_the_whole_text(qtbot: QtBot) -> None:
    host = QWidget()
    qtbot.addWidget(host)
    layout = QHBoxLayout(host)
    label = ElidedLabel(LONG)
    button = QPushButton("Settings")
    layout.addWidget(label)
    layout.addStretch(1)
    layout.addWidget(button)
    host.resize(300, 40)
    host.show()
    qtbot.waitExposed(host)
    assert label.minimumSizeHint().width() <= MIN_WIDTH
    assert label.width() < label.sizeHint().width()  # it shrank instead of pushing
    assert button.geometry().right() <= host.width()  # the button stays fully visible
    assert label.text() == label.toolTip() == LONG
    image = label.grab().toImage()
    assert not image.isNull() and image.width() == label.width()

    label.setText("short")
    assert label.toolTip() == "short"
    host.resize(900, 40)
    qtbot.wait(10)
    assert label.width() >= label.sizeHint().width()
