"""Getting a real model in the window: check a hub repo, download it, add its MTP head.

One QThread runs one fetch at a time. The download (core.models.ready.download) is network and
file I/O only, so it runs on that thread; pausing sets a flag it reads between chunks and keeps
the partial files for a resume (now or at the next start). Adding the MTP head builds an
OpenVINO graph and then runs the MTP == plain check, so it runs as the app's own command
(`models add-mtp --json`) in a child process: OpenVINO never loads in the window's process, and
a crash there is a failed step, not a lost window.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal, SignalInstance, Slot

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.workers.foundation import RequestIds, WorkerThread

#: How often progress reaches the window at most (a fast disk would emit thousands a second).
PROGRESS_INTERVAL_S = 0.1


@dataclass(frozen=True)
class FetchRequest:
    repo_id: str
    destination: Path
    revision: str | None = None
    #: Add the MTP head from this checkpoint (a hub id or folder) when the export lacks it.
    mtp_source: str | None = None


@dataclass(frozen=True)
class RepoCheck:
    """What the download dialog shows before a download: the repo's layout and this
    computer's side of it (all read on the worker thread)."""

    layout: Any  # core.models.ready.download.RepoLayout
    destination: Path
    destination_exists: bool
    #: Where the hub token came from ("HF_TOKEN", "keychain", "token file") or None.
    token_source: str | None
    #: An interrupted download of this repo into `destination`, if one is on disk.
    pending: Any  # core.models.ready.download.PendingDownload | None
    free_bytes: int | None
    available_memory: int | None
    #: One chat's memory for this model (core.models.folders.report.MemoryEstimate), or None.
    memory: Any


def _free_bytes(folder: Path) -> int | None:
    import shutil

    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return shutil.disk_usage(probe).free
    except OSError:
        return None


@dataclass(frozen=True)
class FetchOutcome:
    model_dir: Path
    layout: Any  # core.models.ready.download.RepoLayout
    resumed_bytes: int
    #: `models add-mtp --json`'s answer when a head was to be added ({"error": ...} when it
    #: could not be), else None.
    graft: dict[str, Any] | None


class _Fetcher(QObject):
    described = Signal(int, object)
    progress = Signal(int, object, object, float)
    stage = Signal(int, str)
    finished = Signal(int, object)
    failed = Signal(int, str, str, str)
    paused = Signal(int)

    def __init__(self) -> None:
        super().__init__()
        self.stop_flag = threading.Event()
        self.child: subprocess.Popen[str] | None = None
        #: The request being worked on (0: none); read from the GUI thread by `stop()`.
        self.running = 0
        #: Requests stopped before their turn came (added from the GUI thread).
        self.cancelled: set[int] = set()

    @Slot(int, str, object)
    def describe(self, rid: int, repo_id: str, destination: Path) -> None:
        from qwen_mtp_desktop.core.models.export.hub import hub_token, hub_token_source
        from qwen_mtp_desktop.core.models.folders.memory import available_memory
        from qwen_mtp_desktop.core.models.ready.download import (
            describe_repo,
            memory_estimate,
            pending_downloads,
        )

        try:
            layout = describe_repo(repo_id, None, hub_token())
        except UserFacingError as exc:
            self.failed.emit(rid, exc.message, exc.fix, exc.code)
            return
        available = available_memory()[0]
        pending = [
            p
            for p in pending_downloads(destination.parent)
            if p.destination == destination and p.repo_id == layout.repo_id
        ]
        self.described.emit(
            rid,
            RepoCheck(
                layout,
                destination,
                destination.exists(),
                hub_token_source(),
                pending[0] if pending else None,
                _free_bytes(destination.parent),
                available,
                memory_estimate(layout, available),
            ),
        )

    @Slot(int, object)
    def fetch(self, rid: int, request: FetchRequest) -> None:
        if rid in self.cancelled:
            self.cancelled.discard(rid)
            self.paused.emit(rid)
            return
        self.stop_flag.clear()
        self.running = rid
        try:
            self._fetch(rid, request)
        finally:
            self.running = 0

    def _fetch(self, rid: int, request: FetchRequest) -> None:
        from qwen_mtp_desktop.core.models.export.hub import hub_token
        from qwen_mtp_desktop.core.models.ready.download import (
            DownloadCancelledError,
            download_model,
        )

        last = [0.0]
        started = time.monotonic()
        first = [-1]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if first[0] < 0:
                first[0] = done
            if now - last[0] >= PROGRESS_INTERVAL_S or done >= total:
                last[0] = now
                rate = (done - first[0]) / max(now - started, 1e-3)
                self.progress.emit(rid, done, total, rate)

        self.stage.emit(rid, "downloading")
        try:
            result = download_model(
                request.repo_id,
                request.destination,
                revision=request.revision,
                token=hub_token(),
                progress=progress,
                cancel=self.stop_flag.is_set,
            )
        except DownloadCancelledError:
            self.paused.emit(rid)
            return
        except UserFacingError as exc:
            self.failed.emit(rid, exc.message, exc.fix, exc.code)
            return
        graft = None
        if request.mtp_source and not result.layout.has_mtp:
            self.stage.emit(rid, "adding the MTP head")
            graft = self._graft(result.model_dir, request.mtp_source)
        self.finished.emit(rid, FetchOutcome(result.model_dir, result.layout, result.resumed_bytes,
                                        graft))  # fmt: skip

    @Slot(int, object)
    def store_token(self, rid: int, token: object) -> None:
        from qwen_mtp_desktop.core.models.export.hub import store_hub_token

        self.stage.emit(rid, f"token stored: {store_hub_token(str(token or ''))}")

    @Slot(int, object)
    def discard(self, rid: int, destination: Path) -> None:
        from qwen_mtp_desktop.core.models.ready.download import discard_download

        discard_download(destination)
        self.stage.emit(rid, "discarded")

    @Slot(int, object, str)
    def add_head(self, rid: int, model_dir: Path, source: str) -> None:
        if rid in self.cancelled:
            self.cancelled.discard(rid)
            self.failed.emit(rid, "Adding the MTP head was stopped.", "", "CANCELLED")
            return
        self.stop_flag.clear()
        self.running = rid
        try:
            self._add_head(rid, model_dir, source)
        finally:
            self.running = 0

    def _add_head(self, rid: int, model_dir: Path, source: str) -> None:
        self.stage.emit(rid, "adding the MTP head")
        graft = self._graft(model_dir, source)
        if "error" in graft:
            self.failed.emit(rid, str(graft["error"]), str(graft.get("fix", "")), "GRAFT_FAILED")
        else:
            self.finished.emit(rid, FetchOutcome(model_dir, None, 0, graft))

    def _graft(self, model_dir: Path, source: str) -> dict[str, Any]:
        """`models add-mtp --json` in a child: its answer, or {"error": ..., "fix": ...}."""
        from qwen_mtp_desktop.core.models.export.command import app_command

        command = app_command("models", "add-mtp", str(model_dir), "--from", source, "--json")
        try:
            self.child = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            out, err = self.child.communicate()
            code = self.child.returncode
        except OSError as exc:
            return {"error": f"The MTP head could not be added ({exc})."}
        finally:
            self.child = None
        if self.stop_flag.is_set():
            return {"error": "Adding the MTP head was stopped."}
        try:
            answer = json.loads(out) if out.strip() else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            line = (err.strip().splitlines() or [f"exit status {code}"])[-1]
            return {"error": f"The MTP head could not be added: {line.removeprefix('error: ')}"}
        return answer


