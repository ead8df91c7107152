"""ui.widgets.status_icons and ui.widgets.labels: the one status icon and the one text label every
panel uses."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.ui.export.widgets import STATUS_COLORS, check_pixmap
from qwen_mtp_desktop.ui.models.common import SEVERITY_COLORS
from qwen_mtp_desktop.ui.widgets.labels import text_label
from qwen_mtp_desktop.ui.widgets.status_icons import (
    STATUS_LOOKS,
    status_color,
    status_icon,
    status_pixmap,
)


def _edge_color(status: str, size: int) -> QColor:
    """The circle's colour just inside its left edge, where no glyph is drawn."""
    image = status_pixmap(status, size, ratio=1.0).toImage()
    return image.pixelColor(3, size // 2)


@pytest.mark.parametrize("status", sorted(STATUS_LOOKS))
def test_each_status_is_a_circle_of_its_colour(qtbot: QtBot, status: str) -> None:
    pixmap = status_pixmap(status, 18)
    assert pixmap.devicePixelRatio() == 2.0
    assert (pixmap.width(), pixmap.height()) == (36, 36)
    corner = pixmap.toImage().pixelColor(0, 0)
    assert corner.alpha() == 0  # outside the circle: transparent on any theme
    assert _edge_color(status, 18).name() == QColor(STATUS_LOOKS[status][0]).name()


def test_both_vocabularies_share_one_palette(qtbot: QtBot) -> None:
    assert status_color("ok") == status_color("pass") == SEVERITY_COLORS["ok"]
    assert status_color("warning") == status_color("warn") == STATUS_COLORS["warn"]
    assert status_color("error") == status_color("fail") == STATUS_COLORS["fail"]


def test_an_unknown_status_is_a_grey_circle_not_an_error(qtbot: QtBot) -> None:
    assert _edge_color("no-such-status", 18).name() == QColor(status_color("pending")).name()


def test_the_wizard_icon_keeps_its_size_and_icons_are_made_once(qtbot: QtBot) -> None:
    assert check_pixmap("pass").width() == 36  # 18 px at ratio 2
    assert check_pixmap("pass", 16).width() == 32
    assert status_icon("ok") is status_icon("ok")
    assert status_icon("ok") is not status_icon("ok", 18)


def test_text_label(qtbot: QtBot) -> None:
    plain = text_label("Hello", "muted")
    qtbot.addWidget(plain)
    assert plain.text() == "Hello" and plain.objectName() == "muted" and plain.wordWrap()
    assert not plain.textInteractionFlags() & Qt.TextInteractionFlag.TextSelectableByMouse
    unnamed = text_label(wrap=False)
    qtbot.addWidget(unnamed)
    assert unnamed.objectName() == "" and not unnamed.wordWrap()
    details = text_label("<b>not bold</b>", selectable=True)
    qtbot.addWidget(details)
    assert details.textInteractionFlags() & Qt.TextInteractionFlag.TextSelectableByMouse
    assert details.textFormat() == Qt.TextFormat.PlainText  # model text is never rich text
