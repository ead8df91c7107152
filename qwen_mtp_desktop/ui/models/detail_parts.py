"""Small pieces of the Models panel's details pane: labels, label/value forms, diagnostic rows,
and the status of a component row."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.models.folders.report import ComponentReport, Diagnostic
from qwen_mtp_desktop.core.units import keep_units
from qwen_mtp_desktop.ui.models.common import SEVERITY_WORDS
from qwen_mtp_desktop.ui.models.finding_words import PASSED_CODES, finding_heading
from qwen_mtp_desktop.ui.widgets.labels import text_label
from qwen_mtp_desktop.ui.widgets.status_icons import status_pixmap

SELECTABLE = Qt.TextInteractionFlag.TextSelectableByMouse
FORM_LABEL_WIDTH = 190


def muted_color(palette: QPalette) -> str:
    """Text colour halfway to the background, as a solid "#rrggbb" for rich text.

    (PlaceholderText is the text colour with alpha, which rich text would draw opaque.)
    """
    text = palette.color(QPalette.ColorRole.WindowText)
    back = palette.color(QPalette.ColorRole.Window)
    mix = [
        round(0.55 * a + 0.45 * b)
        for a, b in (
            (text.red(), back.red()),
            (text.green(), back.green()),
            (text.blue(), back.blue()),
        )
    ]
    return "#{:02x}{:02x}{:02x}".format(*mix)


def repolish(widget: QWidget) -> None:
    """Re-apply the stylesheet after a dynamic property changed."""
    style = widget.style()
    style.unpolish(widget)
    style.polish(widget)


class DiagnosticRow(QFrame):
    """One finding: its icon, a heading in words, the message, and the fix. The stable code
    (CHECKSUM_MISMATCH, ...) is in the tooltip, for a bug report, not in the text."""

    def __init__(self, diagnostic: Diagnostic, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.diagnostic = diagnostic
        self.setObjectName("diagnosticRow")
        passed = diagnostic.code in PASSED_CODES
        status = "ok" if passed else diagnostic.severity
        self.setToolTip(f"Code for support: {diagnostic.code}")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 4)
        layout.setSpacing(10)
        icon = QLabel()
        icon.setPixmap(status_pixmap(status, 18))
        icon.setFixedSize(18, 18)
        icon.setToolTip("Passed" if passed else SEVERITY_WORDS[diagnostic.severity])
        layout.addWidget(icon, 0, Qt.AlignmentFlag.AlignTop)
        text = QVBoxLayout()
        text.setSpacing(2)
        self.heading_label = text_label(
            finding_heading(diagnostic), "diagnosticCode", selectable=True
        )
        self.message_label = text_label(diagnostic.message, selectable=True)
        text.addWidget(self.heading_label)
        text.addWidget(self.message_label)
        self.fix_label: QLabel | None = None
        if diagnostic.fix:
            self.fix_label = text_label(f"Fix: {diagnostic.fix}", "diagnosticFix", selectable=True)
            text.addWidget(self.fix_label)
        layout.addLayout(text, 1)

    @property
    def code(self) -> str:
        return self.diagnostic.code


class Form(QWidget):
    """Label / value rows whose values can be replaced."""

    def __init__(self, names: Sequence[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        grid = QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setHorizontalSpacing(16)
        grid.setVerticalSpacing(6)
        grid.setColumnStretch(1, 1)
        grid.setColumnMinimumWidth(0, FORM_LABEL_WIDTH)  # every form's values line up
        self.values: dict[str, QLabel] = {}
        for row, name in enumerate(names):
            key = text_label(name, "formLabel", wrap=False, selectable=True)
            value = text_label(selectable=True)
            grid.addWidget(key, row, 0, Qt.AlignmentFlag.AlignTop)
            grid.addWidget(value, row, 1)
            self.values[name] = value

    def set(self, name: str, text: str, tooltip: str = "") -> None:
        self.values[name].setText(keep_units(text))
        self.values[name].setToolTip(tooltip)


def clear_layout(layout: QVBoxLayout | QGridLayout) -> None:
    while layout.count():
        item = layout.takeAt(0)
        widget = item.widget() if item is not None else None
        if widget is not None:
            widget.hide()  # deleteLater leaves it painted until the next event-loop turn
            widget.deleteLater()


_VERSION_ORDER = ("optimum-intel", "openvino", "openvino-tokenizers", "nncf", "transformers")


def version_order(item: tuple[str, str]) -> tuple[int, str]:
    name = item[0]
    return (_VERSION_ORDER.index(name) if name in _VERSION_ORDER else len(_VERSION_ORDER), name)


def integrity_summary(findings: Sequence[Diagnostic]) -> tuple[str, str]:
    """A checksum check's outcome as (status icon, one sentence): "All 3 files match the
    export record." or the worst finding, for the line under Verify and the status line."""
    errors = [d for d in findings if d.severity == "error"]
    if errors:
        more = f" (and {len(errors) - 1} more, see Integrity)" if len(errors) > 1 else ""
        return "error", f"Problems found: {errors[0].message}{more}"
    text = " ".join(d.message for d in findings) or "Done."
    if any(d.severity == "warning" for d in findings):
        return "warning", text
    # Only a full pass is a tick: a stopped check proved nothing.
    return ("ok" if any(d.code in PASSED_CODES for d in findings) else "pending"), text


def component_status(component: ComponentReport) -> str:
    """The icon for a component row: ok, error, warning, or pending (optional and absent)."""
    critical = component.use == "chat" and component.key != "mtp"
    if not component.xml_present and not component.bin_present:
        if component.key == "mtp":
            return "warning"
        return "error" if critical else "pending"
    if component.readable:
        return "ok"
    return "error" if critical else "warning"
