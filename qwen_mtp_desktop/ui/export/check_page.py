"""The export wizard's Check page: the preflight checklist, its summary and the size estimate.

It comes before the Options page, so it does not judge the settings of a format the user has
not chosen yet (the INT4 group size): those checks are shown on the Options page as the
options change, and in this list only for the check run right before exporting.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.models.export.preflight.checks import PreflightReport
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.ui.export.widgets import Checklist
from qwen_mtp_desktop.ui.widgets.labels import text_label

#: Checks of the chosen format's settings.
OPTION_CHECKS = frozenset({"group_size"})
#: Failures the Options page can fix.
OPTION_FIXABLE = frozenset({"destination", "group_size", "disk"})


def only_option_failures(report: PreflightReport) -> bool:
    return all(item.key in OPTION_FIXABLE for item in report.failures)


def option_warnings(report: PreflightReport) -> str:
    """The warnings about the chosen settings (the Options page shows them) as the text that
    asks before exporting with them; "" when there are none."""
    return "\n\n".join(
        f"{item.message} {item.fix}".strip()
        for item in report.items
        if item.key in OPTION_CHECKS and item.status == "warn"
    )


class CheckPage(QWidget):
    """Widgets only; the panel runs the checks and connects the buttons."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(10)
        outer.addWidget(text_label("Preflight checks", "pageTitle"))
        self.check_summary = text_label()
        outer.addWidget(self.check_summary)
        self.check_busy = QProgressBar()
        self.check_busy.setRange(0, 0)
        self.check_busy.setTextVisible(False)
        self.check_busy.setMaximumHeight(6)
        outer.addWidget(self.check_busy)
        content = QWidget()
        content_layout = QVBoxLayout(content)
        content_layout.setContentsMargins(0, 0, 8, 0)
        self.checklist = Checklist(compact_passes=True)
        content_layout.addWidget(self.checklist)
        self.estimate_label = text_label("", "hint")
        content_layout.addWidget(self.estimate_label)
        content_layout.addStretch(1)
        area = QScrollArea()
        area.setWidgetResizable(True)
        area.setFrameShape(QFrame.Shape.NoFrame)
        area.setWidget(content)
        outer.addWidget(area, 1)
        self.back_button = QPushButton("Back")
        self.recheck_button = QPushButton("Check again")
        self.options_button = QPushButton("Next: options")
        self.options_button.setObjectName("primaryAction")
        row = QHBoxLayout()
        row.addWidget(self.back_button)
        row.addStretch(1)
        row.addWidget(self.recheck_button)
        row.addWidget(self.options_button)
        outer.addLayout(row)

    def show_report(
        self, report: PreflightReport, *, with_options: bool, weight_format: str
    ) -> None:
        """The checklist; the checks of the format's settings only `with_options`."""
        self.check_busy.hide()
        self.recheck_button.setEnabled(True)
        items = [i for i in report.items if with_options or i.key not in OPTION_CHECKS]
        self.checklist.set_items([(i.status, i.title, i.message, i.fix) for i in items])
        failures = len([i for i in items if i.status == "fail"])
        warnings = len([i for i in items if i.status == "warn"])
        if failures:
            self.check_summary.setText(
                f"{failures} problem{'s' if failures > 1 else ''} must be fixed before exporting."
            )
        elif warnings:
            self.check_summary.setText(
                f"Ready to export, with {warnings} warning{'s' if warnings > 1 else ''}."
            )
        else:
            self.check_summary.setText("Ready to export.")
        self.options_button.setEnabled(report.ok or only_option_failures(report))
        estimate = report.estimate
        if estimate is not None:
            self.estimate_label.setText(
                f"{estimate.parameters:,} parameters ({estimate.mtp_parameters:,} in the MTP "
                f"head). With {weight_format.upper()} weights (the next page chooses) the "
                f"export needs about {format_bytes(estimate.output_bytes)} for the model plus "
                f"{format_bytes(estimate.scratch_bytes)} while it works, and about "
                f"{format_bytes(estimate.peak_ram_bytes)} of RAM at its peak."
            )
