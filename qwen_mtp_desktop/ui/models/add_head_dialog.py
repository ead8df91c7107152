"""Add the MTP head to a model that lacks it (Models > Add MTP head…): only the source
checkpoint's `mtp.*` tensors are read (from the hub by range requests, or from a folder), the
head is built and checked (MTP output == plain decoding) in a child process, with no export
toolkit. The work runs in workers.model_fetch; this dialog shows it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.models.export.hub import hub_source_words
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.ui.widgets.labels import text_label
from qwen_mtp_desktop.ui.window_fit import fit_dialog
from qwen_mtp_desktop.workers.model_fetch import FetchOutcome, ModelFetch
from qwen_mtp_desktop.workers.tasks import TaskRunner


def suggested_source(model_dir: Path, catalog_ids: list[str]) -> str:
    """The catalog checkpoint whose name the folder's name contains (the longest such name:
    "Qwen3.5-27B" before "Qwen3.5-2B"), or ""."""
    folder = model_dir.name.lower()
    names = sorted(catalog_ids, key=lambda hub_id: -len(hub_id))
    return next((hub_id for hub_id in names if hub_id.split("/")[-1].lower() in folder), "")


class AddHeadDialog(QDialog):
    """Signals:
    head_added(object): the model folder (Path), now with its head.
    """

    head_added = Signal(object)

    def __init__(
        self, fetch: ModelFetch, runner: TaskRunner, model_dir: Path, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add the MTP head")
        self.setObjectName("addHeadDialog")
        self.setMinimumSize(600, 300)
        self.setSizeGripEnabled(True)
        self._fetch = fetch
        self.model_dir = model_dir
        self.state = "idle"  # idle, working, done, failed
        self.outcome: FetchOutcome | None = None
        self._requests: set[int] = set()
        self._work = 0

        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 18, 20, 16)
        layout.setSpacing(10)
        layout.addWidget(text_label(f"Add the MTP head to {model_dir.name}", "panelHeading"))
        layout.addWidget(
            text_label(
                "Most converted models drop the MTP head that speeds up decoding. It can be "
                "rebuilt from the checkpoint the model was converted from: only its mtp.* "
                "tensors are read (a few % of it), and MTP output is checked against plain "
                "decoding before any speed is shown.",
                "panelBody",
            )
        )
        row = QHBoxLayout()
        row.addWidget(text_label("Source checkpoint", wrap=False))
        self.source_edit = QLineEdit()
        self.source_edit.setPlaceholderText("a hub id such as Qwen/Qwen3.5-2B, or a folder")
        self.source_edit.textChanged.connect(self._on_source_changed)
        row.addWidget(self.source_edit, 1)
        self.browse_button = QPushButton("Folder…")
        self.browse_button.clicked.connect(self._browse)
        row.addWidget(self.browse_button)
        layout.addLayout(row)
        layout.addWidget(text_label(hub_source_words(known=False), "muted"))
        self.progress = QProgressBar()
        self.progress.setRange(0, 0)
        self.progress.hide()
        layout.addWidget(self.progress)
        self.status = text_label("", "muted")
        layout.addWidget(self.status)
        layout.addStretch(1)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        self.add_button = QPushButton("Add the head")
        self.add_button.setObjectName("primaryAction")
        self.add_button.setEnabled(False)
        self.add_button.clicked.connect(self.start)
        buttons.addWidget(self.close_button)
        buttons.addWidget(self.add_button)
        layout.addLayout(buttons)

        fetch.stage.connect(self._relay(lambda _stage: None))
        fetch.finished.connect(self._relay(self._on_finished))
        fetch.failed.connect(self._relay(self._on_failed))
        fit_dialog(self, self.sizeHint().expandedTo(self.minimumSize()))
        runner.submit(_catalog_ids, self._on_catalog, lambda _exc: None)

    def _relay(self, slot: Callable[..., None]) -> Callable[..., None]:
        def relay(rid: int, *args: Any) -> None:
            if rid in self._requests:
                slot(*args)

        return relay

    def _on_catalog(self, ids: list[str]) -> None:
        if not self.source_edit.text():
            self.source_edit.setText(suggested_source(self.model_dir, ids))

    def _on_source_changed(self, text: str) -> None:
        self.add_button.setEnabled(bool(text.strip()) and self.state != "working")

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "The source checkpoint's folder")
        if folder:
            self.source_edit.setText(folder)

    def start(self) -> None:
        source = self.source_edit.text().strip()
        if not source or self.state == "working":
            return
        self.state = "working"
        self.add_button.setEnabled(False)
        self.source_edit.setEnabled(False)
        self.browse_button.setEnabled(False)
        self.progress.setRange(0, 0)
        self.progress.show()
        self.status.setText(
            "Reading the head's tensors, building it, then checking that MTP output equals "
            "plain decoding…"
        )
        self._work = self._fetch.add_head(self.model_dir, source)
        self._requests.add(self._work)

    def closeEvent(self, event: Any) -> None:  # noqa: N802 (Qt override)
        if self.state == "working":
            self._fetch.stop(self._work)
        super().closeEvent(event)

    def _on_finished(self, outcome: FetchOutcome) -> None:
        self.outcome = outcome
        self.state = "done"
        self.progress.setRange(0, 1)
        self.progress.setValue(1)
        graft = outcome.graft or {}
        check = graft.get("check") or {}
        rate = check.get("acceptance_rate")
        accepted = f", {rate:.0%} of drafts accepted" if isinstance(rate, float) else ""
        read = format_bytes(int(graft.get("bytes_read") or 0))
        if check.get("equal"):
            verdict = f"checked: MTP output equals plain decoding{accepted}."
        else:
            verdict = (
                "but its check did not pass "
                f"({check.get('error') or 'MTP output differs from plain decoding'}); the chat "
                "stays exact either way."
            )
        self.status.setText(
            f"MTP head added ({graft.get('weight_format')}, {read} read in "
            f"{float(graft.get('seconds') or 0):.1f} s) and {verdict}"
        )
        self.close_button.setText("Done")
        self.head_added.emit(self.model_dir)

    def _on_failed(self, message: str, fix: str, _code: str) -> None:
        self.state = "failed"
        self.progress.hide()
        self.source_edit.setEnabled(True)
        self.browse_button.setEnabled(True)
        self.add_button.setEnabled(bool(self.source_edit.text().strip()))
        self.add_button.setText("Try again")
        self.status.setText(f"{message} {fix}".strip())


def _catalog_ids() -> list[str]:
    from qwen_mtp_desktop.core.models.catalog import load_catalog

    return [model.hub_id for model in load_catalog().models]
