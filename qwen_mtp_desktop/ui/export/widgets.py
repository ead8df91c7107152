"""Pieces of the export wizard: status icons, checklist rows, the injectable dialogs, texts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.ui.widgets.asking import choose_folder, confirm
from qwen_mtp_desktop.ui.widgets.status_icons import status_color, status_pixmap
from qwen_mtp_desktop.ui.widgets.style import ACCENT

STATUS_COLORS = {status: status_color(status) for status in ("pass", "warn", "fail", "pending")}

WEIGHT_FORMAT_TEXT = {
    "fp16": "Full quality, largest (2 bytes per weight). Slow on CPU for big models; use it to "
    "check accuracy.",
    "int8": "Close to FP16 quality at half the size (1 byte per weight).",
    "int4": "Smallest and fastest on CPU (about 0.5 byte per weight), with a small accuracy "
    "loss. Recommended for chat.",
}
MTP_FORMAT_TEXT = {
    "default": "Recommended: like the main model (FP16 for FP16 exports), with the RoPE "
    "frequencies kept in full precision. The result is read back and shown after the export.",
    "same": "Exactly like the main model, RoPE frequencies in full precision. Keeps draft cost "
    "and acceptance in line with it.",
    "none": "No compression (FP16): the most faithful drafts, at 2-4x the head's compressed "
    "size (the head is ~3 % of the model).",
    "int8": "INT8 whatever the main format: a middle ground. RoPE frequencies stay in full "
    "precision.",
    "int4": "INT4: the lightest, fastest drafts; acceptance may drop a little. RoPE "
    "frequencies stay in full precision.",
}
MTP_TRADE_OFF = (
    "The MTP head drafts tokens that the main model then checks, so the answer is the same "
    "whatever you pick: a lighter head drafts faster, a heavier one is accepted more often."
)
FALLBACK_TEXT = {
    "ignore": "Layers that fit no group stay in full precision (the MTP head's RoPE frequencies "
    "need this).",
    "adjust": "Such layers get a smaller group, or INT8 if none fits.",
    "error": "Stop the export: INT4 then fails on the MTP head's RoPE frequencies.",
}
FALLBACK_LABELS = {"ignore": "ignore (recommended)", "adjust": "adjust", "error": "error"}
TRUST_REMOTE_CODE_TEXT = (
    "Runs Python code that ships with the checkpoint during the export. Qwen3.5 does not need "
    "it; turn it on only for a model whose code you have read."
)


def check_pixmap(status: str, size: int = 18) -> QPixmap:
    """The wizard's status icon (pass / warn / fail / pending), its glyph a little smaller."""
    return status_pixmap(status, size, glyph_scale=0.62)


class CheckRow(QFrame):
    """One checklist line: icon, title, message and (muted) fix; `compact` fits one line."""

    def __init__(
        self,
        status: str,
        title: str,
        message: str,
        fix: str = "",
        parent: QWidget | None = None,
        *,
        compact: bool = False,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("compactRow" if compact else "checkRow")
        self.status = status
        layout = QHBoxLayout(self)
        layout.setContentsMargins(*((2, 1, 2, 1) if compact else (10, 8, 10, 8)))
        layout.setSpacing(8 if compact else 10)
        icon = QLabel()
        icon.setPixmap(check_pixmap(status, 16 if compact else 18))
        icon.setFixedSize(18 if compact else 20, 18 if compact else 20)
        layout.addWidget(icon, 0, Qt.AlignmentFlag.AlignTop)
        text = QVBoxLayout()
        text.setSpacing(2)
        self.title_label = QLabel(title)
        self.title_label.setObjectName("checkTitle")
        self.message_label = QLabel(message)
        self.message_label.setWordWrap(True)
        self.message_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        if compact:
            self.title_label.setFixedWidth(150)
            line = QHBoxLayout()
            line.setSpacing(8)
            line.addWidget(self.title_label, 0, Qt.AlignmentFlag.AlignTop)
            line.addWidget(self.message_label, 1)
            text.addLayout(line)
        else:
            text.addWidget(self.title_label)
            text.addWidget(self.message_label)
        self.fix_label = QLabel(fix)
        self.fix_label.setObjectName("checkFix")
        self.fix_label.setWordWrap(True)
        self.fix_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        if compact:
            self.fix_label.setContentsMargins(158, 0, 0, 0)
        self.fix_label.setVisible(bool(fix) and status != "pass")
        text.addWidget(self.fix_label)
        layout.addLayout(text, 1)
        # Never squeeze a row below its text: in a scroll area, wrapped labels would overlap.
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)


