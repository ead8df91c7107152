"""The app's look: one stylesheet that follows the palette (light or dark), and its icon."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QIcon, QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleOption, QWidget

from qwen_mtp_desktop.core.files.paths import resources_dir

ACCENT = "#5b6cff"
#: The outline of a check box or radio button (enabled, disabled) on a dark and on a light
#: palette: at least 3:1 against the window and base, as WCAG asks of a control's boundary.
INDICATOR_OUTLINE_DARK = ("#9aa0ad", "#5c6170")
INDICATOR_OUTLINE_LIGHT = ("#7d8393", "#b8bcc8")
#: Searched words in a chat-list snippet, and the message a search opened (light, dark): the
#: yellow of a find-in-page, dimmed on a dark palette so its text stays readable.
FOUND_MARK = ("#ffe27a", "#6e5a12")
FOUND_MESSAGE = ("#fff6cc", "#3d3518")


def app_icon() -> QIcon:
    return QIcon(str(resources_dir() / "icons" / "app.svg"))


def is_dark(app: QApplication) -> bool:
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def stylesheet(dark: bool) -> str:
    sidebar = "#1e1f24" if dark else "#f1f2f6"
    sidebar_text = "#c9ccd6" if dark else "#3b3f4a"
    selected = "#2d3140" if dark else "#e1e4ff"
    muted = "#9aa0ad" if dark else "#6b7080"
    banner_bg = "#2a2a1c" if dark else "#fff7dd"
    banner_border = "#6b5d1f" if dark else "#f0d98a"
    surface = "#24262c" if dark else "#ffffff"
    user_bg = "#2b3350" if dark else "#eef0ff"
    border = "#353842" if dark else "#e3e5ec"
    code_bg = "#1b1c20" if dark else "#f6f7f9"
    error = "#ff8a80" if dark else "#b3261e"
    error_bg = "#3a2426" if dark else "#fdeceb"
    # Keyboard focus: a ring on whatever Tab reached, clear on both backgrounds.
    focus = "#9aa6ff" if dark else "#3346e6"
    # A header toggle (Chats, Drafts, Chat options): off is an outline, on is filled.
    toggle_border = "#5c6170" if dark else "#b8bcc8"
    toggle_on = "#3a4486" if dark else "#e1e4ff"
    return f"""
    QListWidget#sidebar {{
        background: {sidebar};
        border: none;
        padding: 12px 8px;
        font-size: 14px;
        color: {sidebar_text};
        outline: 0;
    }}
    QListWidget#sidebar::item {{
        padding: 10px 12px;
        border-radius: 8px;
        margin: 2px 0;
    }}
    QListWidget#sidebar::item:selected {{
        background: {selected};
        color: {ACCENT if not dark else "#ffffff"};
        font-weight: 600;
    }}
    QLabel#panelHeading {{ font-size: 22px; font-weight: 600; }}
    QLabel#panelBody {{ font-size: 14px; color: {muted}; }}
    QLabel#muted {{ color: {muted}; }}
    QFrame#demoBanner {{
        background: {banner_bg};
        border: 1px solid {banner_border};
        border-radius: 8px;
    }}
    QFrame#healthBanner {{
        background: {"#3a2a14" if dark else "#fdf0e0"};
        border: 1px solid {"#a0641e" if dark else "#e8a33d"};
        border-radius: 8px;
    }}
    QFrame#conversationList {{ background: {sidebar}; border-right: 1px solid {border}; }}
    QListWidget#conversations {{ background: transparent; border: none; }}
    QListWidget#conversations::item {{ padding: 8px 6px; border-radius: 6px; }}
    QListWidget#conversations::item:selected {{ background: {selected}; color: palette(text); }}
    QFrame#chatHeader {{ border-bottom: 1px solid {border}; }}
    QLabel#chatTitle {{ font-size: 16px; font-weight: 600; }}
    QLabel#sectionTitle {{ font-size: 15px; font-weight: 600; }}
    QFrame#chatSettings {{ border-left: 1px solid {border}; }}
    QFrame#userMessage {{ background: {user_bg}; border-radius: 10px; }}
    QFrame#assistantMessage {{
        background: {surface}; border: 1px solid {border}; border-radius: 10px;
    }}
    QFrame#userMessage[found="true"], QFrame#assistantMessage[found="true"] {{
        background: {FOUND_MESSAGE[dark]};
    }}
    QLabel#roleLabel {{ font-weight: 600; }}
    QLabel#statsLabel, QLabel#liveStats {{ color: {muted}; font-size: 12px; }}
    QLabel#legend {{ color: {muted}; font-size: 11px; }}
    QLabel#messageError[severity="error"] {{ color: {error}; }}
    QFrame#answerProblem[severity="error"] {{
        background: {error_bg};
        border: 1px solid {error};
        border-left: 4px solid {error};
        border-radius: 6px;
    }}
    QLabel#messageError[severity="notice"] {{ color: {muted}; font-style: italic; }}
    QLabel#warningNote {{ color: #b26a00; font-size: 12px; }}
    QToolButton#messageAction {{ color: {muted}; font-size: 12px; padding: 1px 4px; }}
    QFrame#codeBlock {{ background: {code_bg}; border: 1px solid {border}; border-radius: 8px; }}
    QWidget#codeHeader {{ border-bottom: 1px solid {border}; }}
    QLabel#codeLanguage {{ color: {muted}; font-size: 12px; }}
    QFrame#thinkingBlock {{ border-left: 3px solid {border}; }}
    QTextBrowser#thinkingText {{ color: {muted}; }}
    QFrame#toolCall, QFrame#toolConsent {{ border-left: 3px solid {border}; }}
    QTextBrowser#toolCallDetails {{ color: {muted}; }}
    QToolButton#toolCallToggle {{ border: none; }}
    QFrame#composer {{ border-top: 1px solid {border}; }}
    QPlainTextEdit#composerEditor {{
        border: 1px solid {border}; border-radius: 8px; padding: 6px; background: {surface};
    }}
    QPushButton#sendButton {{
        background: {ACCENT}; color: white; border: none; border-radius: 8px; padding: 8px 14px;
        font-weight: 600;
    }}
    QPushButton#sendButton[stop="true"] {{ background: #d9534f; }}
    QPushButton#sendButton:disabled {{ background: {border}; }}
    QPushButton#promptChip {{
        border: 1px solid {border}; border-radius: 12px; padding: 4px 12px; background: {surface};
    }}
    QPushButton#promptChip:hover {{ border-color: {ACCENT}; }}
    QFrame#undoBar {{ background: {selected}; border-top: 1px solid {border}; }}
    QLabel#versionLabel {{ color: {muted}; font-size: 12px; }}
    QWidget#versionSwitcher QToolButton {{ font-size: 17px; font-weight: 600; padding: 0 5px; }}
    QToolButton#messageAction:disabled {{ color: {border}; }}
    QToolButton#headerToggle {{
        border: 1px solid {toggle_border}; border-radius: 6px; padding: 3px 8px;
        background: transparent;
    }}
    QToolButton#headerToggle:hover {{ border-color: {ACCENT}; }}
    QToolButton#headerToggle:checked {{
        background: {toggle_on}; border-color: {ACCENT}; color: {"#ffffff" if dark else "#1b2399"};
    }}
    QPushButton:focus, QToolButton:focus, QComboBox:focus, QCheckBox:focus,
    QRadioButton:focus, QSpinBox:focus, QDoubleSpinBox:focus, QLineEdit:focus,
    QPlainTextEdit:focus, QTextEdit:focus, QTextBrowser:focus, QListView:focus,
    QTreeView:focus, QTableView:focus, QSlider:focus, QScrollArea:focus,
    QListWidget#conversations:focus, QListWidget#sidebar:focus,
    QPlainTextEdit#composerEditor:focus, QPushButton#promptChip:focus {{
        border: 2px solid {focus}; border-radius: 6px;
    }}
    QToolButton#headerToggle:focus {{ border: 2px solid {focus}; }}
    QFrame#statusSeparator {{ color: {muted}; margin: 3px 4px; }}
    QPushButton#sendButton:focus {{ border: 2px solid {"#ffffff" if dark else "#1b2399"}; }}
    QPushButton#discoverLink {{
        color: {"#8f9bff" if dark else ACCENT}; border: none; background: transparent;
        text-decoration: underline; padding: 2px 0; text-align: left;
    }}
    """


# --- theme (Settings > Appearance) ------------------------------------------------------------


class IndicatorStyle(QProxyStyle):
    """The app's style over the platform's: on Fusion, check boxes and radio buttons (and an
    item view's check boxes) get an outline that stands out. Fusion outlines them in the window
    colour darkened, which on the dark theme's window leaves an unticked box or an unchosen
    radio button almost invisible (and reaches 1.7:1 on the light one); the box, tick and dot
    stay Fusion's own. Native styles (Windows, macOS) draw their own and are left alone."""

    _INDICATORS = (
        QStyle.PrimitiveElement.PE_IndicatorCheckBox,
        QStyle.PrimitiveElement.PE_IndicatorRadioButton,
        QStyle.PrimitiveElement.PE_IndicatorItemViewItemCheck,
    )

    def drawPrimitive(  # noqa: N802 (Qt override)
        self,
        element: QStyle.PrimitiveElement,
        option: QStyleOption,
        painter: QPainter,
        widget: QWidget | None = None,
    ) -> None:
        super().drawPrimitive(element, option, painter, widget)
        base = self.baseStyle()
        if element not in self._INDICATORS or base is None or base.name().lower() != "fusion":
            return
        dark = option.palette.color(QPalette.ColorRole.Window).lightness() < 128
        outline = INDICATOR_OUTLINE_DARK if dark else INDICATOR_OUTLINE_LIGHT
        enabled = bool(option.state & QStyle.StateFlag.State_Enabled)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(QColor(outline[0 if enabled else 1]), 1.2))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        rect = QRectF(option.rect).adjusted(0.5, 0.5, -0.5, -0.5)
        if element == QStyle.PrimitiveElement.PE_IndicatorRadioButton:
            painter.drawEllipse(rect)
        else:
            painter.drawRoundedRect(rect, 2, 2)
        painter.restore()


