"""One app window per profile: a second start brings the running app forward and exits.

Two app processes on one profile would share the chat database, and the store recovers
answers left "streaming" by a crash when it opens, so a second process would cut off the
first one's answer. The running app therefore holds a lock file in its data folder
(`QLockFile`, which also notices a lock left by a crashed process) and listens on a local
socket (`QLocalServer`) named after that folder. A later start that finds the lock taken
connects to the socket, says "activate" and exits; the running app raises its window.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

log = logging.getLogger(__name__)

LOCK_NAME = "app.lock"
ACTIVATE = b"activate\n"
#: How long a second start keeps trying to reach a first one that is still starting up.
CONNECT_TIMEOUT_S = 5.0


def server_name(data_dir: Path) -> str:
    """A short socket name unique to the user and the profile folder."""
    digest = hashlib.sha256(str(data_dir.resolve()).encode("utf-8")).hexdigest()[:16]
    user = os.getuid() if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    return f"qwen-mtp-desktop-{user}-{digest}"


class SingleInstance(QObject):
    """Signals:
    activated(): another start of the app asked this one to come forward.
    """

    activated = Signal()

    def __init__(self, data_dir: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        data_dir.mkdir(parents=True, exist_ok=True)
        self.name = server_name(data_dir)
        self._lock = QLockFile(str(data_dir / LOCK_NAME))
        self._lock.setStaleLockTime(0)  # only a dead owner makes the lock stale, never age
        self._server: QLocalServer | None = None

    @property
    def primary(self) -> bool:
        return self._server is not None

    def claim(self) -> bool:
        """True: this is the only instance (it now listens). False: another one runs and was
        asked to come forward; the caller should exit."""
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            if self._lock.tryLock(0):
                self._listen()
                return True
            if self._notify_running():
                return False
            if time.monotonic() > deadline:
                # The lock's owner neither answers nor is dead (e.g. hung): do not start a
                # second app on the same data; the user can end the hung one.
                log.warning("another instance holds %s but does not answer", LOCK_NAME)
                return False
            time.sleep(0.1)

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        self._lock.unlock()

    def _listen(self) -> None:
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        # A socket file left by a crashed instance would make listen() fail; we hold the lock,
        # so any existing one is stale.
        QLocalServer.removeServer(self.name)
        if not server.listen(self.name):
            log.warning("single-instance socket unavailable: %s", server.errorString())
            return
        server.newConnection.connect(self._on_connection)
        self._server = server

    def _notify_running(self) -> bool:
        socket = QLocalSocket()
        socket.connectToServer(self.name)
        if not socket.waitForConnected(500):
            return False
        socket.write(ACTIVATE)
        socket.flush()
        socket.waitForBytesWritten(1000)
        socket.disconnectFromServer()
        return True

    def _on_connection(self) -> None:
        server = self._server
        if server is None:
            return
        while (socket := server.nextPendingConnection()) is not None:
            # The other start writes at once and exits: read synchronously (briefly), so no
            # socket outlives this slot and no callback refers to a deleted one.
            data = b""
            if socket.bytesAvailable() or socket.waitForReadyRead(500):
                data = bytes(socket.readAll().data())
            socket.abort()
            socket.deleteLater()
            if ACTIVATE.strip() in data:
                log.info("another start of the app asked this window to come forward")
                self.activated.emit()


def bring_to_front(window: object) -> None:
    """Show, un-minimize and raise a QWidget window (what `activated` should do)."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QWidget

    if not isinstance(window, QWidget):
        return
    window.setWindowState(
        (window.windowState() & ~Qt.WindowState.WindowMinimized) | Qt.WindowState.WindowActive
    )
    window.show()
    window.raise_()
    window.activateWindow()
