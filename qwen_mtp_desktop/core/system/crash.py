"""Catch unhandled exceptions on every thread, and native crashes via faulthandler.

Python exceptions are logged with their traceback and handed to `on_crash` (the UI shows one
dialog with the log path; the traceback stays in the log, not in the user's face). A native crash
cannot be reported while it happens, so faulthandler writes it to a file that the next start
reads and reports.
"""

from __future__ import annotations

import faulthandler
import logging
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from qwen_mtp_desktop.core.files.private_files import open_private_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CrashReport:
    summary: str
    details: str
    thread_name: str
    log_file: Path


CrashCallback = Callable[[CrashReport], None]


class CrashHandler:
    def __init__(
        self, log_dir: Path, log_file: Path, on_crash: CrashCallback | None = None
    ) -> None:
        self._native_file = log_dir / "native-crash.log"
        self._log_file = log_file
        self._on_crash = on_crash
        self._native_handle: IO[str] | None = None
        self._previous_excepthook = sys.excepthook
        self._previous_threading_hook = threading.excepthook
        self._lock = threading.Lock()
        #: The native crash dump of the previous run, found by install() (None: it ended well).
        self.previous_native_crash: str | None = None

    def set_callback(self, on_crash: CrashCallback | None) -> None:
        self._on_crash = on_crash

    @property
    def previous_native_crash_file(self) -> Path:
        """Where the previous run's native crash dump is kept once it has been read."""
        return self._native_file.with_suffix(".previous.log")

    def take_previous_native_crash(self) -> str | None:
        """The faulthandler dump left by a previous run that died natively, if any (read once)."""
        try:
            text = self._native_file.read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            return None
        if not text:
            return None
        self._native_file.replace(self.previous_native_crash_file)
        return text

    def install(self) -> None:
        self._native_file.parent.mkdir(parents=True, exist_ok=True)
        previous = self.take_previous_native_crash()
        if previous:
            log.error("the previous run crashed natively:\n%s", previous)
            self.previous_native_crash = previous
        self._native_handle = open_private_text(self._native_file, "w")
        faulthandler.enable(self._native_handle, all_threads=True)
        sys.excepthook = self._excepthook
        threading.excepthook = self._threading_excepthook

    def uninstall(self) -> None:
        sys.excepthook = self._previous_excepthook
        threading.excepthook = self._previous_threading_hook
        if self._native_handle is not None:
            faulthandler.disable()
            self._native_handle.close()
            self._native_handle = None
            # A clean exit leaves no dump behind, so the next start reports nothing.
            if self._native_file.exists() and self._native_file.stat().st_size == 0:
                self._native_file.unlink()

    def report(
        self,
        exc_type: type[BaseException],
        exc: BaseException,
        tb: TracebackType | None,
        thread_name: str,
    ) -> None:
        details = "".join(traceback.format_exception(exc_type, exc, tb))
        log.critical("unhandled exception in thread %s:\n%s", thread_name, details)
        report = CrashReport(
            summary=f"{exc_type.__name__}: {exc}",
            details=details,
            thread_name=thread_name,
            log_file=self._log_file,
        )
        callback = self._on_crash
        if callback is not None:
            with self._lock:
                callback(report)

    def _excepthook(
        self, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
    ) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            self._previous_excepthook(exc_type, exc, tb)
            return
        self.report(exc_type, exc, tb, threading.current_thread().name)

    def _threading_excepthook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_value is None:
            return
        name = args.thread.name if args.thread is not None else "unknown thread"
        self.report(args.exc_type, args.exc_value, args.exc_traceback, name)
