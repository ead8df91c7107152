"""The "Deploy to OVMS…" dialog: asks where to write an OpenVINO Model Server repository for the
selected model, writes it on a worker thread (`core.models.ovms`), and shows the result with
the commands to run and, plainly, what was not run here.

Threads: the writing (hard links or copies of the model files) runs on the TaskRunner handed in;
its progress comes back through a queued signal. The GUI thread only reads the form.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from qwen_mtp_desktop.core.errors import UserFacingError, as_user_error
from qwen_mtp_desktop.core.models.folders.report import ModelReport
from qwen_mtp_desktop.core.models.ovms import (
    DEFAULT_ASSISTANT_TOKENS,
    DEVICES,
    MAX_ASSISTANT_TOKENS,
    OvmsDeployError,
    OvmsDeployment,
    OvmsOptions,
    default_name,
    deploy_ovms,
)
from qwen_mtp_desktop.workers.tasks import TaskRunner

NOT_RUN_HERE = (
    "OpenVINO Model Server cannot run on this machine: this writes the repository and the "
    "commands to start it, but does not start, load or test the server."
)


def choose_parent(parent: QWidget, start: Path) -> Path | None:
    chosen = QFileDialog.getExistingDirectory(
        parent, "Where to write the OVMS repository", str(start)
    )
    return Path(chosen) if chosen else None


def result_text(result: OvmsDeployment) -> str:
    """The outcome as plain text: what was written, how to start it, what was not run."""
    mtp = (
        f"on (num_assistant_tokens {result.num_assistant_tokens})"
        if result.mtp
        else "off: this export has no usable MTP head"
    )
    lines = [
        f"Written: {result.out}",
        f"Model name: {result.name} · {result.kind_label}, OVMS pipeline "
        f"{result.pipeline_type} on {result.device}",
        f"MTP speculative decoding: {mtp}",
        f"Model files: {result.linked_files} hard-linked, {result.copied_files} copied",
        "",
        "Start the server (not run here):",
        result.docker_command,
        "",
        "Ask it:",
        result.curl_command,
        "",
        "Not run here:",
        *(f"• {line}" for line in result.not_run),
        "",
        "Not confirmed from OVMS's sources:",
        *(f"• {line}" for line in result.unconfirmed),
        "",
        "README.md, config.json and kserve.yaml are in the folder.",
    ]
    return "\n".join(lines)


class OvmsDeployDialog(QDialog):
    """Signals:
    deployed(object): an OvmsDeployment, after the repository is in place.
    """

    deployed = Signal(object)
    # From the worker thread (queued): done bytes, total bytes.
    _progress = Signal(object, object)

    def __init__(
        self,
        model_dir: Path,
        report: ModelReport | None,
        runner: TaskRunner,
        parent: QWidget | None = None,
        *,
        default_parent: Path | None = None,
        num_assistant_tokens: int = DEFAULT_ASSISTANT_TOKENS,
        device: str = "CPU",
        choose_parent: Callable[[QWidget, Path], Path | None] = choose_parent,
        open_url: Callable[[QUrl], bool] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("ovmsDeployDialog")
        self.setWindowTitle("Deploy to OpenVINO Model Server")
        self.setMinimumWidth(560)
        self._model_dir = model_dir
        self._runner = runner
        self._choose_parent = choose_parent
        self._open_url = open_url
        self._running = False
        self.deployment: OvmsDeployment | None = None
        self.error: UserFacingError | None = None
        name = default_name(model_dir)
        start = default_parent or Path.home() / "ovms"

        layout = QVBoxLayout(self)
        layout.setSpacing(10)
        intro = QLabel(
            f"Write an OVMS model repository for <b>{_html(model_dir.name)}</b>: the model "
            "files (hard-linked where possible), graph.pbtxt, config.json, a README with the "
            "docker run line and a Kubernetes (KServe) example."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.not_run_label = QLabel(NOT_RUN_HERE)
        self.not_run_label.setObjectName("muted")
        self.not_run_label.setWordWrap(True)
        layout.addWidget(self.not_run_label)
        if report is not None and not report.mtp_usable:
            no_mtp = QLabel(
                "This export has no usable MTP head: the server will decode without MTP."
            )
            no_mtp.setWordWrap(True)
            layout.addWidget(no_mtp)

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.ExpandingFieldsGrow)
        out_row = QHBoxLayout()
        self.out_edit = QLineEdit(str(start / name))
        self.out_edit.setToolTip("A new folder (it is created) or an empty one")
        self.choose_button = QPushButton("Choose…")
        self.choose_button.clicked.connect(self._on_choose)
        out_row.addWidget(self.out_edit, 1)
        out_row.addWidget(self.choose_button)
        form.addRow("Output folder", out_row)
        self.name_edit = QLineEdit(name)
        self.name_edit.setToolTip("The model name clients send to /v3/chat/completions")
        form.addRow("Model name", self.name_edit)
        self.tokens_spin = QSpinBox()
        self.tokens_spin.setRange(1, MAX_ASSISTANT_TOKENS)
        self.tokens_spin.setValue(min(max(num_assistant_tokens, 1), MAX_ASSISTANT_TOKENS))
        self.tokens_spin.setToolTip("MTP draft tokens per step: the server's default")
        form.addRow("Draft tokens", self.tokens_spin)
        self.device_combo = QComboBox()
        self.device_combo.addItems(list(DEVICES))
        if device in DEVICES:
            self.device_combo.setCurrentText(device)
        form.addRow("Device", self.device_combo)
        layout.addLayout(form)

        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.hide()
        layout.addWidget(self.progress)
        self.error_label = QLabel()
        self.error_label.setObjectName("ovmsError")
        self.error_label.setStyleSheet("color: #d93025;")
        self.error_label.setWordWrap(True)
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error_label.hide()
        layout.addWidget(self.error_label)
        self.result_view = QPlainTextEdit()
        self.result_view.setObjectName("ovmsResult")
        self.result_view.setReadOnly(True)
        self.result_view.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.result_view.hide()
        layout.addWidget(self.result_view, 1)
        # Takes the spare height until the result is shown, so the form stays together.
        self._filler = QWidget()
        self._filler.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)
        layout.addWidget(self._filler, 1)

        buttons = QHBoxLayout()
        self.copy_button = QPushButton("Copy docker command")
        self.copy_button.clicked.connect(self._on_copy)
        self.copy_button.hide()
        self.reveal_button = QPushButton("Show in file manager")
        self.reveal_button.clicked.connect(self._on_reveal)
        self.reveal_button.hide()
        self.write_button = QPushButton("Write repository")
        self.write_button.setObjectName("primaryAction")
        self.write_button.setDefault(True)
        self.write_button.clicked.connect(self.start)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.reject)
        buttons.addWidget(self.copy_button)
        buttons.addWidget(self.reveal_button)
        buttons.addStretch(1)
        buttons.addWidget(self.write_button)
        buttons.addWidget(self.close_button)
        layout.addLayout(buttons)
        self._progress.connect(self._on_progress)

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Write the repository off-thread with the form's values."""
        if self._running:
            return
        text = self.out_edit.text().strip()
        if not text:
            self._show_error(OvmsDeployError("Name an output folder.", "", code="BAD_PATH"))
            return
        out = Path(text).expanduser()
        options = OvmsOptions(
            num_assistant_tokens=self.tokens_spin.value(),
            device=self.device_combo.currentText(),
            name=self.name_edit.text().strip() or None,
        )
        model_dir = self._model_dir
        emit = self._progress.emit
        last = [-1]

        def progress(done: int, total: int) -> None:
            step = 1000 * done // total if total else 1000
            if step != last[0]:
                last[0] = step
                emit(done, total)

        def work() -> OvmsDeployment:
            return deploy_ovms(model_dir, out, options, progress=progress)

        self._set_running(True)
        self._runner.submit(work, self._on_done, self._on_failed)

    # --- slots -----------------------------------------------------------------------------

    def _set_running(self, running: bool) -> None:
        self._running = running
        for widget in (
            self.out_edit,
            self.choose_button,
            self.name_edit,
            self.tokens_spin,
            self.device_combo,
            self.write_button,
        ):
            widget.setEnabled(not running)
        self.close_button.setEnabled(not running)
        self.progress.setVisible(running)
        self.progress.setValue(0)
        if running:
            self.error_label.hide()

    def _on_progress(self, done: int, total: int) -> None:
        self.progress.setValue(1000 * done // total if total else 1000)

    def _on_done(self, result: OvmsDeployment) -> None:
        self._set_running(False)
        self.deployment = result
        self.write_button.setEnabled(False)
        self.write_button.setText("Written")
        for widget in (self.out_edit, self.choose_button, self.name_edit):
            widget.setEnabled(False)
        self.tokens_spin.setEnabled(False)
        self.device_combo.setEnabled(False)
        self.result_view.setPlainText(result_text(result))
        self.result_view.show()
        self._filler.hide()
        self.copy_button.show()
        self.reveal_button.setVisible(self._open_url is not None)
        self.deployed.emit(result)

    def _on_failed(self, exc: Exception) -> None:
        self._set_running(False)
        self._show_error(as_user_error(exc, OvmsDeployError))

    def _show_error(self, error: UserFacingError) -> None:
        self.error = error
        self.error_label.setText(str(error))
        self.error_label.show()

    def _on_choose(self) -> None:
        current = Path(self.out_edit.text().strip() or str(Path.home())).expanduser()
        chosen = self._choose_parent(self, current.parent)
        if chosen is not None:
            self.out_edit.setText(str(chosen / (self.name_edit.text().strip() or "ovms")))

    def _on_copy(self) -> None:
        if self.deployment is not None:
            QApplication.clipboard().setText(self.deployment.docker_command)

    def _on_reveal(self) -> None:
        if self.deployment is not None and self._open_url is not None:
            self._open_url(QUrl.fromLocalFile(str(self.deployment.out)))

    def reject(self) -> None:
        if self._running:
            return  # the files are being written; Close is disabled meanwhile
        super().reject()


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
