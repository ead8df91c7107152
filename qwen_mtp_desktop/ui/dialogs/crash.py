"""Shows an unhandled error once, in plain words, with the details folded away."""

from __future__ import annotations

from typing import Protocol

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QMessageBox, QWidget

from qwen_mtp_desktop.core.system.crash import CrashHandler, CrashReport


class _Notices(Protocol):
    def show_notice(self, title: str, text: str) -> None: ...


def announce_previous_crash(window: _Notices, handler: CrashHandler) -> bool:
    """Tell the user, in the window, that the previous run ended in a native crash (until now
    only the log said so). True when there was one."""
    dump = handler.previous_native_crash
    if not dump:
        return False
    first = next((line.strip() for line in dump.splitlines() if line.strip()), "")
    window.show_notice(
        "The app closed unexpectedly last time",
        "The previous session ended in a crash of the native runtime "
        f"({first}). Your conversations are kept; an answer that was being written is marked "
        f"incomplete.\n\nThe crash report is saved in {handler.previous_native_crash_file} "
        "(please attach it when you report the problem).",
    )
    return True


class CrashNotifier(QObject):
    """Receives crash reports from any thread and shows the first one on the GUI thread.

    Signals:
        reported(CrashReport): emitted from the crashing thread; queued to the GUI thread.
    """

    reported = Signal(object)

    def __init__(self, parent_widget: QWidget | None = None) -> None:
        super().__init__()
        self._parent_widget = parent_widget
        self._shown = False
        self.dialog: QMessageBox | None = None
        self.reported.connect(self._on_reported, Qt.ConnectionType.QueuedConnection)

    def set_parent_widget(self, widget: QWidget | None) -> None:
        self._parent_widget = widget

    def notify(self, report: CrashReport) -> None:
        """Thread-safe entry point for core.system.crash.CrashHandler."""
        self.reported.emit(report)

    @Slot(object)
    def _on_reported(self, report: CrashReport) -> None:
        if self._shown:  # one dialog per session; later errors are in the log
            return
        self._shown = True
        box = QMessageBox(self._parent_widget)
        box.setIcon(QMessageBox.Icon.Critical)
        box.setWindowTitle("Something went wrong")
        box.setText(
            "An unexpected error occurred. Your conversations and models are safe.\n\n"
            f"{report.summary}"
        )
        box.setInformativeText(f"Details are in the log file:\n{report.log_file}")
        box.setDetailedText(report.details)
        self.dialog = box  # keep it alive: a parentless box would be collected at once
        box.open()
