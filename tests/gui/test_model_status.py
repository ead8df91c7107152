"""The status bar's model line across a vanished folder: it names the gone folder until a
model loads or the chat moves on to another model, whatever order load failures and ejects
come in (review finding of issue 28: the gone text outlived a switch to another model)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.engine import LoadedModel
from qwen_mtp_desktop.ui.model_status import ModelStatus

pytestmark = [pytest.mark.gui]

GONE = Path("/models/qwen3.5-0.8b-int4")
OTHER = Path("/models/qwen3.5-2b-int4")


def _status(qtbot: QtBot) -> ModelStatus:
    status = ModelStatus(dict)
    qtbot.addWidget(status)
    return status


def _loaded(model_dir: Path) -> LoadedModel:
    return LoadedModel(model_dir, "CPU", mtp=True, model_type="qwen3_5", load_s=1.25)


def test_a_failed_load_of_the_gone_folder_still_says_it_is_gone(qtbot: QtBot) -> None:
    status = _status(qtbot)
    status.folder_gone(GONE)
    status.loading(GONE)
    status.failed()
    assert status.text() == "No model loaded: the folder “qwen3.5-0.8b-int4” is gone"
    assert "locate the folder" in status.toolTip()


def test_another_model_clears_the_gone_folder(qtbot: QtBot) -> None:
    status = _status(qtbot)
    status.folder_gone(GONE)
    status.loading(OTHER)
    assert status.text() == "Loading qwen3.5-2b-int4…"
    status.failed()
    assert status.text() == "No model loaded"
    status.unloaded()
    assert status.text() == "No model loaded (ejected)"


def test_an_eject_after_the_folder_went_keeps_the_reason(qtbot: QtBot) -> None:
    status = _status(qtbot)
    status.loaded(_loaded(GONE))
    status.folder_gone(GONE)
    assert status.text().startswith("Model: qwen3.5-0.8b-int4")  # still answers while loaded
    status.unloaded()
    assert status.text().endswith("the folder “qwen3.5-0.8b-int4” is gone")
    status.loaded(_loaded(OTHER))
    status.unloaded()
    assert status.text() == "No model loaded (ejected)"


def test_an_answer_stopped_before_its_first_token_names_no_method(qtbot: QtBot) -> None:
    status = _status(qtbot)
    status.loaded(_loaded(OTHER))
    stopped = {"method": {"kind": "mtp", "drafts": 3}, "finish_reason": "cancelled"}
    status.answered({**stopped, "generated_tokens": 0, "acceptance_rate": 0.0})
    assert "last answer: stopped before its first token" in status.text()
    status.answered({**stopped, "generated_tokens": 12, "acceptance_rate": 0.5})
    assert "last answer: MTP n=3" in status.text()


def test_last_answer_is_the_shown_chats_while_its_model_is_loaded(qtbot: QtBot) -> None:
    """Issue 44, minor 4: the shown chat's last answer, kept across loads, and not claimed
    for another model the chat switched to."""
    status = _status(qtbot)
    record = {"method": {"kind": "mtp", "drafts": 2}, "generated_tokens": 9}
    status.chat_shown({**record, "model_dir": str(OTHER), "acceptance_rate": 0.5})
    status.loaded(_loaded(OTHER))
    assert "last answer: MTP n=2" in status.text()
    status.unloaded()
    status.loaded(_loaded(OTHER))
    assert "last answer: MTP n=2" in status.text()  # an eject does not forget the chat's
    status.loaded(_loaded(GONE))
    assert "last answer" not in status.text() and "no answer yet" in status.text()
    status.chat_shown(None)
    status.loaded(_loaded(OTHER))
    assert "no answer yet" in status.text()