class ModelFetch(QObject):
    """One fetch at a time, for any number of dialogs: every call returns a request id and
    every signal carries the id of the request it answers, so a dialog reacts to its own.

    Signals (on the GUI thread):
    described(int, object): a RepoCheck, after `describe()`.
    progress(int, object, object, float): bytes done, bytes in all, bytes per second this run.
    stage(int, str): "downloading", "adding the MTP head", "discarded" (after `discard()`),
        "token stored: WHERE" (after `store_token()`).
    finished(int, object): a FetchOutcome.
    failed(int, str, str, str): message, fix, code.
    paused(int): the download stopped on request; its partial files are kept.
    """

    described = Signal(int, object)
    progress = Signal(int, object, object, float)
    stage = Signal(int, str)
    finished = Signal(int, object)
    failed = Signal(int, str, str, str)
    paused = Signal(int)
    _describe = Signal(int, str, object)
    _fetch = Signal(int, object)
    _add_head = Signal(int, object, str)
    _discard = Signal(int, object)
    _store_token = Signal(int, object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._ids = RequestIds()
        self._worker = _Fetcher()
        self._thread = WorkerThread("model-fetch", self._worker)
        for name in ("described", "progress", "stage", "finished", "failed", "paused"):
            getattr(self._worker, name).connect(getattr(self, name))
        self._describe.connect(self._worker.describe)
        self._fetch.connect(self._worker.fetch)
        self._add_head.connect(self._worker.add_head)
        self._discard.connect(self._worker.discard)
        self._store_token.connect(self._worker.store_token)
        self._thread.start()

    def _send(self, signal: SignalInstance, *args: object) -> int:
        """Hand a request to the worker's thread under a new request id, and return the id."""
        rid = self._ids.next()
        signal.emit(rid, *args)
        return rid

    def describe(self, repo_id: str, destination: Path) -> int:
        return self._send(self._describe, repo_id, destination)

    def fetch(self, request: FetchRequest) -> int:
        return self._send(self._fetch, request)

    def add_head(self, model_dir: Path, source: str) -> int:
        return self._send(self._add_head, model_dir, source)

    def discard(self, destination: Path) -> int:
        """Delete an interrupted download's files (after it stopped)."""
        return self._send(self._discard, destination)

    def store_token(self, token: str | None) -> int:
        """Keep the hub token in the system keychain ("" or None: forget it); the keychain
        may be slow or ask to be unlocked, so not on the GUI thread."""
        return self._send(self._store_token, token)

    def stop(self, rid: int | None = None) -> None:
        """Pause download `rid` (its files stay) or stop adding its head; a request still
        waiting for the thread is dropped when its turn comes. None: whatever runs."""
        if rid is not None and self._worker.running != rid:
            self._worker.cancelled.add(rid)
            return
        self._worker.stop_flag.set()
        child = self._worker.child
        if child is not None:
            child.terminate()

    def shutdown(self, timeout_ms: int = 30_000) -> bool:
        self.stop()
        return self._thread.stop(timeout_ms)
