"""The app's look: one stylesheet that follows the palette (light or dark), and its icon."""

from __future__ import annotations

from PySide6.QtGui import QIcon, QPalette
from PySide6.QtWidgets import QApplication

from qwen_mtp_desktop.core.paths import resources_dir

ACCENT = "#5b6cff"


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
    # Keyboard focus: a ring on whatever Tab reached, clear on both backgrounds.
    focus = "#9aa6ff" if dark else "#3346e6"
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
    QLabel#roleLabel {{ font-weight: 600; }}
    QLabel#statsLabel, QLabel#liveStats {{ color: {muted}; font-size: 12px; }}
    QLabel#legend {{ color: {muted}; font-size: 11px; }}
    QLabel#messageError[severity="error"] {{ color: {error}; }}
    QLabel#messageError[severity="notice"] {{ color: {muted}; font-style: italic; }}
    QLabel#warningNote {{ color: #b26a00; font-size: 12px; }}
    QToolButton#messageAction {{ color: {muted}; font-size: 12px; padding: 1px 4px; }}
    QFrame#codeBlock {{ background: {code_bg}; border: 1px solid {border}; border-radius: 8px; }}
    QWidget#codeHeader {{ border-bottom: 1px solid {border}; }}
    QLabel#codeLanguage {{ color: {muted}; font-size: 12px; }}
    QFrame#thinkingBlock {{ border-left: 3px solid {border}; }}
    QTextBrowser#thinkingText {{ color: {muted}; }}
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
    QPushButton:focus, QToolButton:focus, QComboBox:focus, QCheckBox:focus,
    QRadioButton:focus, QSpinBox:focus, QDoubleSpinBox:focus, QLineEdit:focus,
    QPlainTextEdit:focus, QTextEdit:focus, QTextBrowser:focus, QListView:focus,
    QTreeView:focus, QTableView:focus, QSlider:focus, QScrollArea:focus,
    QListWidget#conversations:focus, QListWidget#sidebar:focus,
    QPlainTextEdit#composerEditor:focus, QPushButton#promptChip:focus {{
        border: 2px solid {focus}; border-radius: 6px;
    }}
    QPushButton#sendButton:focus {{ border: 2px solid {"#ffffff" if dark else "#1b2399"}; }}
    """
