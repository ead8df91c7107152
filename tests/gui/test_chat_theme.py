"""Issue 28: switching the theme at run time restyles answers already on screen. The real
window (offscreen) and its real Settings path (MainWindow.apply_theme); the colours checked are
the ones actually painted (the widgets grabbed, pixels sampled) and the ones in the documents."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.chat.transcript.text_views import AutoHeightText, CodeBlock
from qwen_mtp_desktop.ui.main_window import MainWindow

pytestmark = [pytest.mark.gui, pytest.mark.subprocess]

ANSWER = """## A heading

Some **bold** text and a [link](https://example.com/docs).

```python
def greet(name: str) -> str:
    # say hello
    return f"Hello, {name}!"  # 42
```

After the code.
"""


def luminance(color: QColor) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    return (
        0.2126 * channel(color.red())
        + 0.7152 * channel(color.green())
        + 0.0722 * channel(color.blue())
    )


def contrast(a: QColor, b: QColor) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def painted(image: QImage) -> tuple[QColor, list[tuple[QColor, int]]]:
    """The background (the most common colour) and the other colours painted, with counts."""
    counts: Counter[int] = Counter()
    for y in range(0, image.height(), 1):
        for x in range(0, image.width(), 1):
            counts[image.pixel(x, y)] += 1
    (background, _), *others = counts.most_common()
    return QColor.fromRgb(background), [(QColor.fromRgb(c), n) for c, n in others]


def code_contrast(block: CodeBlock) -> tuple[QColor, float]:
    """The code view's painted background and the contrast of its text: the most contrasting
    colour that covers at least 20 pixels (antialiasing makes in-between shades)."""
    # The block paints the background (the code view is transparent over it): grab the block,
    # cropped to the code.
    image = block.grab(block.view.geometry()).toImage()
    background, others = painted(image)
    text = [color for color, count in others if count >= 20]
    assert text, "no text painted"
    return background, max(contrast(background, color) for color in text)


def test_a_theme_change_restyles_answers_on_screen(qtbot: QtBot, screenshot_dir: Path) -> None:
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    try:
        check_theme_changes(window, qtbot, screenshot_dir)
    finally:
        window.apply_theme("system")  # the app's palette is global: leave it as found
        window.shutdown()


def check_theme_changes(window: MainWindow, qtbot: QtBot, screenshot_dir: Path) -> None:
    window.resize(1024, 700)
    window.show()
    qtbot.waitExposed(window)
    chat = window.chat
    window.apply_theme("light")
    chat._add_widget("user", "Show me a greeting function.")
    answer = chat._add_widget("assistant", ANSWER)
    qtbot.wait(200)
    app = QApplication.instance()
    assert isinstance(app, QApplication)

    for theme in ("light", "dark", "light", "dark"):
        window.apply_theme(theme)
        qtbot.wait(200)
        blocks = answer.findChildren(CodeBlock)
        assert len(blocks) == 1
        background, text_contrast = code_contrast(blocks[0])
        if theme == "dark":
            assert luminance(background) < 0.1, f"code background {background.name()} in dark"
        else:
            assert luminance(background) > 0.6, f"code background {background.name()} in light"
        assert text_contrast >= 4.5, f"{theme}: code text contrast {text_contrast:.1f}"
        # The link's colour is written into the document: it is the new palette's.
        link = app.palette().color(QPalette.ColorRole.Link)
        views = [v for v in answer.findChildren(AutoHeightText) if "link" in v.toPlainText()]
        assert views
        colours = set()
        block = views[0].document().begin()
        while block.isValid():
            piece = block.begin()
            while not piece.atEnd():
                fragment = piece.fragment()
                if fragment.text() == "link":
                    colours.add(fragment.charFormat().foreground().color().name())
                piece += 1
            block = block.next()
        assert colours == {link.name()}
        # Markdown still renders after the change: a heading, bold, no raw markers.
        assert "##" not in views[0].toPlainText() and "**" not in views[0].toPlainText()
        assert window.grab().save(str(screenshot_dir / f"chat_theme_{theme}_1024x700.png"))
    window.resize(1600, 1000)
    qtbot.wait(200)
    assert window.grab().save(str(screenshot_dir / "chat_theme_dark_1600x1000.png"))
    # A message added after the change takes the new theme too.
    later = chat._add_widget(
        "assistant", "```python\nvalue = compute(1, 2)\nprint(value, 'done')\n```"
    )
    block = later.findChildren(CodeBlock)[0]
    qtbot.waitUntil(lambda: block.isVisible() and block.view.height() > 20, timeout=5_000)
    qtbot.wait(200)
    background, text_contrast = code_contrast(block)
    assert luminance(background) < 0.1 and text_contrast >= 4.5
