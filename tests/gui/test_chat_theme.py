"""Issue 28: switching the theme at run time restyles answers already on screen. The real
window (offscreen) and its real Settings path (MainWindow.apply_theme); the colours checked are
the ones actually painted (the widgets grabbed, pixels sampled) and the ones in the documents."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QRadioButton,
    QStyle,
    QStyleOptionButton,
    QWidget,
)
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.bench.charts import DEPTH_COLORS, DEPTH_COLORS_DARK, Series
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


def _boundary_contrast(widget: QWidget, rect: QRect) -> float:
    """How far the most contrasting colour painted in `rect` of `widget` (covering at least 6
    pixels: antialiasing makes in-between shades) stands from the widget's background."""
    image = widget.grab(rect).toImage()
    background = widget.palette().color(QPalette.ColorRole.Window)
    _, others = painted(image)
    return max((contrast(background, c) for c, n in others if n >= 6), default=1.0)


def _indicator(widget: QCheckBox | QRadioButton) -> QRect:
    option = QStyleOptionButton()
    widget.initStyleOption(option)
    element = (
        QStyle.SubElement.SE_CheckBoxIndicator
        if isinstance(widget, QCheckBox)
        else QStyle.SubElement.SE_RadioButtonIndicator
    )
    return widget.style().subElementRect(element, option, widget)


def _fill(widget: QWidget) -> QColor:
    """The colour most painted inside a widget, its border left out."""
    rect = widget.rect().adjusted(4, 4, -4, -4)
    background, _ = painted(widget.grab(rect).toImage())
    return background


def test_dark_theme_controls_show_their_state(qtbot: QtBot, screenshot_dir: Path) -> None:
    """Issue 44, minor 10, in the real window: in the dark theme an unticked check box and an
    unchosen radio button are outlined at 3:1 against the window, the header's Drafts toggle
    on and off are drawn apart, and the acceptance chart's bars (every depth) stand at 3:1
    against the chart's background; the light theme keeps all three."""
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    qtbot.addWidget(window)
    try:
        window.resize(1024, 700)
        window.show()
        qtbot.waitExposed(window)
        chat = window.chat
        chat.settings_toggle.setChecked(True)
        for theme in ("dark", "light"):
            window.apply_theme(theme)
            qtbot.wait(100)
            # Check boxes and radio buttons, unticked, in Chat options and the Export wizard.
            thinking = chat.settings_panel.thinking_check
            thinking.setChecked(False)
            assert thinking.isVisible()
            assert _boundary_contrast(thinking, _indicator(thinking)) >= 3.0, theme
            window.show_panel("Export")
            export = window.export_panel
            export.show_page(2)
            qtbot.wait(50)
            radio = export.format_radios["int8"]
            assert radio.isVisible() and not radio.isChecked()
            assert _boundary_contrast(radio, _indicator(radio)) >= 3.0, theme
            window.resize(1024, 700)
            QApplication.processEvents()
            assert window.grab().save(str(screenshot_dir / f"theme_{theme}_export-1024x700.png"))
            window.show_panel("Chat")
            # Drafts on and off: the button's fill differs clearly.
            drafts = chat.drafts_toggle
            drafts.setChecked(False)
            QApplication.processEvents()
            off = _fill(drafts)
            drafts.setChecked(True)
            QApplication.processEvents()
            on = _fill(drafts)
            assert contrast(on, off) >= 1.5, (theme, on.name(), off.name())
            for width, height in ((1024, 700), (1600, 1000)):
                window.resize(width, height)
                QApplication.processEvents()
                name = f"theme_{theme}_chat-{width}x{height}.png"
                assert window.grab().save(str(screenshot_dir / name))
            drafts.setChecked(False)
            # The acceptance chart, depths 1 to 6: each bar's colour is painted, at 3:1.
            window.show_panel("Benchmark")
            chart = window.bench.acceptance_chart
            chart.set_series([Series(f"n={d}", (0.9,) * d) for d in range(1, 7)])
            chart.resize(900, 320)
            image = chart.render_image(ratio=1.0)
            background = chart.palette().base().color()
            ramp = DEPTH_COLORS_DARK if theme == "dark" else DEPTH_COLORS
            colours = {QColor(c).rgb() for c in ramp}
            seen = {c.rgb(): n for c, n in painted(image)[1] if c.rgb() in colours}
            assert set(seen) == colours, theme
            worst = min(contrast(background, QColor.fromRgb(c)) for c in colours)
            assert worst >= 3.0, (theme, worst)
            assert image.save(str(screenshot_dir / f"theme_{theme}_acceptance.png"))
            window.show_panel("Chat")
    finally:
        window.apply_theme("system")  # the app's palette is global: leave it as found
        window.close()
