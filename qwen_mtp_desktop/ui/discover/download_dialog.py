"""Download a ready OpenVINO model, and add its MTP head: the path to a real model that needs
no export toolkit, so it works in the installed app.

First the repository is checked (its file list: which IR parts, MTP head or not, size) and the
dialog says what that means for this computer (disk space in the models folder, memory, where
the files come from and as whom). Then the download runs with bytes, speed and time left; Pause
keeps what arrived (a resume, now or after a restart, continues from there), Cancel forgets it.
When the export lacks the MTP head and the source checkpoint is known, the head is added from
it (only its `mtp.*` tensors are read) and checked (MTP output == plain) before the model is
offered for the chat. The work runs in workers.model_fetch; this dialog only shows it.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSize, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QGridLayout,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.models.export.hub import hub_source_words
from qwen_mtp_desktop.core.models.library import VERDICT_LABELS
from qwen_mtp_desktop.core.units import format_bytes
from qwen_mtp_desktop.ui.widgets.labels import text_label
from qwen_mtp_desktop.ui.window_fit import fit_dialog
from qwen_mtp_desktop.workers.model_fetch import FetchOutcome, FetchRequest, ModelFetch, RepoCheck


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


class DownloadDialog(QDialog):
    """Signals:
    model_ready(object): the new model folder (Path), placed, with its head when one was added.
    open_requested(object): the user pressed Open in chat for it.
    """

    model_ready = Signal(object)
    open_requested = Signal(object)

    def __init__(
        self,
        fetch: ModelFetch,
        models_dir: Path,
        parent: QWidget | None = None,
        *,
        repo_id: str = "",
        mtp_source: str = "",
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Download a ready OpenVINO model")
        self.setObjectName("downloadDialog")
        self.setMinimumSize(640, 360)
        self.setSizeGripEnabled(True)
        self._fetch = fetch
        self._models_dir = models_dir
        self.layout_found: Any = None
        self._blocked = False
        self._progress_text = "nothing yet"
        self._discard_after_pause = False
        self.outcome: FetchOutcome | None = None
        self.state = "idle"  # idle, checking, checked, downloading, paused, grafting, done, failed

        layout = QVBoxLayout(self)
        layout.setContentsMargins(20, 18, 20, 16)
        layout.setSpacing(10)
        layout.addWidget(text_label("Download a ready OpenVINO model", "panelHeading"))
        layout.addWidget(
            text_label(
                "A Qwen3.5 model already converted to OpenVINO, from the Hugging Face hub. No "
                "export toolkit needed; the files are checked before the model appears.",
                "panelBody",
            )
        )
        form = QGridLayout()
        form.setHorizontalSpacing(8)
        form.addWidget(text_label("Repository"), 0, 0)
        self.repo_edit = QLineEdit(repo_id)
        self.repo_edit.setPlaceholderText("ORGANISATION/NAME, e.g. circulus/Qwen3.5-2B-int4-ov")
        self.repo_edit.returnPressed.connect(self.check)
        self.repo_edit.textEdited.connect(self._on_repo_edited)
        form.addWidget(self.repo_edit, 0, 1)
        self.check_button = QPushButton("Check")
        self.check_button.clicked.connect(self.check)
        form.addWidget(self.check_button, 0, 2)
        form.setColumnStretch(1, 1)
        layout.addLayout(form)
        source_row = QHBoxLayout()
        self.source_label = text_label(hub_source_words(known=False), "muted")
        source_row.addWidget(self.source_label, 1)
        self.token_button = QPushButton("Hub token…")
        self.token_button.setToolTip(
            "For gated or private models: a Hugging Face access token, kept in the system "
            "keychain (HF_TOKEN, when set, comes first)"
        )
        self.token_button.clicked.connect(self._ask_token)
        source_row.addWidget(self.token_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(source_row)

        # What the check found, one fact a row ("Contents", "MTP head", ...).
        # One wrapped label a fact: a box layout gives each the height its text needs (in a
        # grid or form layout the wrapped values were cut to one line).
        self.facts = QVBoxLayout()
        self.facts.setSpacing(3)
        self.fact_values: dict[str, QLabel] = {}
        layout.addLayout(self.facts)
        head_row = QHBoxLayout()
        self.head_box = QCheckBox("Add the MTP head from")
        self.head_box.setToolTip(
            "Reads only the source checkpoint's mtp.* tensors (a few % of it) and builds the "
            "head here; then checks that MTP output equals plain decoding."
        )
        self.head_edit = QLineEdit(mtp_source)
        self.head_edit.setPlaceholderText("the source checkpoint, e.g. Qwen/Qwen3.5-2B")
        head_row.addWidget(self.head_box)
        head_row.addWidget(self.head_edit, 1)
        self.head_row = QWidget()
        self.head_row.setLayout(head_row)
        head_row.setContentsMargins(0, 0, 0, 0)
        self.head_row.hide()
        layout.addWidget(self.head_row)

        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.hide()
        layout.addWidget(self.progress)
        self.status = text_label("", "muted")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)
        layout.addStretch(1)

        buttons = QHBoxLayout()
        self.cancel_button = QPushButton("Cancel download")
        self.cancel_button.setToolTip("Stop and delete what was downloaded of this model")
        self.cancel_button.clicked.connect(self._cancel)
        self.cancel_button.hide()
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.close)
        self.pause_button = QPushButton("Pause")
        self.pause_button.clicked.connect(self._pause)
        self.pause_button.hide()
        self.download_button = QPushButton("Download")
        self.download_button.setObjectName("primaryAction")
        self.download_button.setEnabled(False)
        self.download_button.clicked.connect(self.start)
        self.open_button = QPushButton("Open in chat")
        self.open_button.setObjectName("primaryAction")
        self.open_button.clicked.connect(self._open)
        self.open_button.hide()
        for button in (self.close_button, self.pause_button, self.download_button,
                       self.open_button):  # fmt: skip
            buttons.addWidget(button)
        layout.addLayout(buttons)

        # The worker serves every dialog: each reacts only to its own requests.
        self._requests: set[int] = set()
        self._work = 0  # the request of this dialog's download or head, if one is under way
        fetch.described.connect(self._relay(self._on_described))
        fetch.progress.connect(self._relay(self._on_progress))
        fetch.stage.connect(self._relay(self._on_stage))
        fetch.finished.connect(self._relay(self._on_finished))
        fetch.failed.connect(self._relay(self._on_failed))
        fetch.paused.connect(self._relay(self._on_paused))
        fit_dialog(self, self.sizeHint().expandedTo(self.minimumSize()))
        if repo_id:
            self.check()

    def _set_facts(self, facts: list[tuple[str, str]]) -> None:
        while self.facts.count():
            item = self.facts.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.fact_values = {}
        for name, value in facts:
            label = text_label(f"<b>{html.escape(name)}:</b> {html.escape(value)}")
            label.setTextFormat(Qt.TextFormat.RichText)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            self.facts.addWidget(label)
            self.fact_values[name] = label

    def details_text(self) -> str:
        """The facts as lines ("Name: value"), for tests and accessibility."""
        return "\n".join(
            f"{name}: {html.unescape(label.text().split('</b> ', 1)[-1])}"
            for name, label in self.fact_values.items()
        )

    def _refit(self) -> None:
        """Grow to show what the labels now say (within the window it opens over). Deferred:
        labels just added are shown, and counted by the layout, only once events run."""
        QTimer.singleShot(0, self._refit_now)

    def _refit_now(self) -> None:
        box = self.layout()
        if box is None:
            return
        box.activate()
        width = max(self.width(), self.sizeHint().width())
        # The height the wrapped labels need at this width (sizeHint measures them narrower).
        if box.hasHeightForWidth():
            needed = box.totalHeightForWidth(width)
        else:
            needed = self.sizeHint().height()
        fit_dialog(self, QSize(width, max(needed, self.minimumHeight())))

    def _relay(self, slot: Callable[..., None]) -> Callable[..., None]:
        def relay(rid: int, *args: Any) -> None:
            if rid in self._requests:
                slot(*args)

        return relay

    # --- actions ---------------------------------------------------------------------------

    @property
    def destination(self) -> Path:
        from qwen_mtp_desktop.core.models.ready.download import library_folder_name

        return self._models_dir / library_folder_name(self.repo_edit.text().strip())

    def check(self) -> None:
        repo = self.repo_edit.text().strip()
        if not repo or self.state in ("checking", "downloading", "grafting"):
            return
        self.state = "checking"
        self.layout_found = None
        self._set_facts([])
        self.status.setText(f"Reading the file list of {repo}…")
        self.download_button.setEnabled(False)
        self.check_button.setEnabled(False)
        self._requests.add(self._fetch.describe(repo, self.destination))

    def start(self) -> None:
        if self.layout_found is None or self.state not in ("checked", "paused", "failed"):
            return
        source = self.head_edit.text().strip() if self.head_box.isChecked() else ""
        request = FetchRequest(self.layout_found.repo_id, self.destination, None, source or None)
        self.state = "downloading"
        self.progress.show()
        self.pause_button.show()
        self.pause_button.setEnabled(True)
        self.cancel_button.show()
        self.download_button.hide()
        self.repo_edit.setEnabled(False)
        self.check_button.setEnabled(False)
        self.head_row.setEnabled(False)
        self.status.setText("Starting…")
        self._work = self._fetch.fetch(request)
        self._requests.add(self._work)

    def _pause(self) -> None:
        if self.state == "downloading":
            self.pause_button.setEnabled(False)
            self.status.setText("Pausing…")
            self._fetch.stop(self._work)

    def _cancel(self) -> None:
        answer = QMessageBox.question(
            self,
            "Cancel the download?",
            "Stop the download and delete what has arrived so far?",
        )
        if answer != QMessageBox.StandardButton.Yes:
            return
        self._discard_after_pause = True
        if self.state == "downloading":
            self._fetch.stop(self._work)  # then _on_paused discards
            return
        self._requests.add(self._fetch.discard(self.destination))

    def _open(self) -> None:
        if self.outcome is not None:
            self.open_requested.emit(self.outcome.model_dir)
            self.accept()

    def closeEvent(self, event: Any) -> None:  # noqa: N802 (Qt override)
        if self.state in ("downloading", "grafting"):
            self._fetch.stop(self._work)  # a download pauses (resumable); a head stops
        super().closeEvent(event)

    # --- progress --------------------------------------------------------------------------

    def _ask_token(self) -> None:
        token, ok = QInputDialog.getText(
            self,
            "Hugging Face token",
            "An access token (huggingface.co > Settings > Access Tokens), kept in the system "
            "keychain. Leave it empty to forget the stored one.",
            QLineEdit.EchoMode.Password,
        )
        if ok:
            self._requests.add(self._fetch.store_token(token))

    def _on_repo_edited(self, _text: str) -> None:
        if self.state in ("checked", "failed", "idle"):
            self.state = "idle"
            self.download_button.setEnabled(False)

    def _on_described(self, check: RepoCheck) -> None:
        if self.state != "checking":
            return
        self.check_button.setEnabled(True)
        layout = check.layout
        self.layout_found = layout
        self.source_label.setText(hub_source_words(check.token_source))
        parts = ", ".join(part for part, there in layout.parts.items() if there) or "no IR parts"
        facts = [
            ("Contents", parts),
            ("Weights", layout.weight_format or "precision not stated in the repository name"),
        ]
        if layout.missing_parts:
            self.state = "failed"
            facts.append(
                (
                    "Verdict",
                    "Not an OpenVINO export of a Qwen3.5 model: it lacks the "
                    f"{', '.join(layout.missing_parts)}. Export the source checkpoint instead.",
                )
            )
            self._set_facts(facts)
            self.status.setText("")
            self._refit()
            return
        if layout.has_mtp:
            facts.append(("MTP head", "included: drafts speed up decoding from the start"))
            self.head_row.hide()
        else:
            facts.append(
                (
                    "MTP head",
                    "not included (most conversions drop it): add it from the source "
                    "checkpoint below, or chat without the speed-up",
                )
            )
            self.head_row.show()
            self.head_box.setChecked(bool(self.head_edit.text().strip()))
        size = layout.download_bytes
        download = format_bytes(size)
        if check.free_bytes is not None:
            download += f"; {format_bytes(check.free_bytes)} free in the models folder"
        facts.append(("Download", download))
        memory = check.memory
        if memory is not None:
            free = (
                f"; {format_bytes(check.available_memory)} free"
                if check.available_memory is not None
                else ""
            )
            facts.append(
                (
                    "Memory",
                    f"about {format_bytes(memory.total_bytes)} for one chat of "
                    f"{memory.context_length:,} tokens (weights, KV cache, linear-attention "
                    f"state){free}: {VERDICT_LABELS[memory.verdict].lower()}",
                )
            )
        elif check.available_memory is not None:
            facts.append(
                (
                    "Memory",
                    f"the weights alone need about {format_bytes(layout.weight_bytes)} "
                    f"(the repo has no usable config.json for the rest); "
                    f"{format_bytes(check.available_memory)} free",
                )
            )
        pending = check.pending
        if pending is not None:
            facts.append(
                (
                    "Earlier try",
                    f"{format_bytes(pending.done_bytes)} of {format_bytes(pending.total_bytes)} "
                    "already here: Download resumes it",
                )
            )
        facts.append(("Saves to", str(check.destination)))
        self._set_facts(facts)
        blocked = self._blocked = check.destination_exists
        room = check.free_bytes is None or check.free_bytes >= size - (
            pending.done_bytes if pending is not None else 0
        )
        if blocked:
            self.status.setText(f"{check.destination} already exists: remove or rename it first.")
        elif not room:
            self.status.setText("Not enough free disk space in the models folder (Settings).")
        else:
            self.status.setText("")
        self.state = "checked"
        self._refit()
        self.download_button.setEnabled(not blocked and room)
        self.download_button.setText("Resume download" if pending is not None else "Download")

    def _on_progress(self, done: object, total: object, rate: float) -> None:
        if not isinstance(done, int) or not isinstance(total, int) or total <= 0:
            return
        self.progress.setValue(int(1000 * done / total))
        text = self._progress_text = f"{format_bytes(done)} of {format_bytes(total)}"
        if rate > 0 and done < total:
            text += (
                f" · {format_bytes(int(rate))}/s · about {_duration((total - done) / rate)} left"
            )
        self.status.setText(text)

    def _on_stage(self, stage: str) -> None:
        if stage.startswith("token stored: "):
            self.status.setText(stage.removeprefix("token stored: "))
            if self.repo_edit.text().strip() and self.state not in ("downloading", "grafting"):
                self.state = "idle"
                self.check()  # as whom, and whether a gated repo opens now
        elif stage == "discarded":
            self._discard_after_pause = False
            self._reset_after_stop("The download was cancelled; nothing of it is kept.")
        elif stage == "adding the MTP head":
            self.state = "grafting"
            self.pause_button.hide()
            self.cancel_button.hide()
            self.progress.setRange(0, 0)
            self.status.setText(
                "Adding the MTP head: reading its tensors from the source checkpoint, building "
                "it, then checking that MTP output equals plain decoding…"
            )

    def _on_finished(self, outcome: FetchOutcome) -> None:
        self.outcome = outcome
        self.state = "done"
        self.progress.setRange(0, 1000)
        self.progress.setValue(1000)
        self.pause_button.hide()
        self.cancel_button.hide()
        self.open_button.show()
        lines = [f"Ready: {outcome.model_dir}"]
        if outcome.resumed_bytes:
            lines.append(f"{format_bytes(outcome.resumed_bytes)} of it came from the earlier try.")
        graft = outcome.graft
        if graft is not None and "error" in graft:
            lines.append(
                f"{graft['error']} The model is in your library without it: chat works, "
                "without the speed-up; try again from the Models panel."
            )
        elif graft is not None:
            check = graft.get("check") or {}
            rate = check.get("acceptance_rate")
            accepted = f", {rate:.0%} of drafts accepted" if isinstance(rate, float) else ""
            if check.get("equal"):
                lines.append(
                    f"MTP head added ({graft.get('weight_format')}, "
                    f"{format_bytes(int(graft.get('bytes_read') or 0))} read) and checked: MTP "
                    f"output equals plain decoding{accepted}."
                )
            else:
                lines.append(
                    "MTP head added, but its check did not pass: "
                    f"{check.get('error') or 'MTP output differs from plain decoding'}. The "
                    "chat stays exact either way; validate it in the Benchmark panel."
                )
        elif outcome.layout is not None and not outcome.layout.has_mtp:
            lines.append("No MTP head: the chat runs without the speed-up.")
        self.status.setText("\n".join(lines))
        self._refit()
        self.model_ready.emit(outcome.model_dir)

    def _on_failed(self, message: str, fix: str, code: str) -> None:
        if self.state == "checking":
            self.check_button.setEnabled(True)
        self.state = "failed"
        self.progress.setRange(0, 1000)
        self.pause_button.hide()
        self.repo_edit.setEnabled(True)
        self.check_button.setEnabled(True)
        self.head_row.setEnabled(True)
        if self.layout_found is not None and not self._blocked:
            self.download_button.show()
            self.download_button.setEnabled(True)
            self.download_button.setText("Try again")
            self.cancel_button.setVisible(code != "GRAFT_FAILED")
        self.status.setText(f"{message} {fix}".strip())
        self._refit()

    def _on_paused(self) -> None:
        if self._discard_after_pause:
            self._requests.add(self._fetch.discard(self.destination))
            return
        self.state = "paused"
        self.pause_button.hide()
        self.download_button.show()
        self.download_button.setEnabled(True)
        self.download_button.setText("Resume download")
        self.status.setText(
            f"Paused with {self._progress_text}. What arrived is kept: resume now, or come "
            "back later (also after closing the app)."
        )

    def _reset_after_stop(self, text: str) -> None:
        self.state = "checked" if self.layout_found is not None else "idle"
        self.progress.hide()
        self.progress.setValue(0)
        self.pause_button.hide()
        self.cancel_button.hide()
        self.download_button.show()
        self.download_button.setEnabled(self.layout_found is not None)
        self.download_button.setText("Download")
        self.repo_edit.setEnabled(True)
        self.check_button.setEnabled(True)
        self.head_row.setEnabled(True)
        self.status.setText(text)
