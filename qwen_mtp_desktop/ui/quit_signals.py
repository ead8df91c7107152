"""SIGTERM and SIGINT close the window the normal way, so a logout or Ctrl+C in a terminal
still writes what is pending (the chat being streamed, settings, window geometry).

Python runs signal handlers only between bytecodes, and while Qt's event loop waits in C++ no
bytecode runs: a handler would wait for the next mouse move. As in qutebrowser's SignalHandler,
the C-level handler writes to a socket (`signal.set_wakeup_fd`) that a QSocketNotifier watches,
which wakes the loop so the Python handler runs at once. Windows has no wakeup socket for
console events here, so a short timer gives the interpreter its chance instead. A second
signal while closing restores the default action: the process then stops at once.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from PySide6.QtCore import QObject, QSocketNotifier, QTimer

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class QuitSignals(QObject):
    """Calls `on_quit(signal name)` on the GUI thread when SIGTERM or SIGINT arrives."""

    def __init__(self, on_quit: Callable[[str], None], parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._on_quit = on_quit
        self._previous: dict[int, Any] = {}
        self._sockets: tuple[socket.socket, socket.socket] | None = None
        self._notifier: QSocketNotifier | None = None
        self._timer: QTimer | None = None
        self._previous_wakeup = -1
        self._quitting = False

    def activate(self) -> None:
        for number in SIGNALS:
            self._previous[number] = signal.signal(number, self._handle)
        if sys.platform == "win32":
            self._timer = QTimer(self)
            self._timer.timeout.connect(lambda: None)  # lets Python run pending handlers
            self._timer.start(300)
            return
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        self._sockets = (reader, writer)
        self._previous_wakeup = signal.set_wakeup_fd(writer.fileno())
        self._notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._drain)

    def deactivate(self) -> None:
        """Put back what was there before (the app is exiting)."""
        for number, previous in self._previous.items():
            with contextlib.suppress(TypeError, ValueError):
                signal.signal(number, previous)
        self._previous.clear()
        if self._timer is not None:
            self._timer.stop()
        if self._notifier is not None:
            self._notifier.setEnabled(False)
        if self._sockets is not None:
            signal.set_wakeup_fd(self._previous_wakeup)
            for sock in self._sockets:
                sock.close()
            self._sockets = None

    def _drain(self) -> None:
        """The wakeup bytes carry nothing the handler needs; reading them keeps the socket
        from filling up."""
        if self._sockets is not None:
            with contextlib.suppress(OSError):
                while self._sockets[0].recv(512):
                    pass

    def _handle(self, number: int, _frame: FrameType | None) -> None:
        name = signal.Signals(number).name
        if self._quitting:
            log.warning("%s again while closing: stopping now", name)
            signal.signal(number, signal.SIG_DFL)
            signal.raise_signal(number)
            return
        self._quitting = True
        log.info("%s received: closing the window (a second one stops at once)", name)
        QTimer.singleShot(0, lambda: self._on_quit(name))
