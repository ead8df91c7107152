"""What every background worker shares: a QThread it owns, request ids, shutdown, the error path.

A worker is a QObject moved onto its own QThread (`WorkerThread`); the GUI side talks to it only
through queued signals, so its slots run on that thread in the order they were requested.
`RequestIds` numbers requests so late results of a cancelled request can be told apart.
The default error path is `core.errors.as_user_error`: a worker never lets an exception escape
its thread, it reports a `UserFacingError` (an unexpected one becomes INTERNAL, logged with its
traceback).

Every thread started here is tracked, so `running_threads()` can tell tests (and a shutdown
check) which ones are still running.
"""

from __future__ import annotations

import itertools
import weakref

from PySide6.QtCore import QObject, QThread

_threads: weakref.WeakSet[QThread] = weakref.WeakSet()


def track(thread: QThread) -> QThread:
    """Count `thread` among the app's background threads (see `running_threads`)."""
    _threads.add(thread)
    return thread


def running_threads() -> list[QThread]:
    """The tracked threads still running."""
    return [thread for thread in list(_threads) if thread.isRunning()]


class WorkerThread:
    """One named QThread with the one worker object that lives on it."""

    def __init__(self, name: str, worker: QObject) -> None:
        self.thread = track(QThread())
        self.thread.setObjectName(name)
        self.worker = worker
        worker.moveToThread(self.thread)

    @property
    def name(self) -> str:
        return self.thread.objectName()

    @property
    def running(self) -> bool:
        return self.thread.isRunning()

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout_ms: int) -> bool:
        """Let the queued requests finish, then end the thread. True if it ended in time."""
        self.thread.quit()
        return self.thread.wait(timeout_ms)


class RequestIds:
    """Increasing ids for requests to a worker (1, 2, ...)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def next(self) -> int:
        return next(self._ids)


__all__ = ["RequestIds", "WorkerThread", "running_threads", "track"]