def use_indicator_style(app: QApplication) -> None:
    """Put `IndicatorStyle` over the app's current style, once."""
    if not isinstance(app.style(), IndicatorStyle):
        app.setStyle(IndicatorStyle(app.style().name()))


#: The desktop's own palette, kept the first time a theme is applied, for "system".
_system_palette: QPalette | None = None


def _palette(dark: bool) -> QPalette:
    """A complete light or dark palette (Fusion's roles), so a forced theme looks the same on
    every platform whatever the desktop uses."""
    colors = (
        {
            "window": "#202226",
            "text": "#e6e8ee",
            "base": "#1b1c20",
            "alternate": "#25272d",
            "button": "#2b2e35",
            "mid": "#4a4e59",
            "light": "#3a3d46",
            "dark": "#141518",
            "muted": "#9aa0ad",
            "disabled": "#6b7080",
            "link": "#8f9bff",
        }
        if dark
        else {
            "window": "#f7f8fa",
            "text": "#1d1f24",
            "base": "#ffffff",
            "alternate": "#f1f2f6",
            "button": "#eef0f4",
            "mid": "#b8bcc8",
            "light": "#ffffff",
            "dark": "#9aa0ad",
            "muted": "#6b7080",
            "disabled": "#a0a4b0",
            "link": ACCENT,
        }
    )
    palette = QPalette()
    role = QPalette.ColorRole
    pairs = {
        role.Window: "window",
        role.WindowText: "text",
        role.Base: "base",
        role.AlternateBase: "alternate",
        role.ToolTipBase: "base",
        role.ToolTipText: "text",
        role.Text: "text",
        role.Button: "button",
        role.ButtonText: "text",
        role.BrightText: "text",
        role.Light: "light",
        role.Midlight: "button",
        role.Mid: "mid",
        role.Dark: "dark",
        role.Shadow: "dark",
        role.PlaceholderText: "muted",
        role.Link: "link",
        role.LinkVisited: "link",
    }
    for palette_role, key in pairs.items():
        palette.setColor(palette_role, QColor(colors[key]))
    palette.setColor(role.Highlight, QColor(ACCENT))
    palette.setColor(role.HighlightedText, QColor("#ffffff"))
    disabled = QPalette.ColorGroup.Disabled
    for palette_role in (role.WindowText, role.Text, role.ButtonText):
        palette.setColor(disabled, palette_role, QColor(colors["disabled"]))
    return palette


def apply_theme(app: QApplication, theme: str) -> bool:
    """Apply "system", "light" or "dark" to the whole app at once; True when it is now dark.

    Widgets that draw with the palette follow at once; the window re-applies its stylesheets
    (MainWindow.apply_theme)."""
    global _system_palette
    use_indicator_style(app)
    if _system_palette is None:
        _system_palette = QPalette(app.palette())
    hints = app.styleHints()
    if theme in ("light", "dark"):
        if hasattr(hints, "setColorScheme"):  # Qt 6.8+: native styles follow too
            hints.setColorScheme(Qt.ColorScheme.Dark if theme == "dark" else Qt.ColorScheme.Light)
        app.setPalette(_palette(theme == "dark"))
    else:
        if hasattr(hints, "unsetColorScheme"):
            hints.unsetColorScheme()
        app.setPalette(_system_palette)
    return is_dark(app)
