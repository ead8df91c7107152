"""The status bar's model line: the chat's model (local or remote), its device, and what
decoded the last answer ("last answer: MTP n=2, 85% of drafts accepted"), never a static
"MTP ready": Auto may decode a turn plain, and the line says what really ran."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QLabel, QWidget

from qwen_mtp_desktop.core.chat.decoding_words import ran_text
from qwen_mtp_desktop.core.chat.store.stats import stopped_before_first_token
from qwen_mtp_desktop.core.engine import LoadedModel
from qwen_mtp_desktop.core.models.library import display_name, is_demo_model
from qwen_mtp_desktop.workers.remote_models import is_remote

SEPARATOR = "  ·  "


class ModelStatus(QLabel):
    """Follows the chat's model (through its router, so a remote server shows as such) and
    its answers (`answered`). `names` gives a model reference's shown name (remote ones)."""

    def __init__(self, names: Callable[[], dict[Path, str]], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._names = names
        self._loaded: LoadedModel | None = None
        self._last: str | None = None  # what decoded the shown chat's last answer
        self._last_dir: Path | None = None  # the model that wrote it (None: not recorded)
        self._gone: Path | None = None  # the chat's model folder, while it is gone

    def _name(self, model_dir: Path) -> str:
        return self._names().get(model_dir) or display_name(model_dir)

    def show_start(self, model_dir: Path, device: str) -> None:
        """Before the first load: the model the chat will open."""
        suffix = " (counts and repeats phrases only)" if is_demo_model(model_dir) else ""
        self.setText(f"Model: {self._name(model_dir)}{suffix}{SEPARATOR}Device: {device}")

    def loading(self, model_dir: Path) -> None:
        if self._gone is not None and Path(model_dir) != self._gone:
            self._gone = None  # the chat moved on to another model
        self.setText(f"Loading {self._name(Path(model_dir))}…")

    def loaded(self, loaded: LoadedModel) -> None:
        # "last answer" is the shown chat's (`chat_shown`, `answered`), whatever loads.
        self._gone = None
        self._loaded = loaded
        self._show()

    def chat_shown(self, record: Mapping[str, Any] | None) -> None:
        """A chat was shown (opened, switched to, a new one, at start): its last answer's
        stats record, or None when it has none yet ("no answer yet")."""
        if record is None:
            self._last, self._last_dir = None, None
            self._show()
        else:
            self.answered(record)

    def answered(self, record: Mapping[str, Any]) -> None:
        """A finished answer's stats record: say what decoded it."""
        ran = ran_text(record)
        if stopped_before_first_token(record):
            ran = "stopped before its first token"  # nothing decoded: no method to name
        remote = isinstance(record.get("remote"), Mapping)
        self._last = ran or ("the server did not say how it decoded" if remote else "")
        written_by = record.get("model_dir")
        self._last_dir = Path(written_by) if isinstance(written_by, str) and written_by else None
        self._show()

    def failed(self) -> None:
        self._loaded = None
        if self._gone is not None:
            self.folder_gone(self._gone)  # why it failed, and what to do
            return
        self.setToolTip("")
        self.setText("No model loaded")

    def unloaded(self) -> None:
        self._loaded = None
        if self._gone is not None:
            self.folder_gone(self._gone)
            return
        self.setToolTip("The model was ejected; the next message loads it again.")
        self.setText("No model loaded (ejected)")

    def folder_gone(self, model_dir: Path) -> None:
        """The chat's model folder was moved, renamed or deleted: say so, not "ejected" (an
        eject that came first or comes later keeps this text until a model loads)."""
        self._gone = model_dir
        if self._loaded is not None:
            return  # still loaded: answers keep working until it is ejected
        self.setToolTip("The chat's banner offers to locate the folder or choose another model.")
        self.setText(f"No model loaded: the folder “{model_dir.name}” is gone")

    def _show(self) -> None:
        loaded = self._loaded
        if loaded is None:
            return
        remote = is_remote(loaded.model_dir)
        parts = [f"Model: {self._name(loaded.model_dir)}"]
        if not remote:
            parts.append(loaded.device)
        # The chat's last answer, while the model that wrote it is the one loaded (after a
        # switch to another model, it says nothing about this one).
        last = self._last if self._last_dir in (None, loaded.model_dir) else None
        if last:
            parts.append(f"last answer: {last}")
        elif not remote:
            parts.append("MTP head loaded, no answer yet" if loaded.mtp else "plain decoding")
        if not remote:
            parts.append(f"loaded in {loaded.load_s:.1f} s")
        self.setText(SEPARATOR.join(parts))
        self.setToolTip(
            "What decoded the chat's last answer: plain decoding, MTP with n guesses per step "
            "or prompt lookup, and the share of guesses the model kept. Auto chooses turn by "
            "turn; each answer's own line says the same."
            if loaded.mtp or last
            else "Plain decoding: this model runs without MTP guesses."
        )
