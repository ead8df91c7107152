"""The app's background threads, made in one place and handed to the panels.

engine_process: the EngineProcess (model loading, generation and the device list run in the
engine host process). store: the chat database's TaskRunner (every SQL statement, in order).
io: short file queries. models / model_verify / model_deploy: the Models panel's scans, checksum
runs and OVMS repository writing. bench_io / bench: the Benchmark panel's report reads and
writes, and its validation and benchmark runs (each in an engine host process of its own,
workers.bench_job). mcp: the MCP servers' client (workers.mcp_tools). exports: the export
queue, made on first use (the Export panel is built after the window's first paint). fetch:
downloads of ready models and adding their MTP head (workers.model_fetch), made on first use.

`shutdown()` stops them all (each finishes or cancels its work first), the engine last, since
the store may still be writing what the engine produced.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from qwen_mtp_desktop.workers.bench_job import BenchJob
from qwen_mtp_desktop.workers.engine_process import EngineProcess
from qwen_mtp_desktop.workers.mcp_tools import McpTools
from qwen_mtp_desktop.workers.tasks import TaskRunner

if TYPE_CHECKING:
    from qwen_mtp_desktop.workers.export_job import ExportQueue
    from qwen_mtp_desktop.workers.model_fetch import ModelFetch

log = logging.getLogger(__name__)


class BackgroundThreads(QObject):
    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.engine_process = EngineProcess(parent=self)
        self.store = TaskRunner("chat-store", self)
        self.io = TaskRunner("io", self)
        self.models = TaskRunner("model-library", self)
        self.model_verify = TaskRunner("model-verify", self)
        self.model_deploy = TaskRunner("model-deploy", self)
        self.bench_io = TaskRunner("bench-io", self)
        self.bench = BenchJob(self, io=self.bench_io)
        self.mcp = McpTools(self)  # MCP servers' tools for the chat; its thread starts on use
        self._exports: ExportQueue | None = None
        self._fetch: ModelFetch | None = None

    @property
    def fetch(self) -> ModelFetch:
        """Downloads and MTP heads, made when first asked for."""
        if self._fetch is None:
            from qwen_mtp_desktop.workers.model_fetch import ModelFetch

            self._fetch = ModelFetch(parent=self)
        return self._fetch

    @property
    def exports(self) -> ExportQueue:
        """The export queue, made when first asked for (the Export panel, built after the
        window's first paint): its module imports the whole export job (issue 28)."""
        if self._exports is None:
            from qwen_mtp_desktop.workers.export_job import ExportQueue

            self._exports = ExportQueue(parent=self)
        return self._exports

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Stop every thread; True if all stopped in time."""
        stopped = [
            ("exports", self._exports.shutdown(timeout_ms) if self._exports else True),
            ("fetch", self._fetch.shutdown(timeout_ms) if self._fetch else True),
            ("mcp", self.mcp.shutdown(min(timeout_ms / 1000, 10.0))),
            ("bench", self.bench.shutdown(timeout_ms)),
            ("bench-io", self.bench_io.shutdown(timeout_ms)),
            ("model-deploy", self.model_deploy.shutdown(timeout_ms)),
            ("model-verify", self.model_verify.shutdown(timeout_ms)),
            ("model-library", self.models.shutdown(timeout_ms)),
            ("io", self.io.shutdown(timeout_ms)),
            ("chat-store", self.store.shutdown(timeout_ms)),
            ("engine", self.engine_process.shutdown(timeout_ms)),
        ]
        late = [name for name, ok in stopped if not ok]
        if late:
            log.warning("threads still running at shutdown: %s", ", ".join(late))
        return not late