class Checklist(QWidget):
    """A column of CheckRows; `set_items` replaces them."""

    def __init__(
        self, parent: QWidget | None = None, *, compact: bool = False, compact_passes: bool = False
    ) -> None:
        super().__init__(parent)
        self.compact = compact
        #: Passed checks take one line, so failures and warnings stand out.
        self.compact_passes = compact_passes
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.setSpacing(2 if compact else 6)
        self.rows: list[CheckRow] = []

    def set_items(self, items: Sequence[tuple[str, str, str, str]]) -> None:
        """(status, title, message, fix) tuples; failures first, then warnings, then passes."""
        for row in self.rows:
            row.deleteLater()
        self.rows = []
        order = {"fail": 0, "warn": 1, "pending": 2, "pass": 3}
        for status, title, message, fix in sorted(items, key=lambda item: order[item[0]]):
            compact = self.compact or (self.compact_passes and status == "pass")
            row = CheckRow(status, title, message, fix, compact=compact)
            self._layout.addWidget(row)
            self.rows.append(row)


@dataclass
class ExportDialogs:
    """Everything the wizard asks the user; tests replace these."""

    #: (parent, title, start folder) -> chosen folder or None.
    choose_folder: Callable[[QWidget, str, Path], Path | None] = choose_folder
    #: (parent, title, text, action button, the other button) -> True to go ahead.
    confirm: Callable[[QWidget, str, str, str, str], bool] = confirm


def panel_style() -> str:
    """Rules for the wizard's own object names (the app stylesheet covers the rest)."""
    return f"""
    QLabel#wizardTitle {{ font-size: 20px; font-weight: 600; }}
    QLabel#stepLabel {{ color: palette(placeholder-text); padding: 2px 6px; }}
    QLabel#stepLabel[current="true"] {{ color: {ACCENT}; font-weight: 600; }}
    QLabel#pageTitle {{ font-size: 15px; font-weight: 600; }}
    QLabel#hint, QLabel#checkFix {{ color: palette(placeholder-text); }}
    QLabel#checkTitle {{ font-weight: 600; }}
    QLabel#optionsProblems[status="warn"] {{ color: {STATUS_COLORS["warn"]}; }}
    QLabel#optionsProblems[status="fail"] {{ color: {STATUS_COLORS["fail"]}; }}
    QFrame#checkRow {{ border: 1px solid palette(midlight); border-radius: 8px; }}
    QFrame#compactRow {{ margin-left: 8px; }}
    QFrame#toolkitBanner {{
        border: 1px solid {STATUS_COLORS["warn"]}; border-radius: 8px;
        background: rgba(208, 132, 0, 0.08);
    }}
    QFrame#resultBox {{ border-radius: 8px; border: 1px solid palette(midlight); }}
    QFrame#resultBox[status="succeeded"] {{ border-color: {STATUS_COLORS["pass"]}; }}
    QFrame#resultBox[status="failed"] {{ border-color: {STATUS_COLORS["fail"]}; }}
    QLabel#resultTitle {{ font-size: 15px; font-weight: 600; }}
    QLabel#commandLine {{
        font-family: monospace; background: palette(base); border: 1px solid palette(midlight);
        border-radius: 4px; padding: 4px 6px;
    }}
    QLabel#stageLabel {{ font-weight: 600; }}
    QPlainTextEdit#exportLog {{ font-family: monospace; font-size: 11px; }}
    QPushButton#primaryAction {{
        background: {ACCENT}; color: white; border: none; border-radius: 6px;
        padding: 6px 16px; font-weight: 600;
    }}
    QPushButton#primaryAction:disabled {{ background: palette(mid); }}
    QPushButton#dangerAction {{ color: {STATUS_COLORS["fail"]}; }}
    """
