"""What a new chat starts with (core.chat.new_chat): the model's defaults or the default
preset's sampling, never a value left by another chat, whatever the remembered settings hold."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.new_chat import (
    NEW_CHAT_RULE,
    new_chat_sampling_source,
    new_chat_settings,
    new_chat_system_prompt,
    sampling_key,
)
from qwen_mtp_desktop.core.chat.store.records import (
    MAX_THINKING_BUDGET as RECORDS_MAX_THINKING_BUDGET,
)
from qwen_mtp_desktop.core.chat.store.records import ChatSettings
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME
from qwen_mtp_desktop.core.models.library import model_key
from qwen_mtp_desktop.core.settings.model_defaults import (
    MAX_THINKING_BUDGET,
    ModelDefaults,
    clean_model_defaults,
    replaced,
)
from qwen_mtp_desktop.core.settings.presets import ChatPreset


def _remembered(**values: object) -> str:
    return json.dumps({**ChatSettings().to_dict(), **values})


def test_a_chats_sampling_does_not_follow_new_chats() -> None:
    settings = new_chat_settings(
        _remembered(temperature=1.5, seed=42, device="GPU", mcp_servers=["files"]), None
    )
    assert settings.model_sampling and settings.seed is None
    assert settings.device == "GPU"  # the device last chosen stays
    assert settings.mcp_servers == ()  # servers are enabled per chat
    assert new_chat_sampling_source(None) == "New chat: the model's own sampling"
    assert new_chat_system_prompt(None) == ""


def test_the_default_preset_sets_a_new_chats_sampling_and_prompt() -> None:
    preset = ChatPreset("precise", "Answer briefly.", {"model_sampling": False, "temperature": 0.2})
    settings = new_chat_settings(_remembered(temperature=1.5), preset)
    assert not settings.model_sampling and settings.temperature == 0.2
    assert new_chat_sampling_source(preset) == "New chat: the default preset “precise”"
    assert new_chat_system_prompt(preset) == "Answer briefly."
    assert sampling_key(settings) != sampling_key(new_chat_settings(None, None))


@given(st.text(max_size=300) | st.none())
def test_any_remembered_text_gives_a_new_chat(remembered: str | None) -> None:
    settings = new_chat_settings(remembered, None)
    assert settings.model_sampling and settings.mcp_servers == ()


def test_a_models_defaults_come_before_the_default_preset() -> None:
    preset = ChatPreset("precise", "Answer briefly.", {"model_sampling": False, "temperature": 0.2})
    values = {"model_sampling": False, "temperature": 0.6, "context_overflow": "rolling_window"}
    model = ModelDefaults("weights:ab", "Qwen3.5-2B", "You are a poet.", values)
    settings = new_chat_settings(_remembered(device="GPU", mcp_servers=["files"]), preset, model)
    assert settings.temperature == 0.6 and settings.context_overflow == "rolling_window"
    assert settings.device == "GPU" and settings.mcp_servers == ()
    assert new_chat_system_prompt(preset, model) == "You are a poet."
    assert new_chat_sampling_source(preset, model) == "New chat: this model's defaults"
    assert "this model's defaults" in NEW_CHAT_RULE


def test_a_model_is_known_by_its_weights_else_by_its_folder_and_size(tmp_path: Path) -> None:
    """A folder moved or renamed keeps what names it when its build record says which weights
    it holds; without one, another model put in its place is not taken for it."""
    export = tmp_path / "export"
    shutil.copytree(demo_model_dir(), export)
    moved = tmp_path / "renamed"
    shutil.copytree(export, moved)
    assert model_key(export) == model_key(moved) == model_key(demo_model_dir())
    assert model_key(export).startswith("weights:")
    (moved / MANIFEST_NAME).unlink()
    bare = model_key(moved)
    assert bare.startswith("folder:") and bare != model_key(export)
    with (moved / "openvino_language_model.bin").open("ab") as weights:
        weights.write(b"\0")  # another model in the same folder
    assert model_key(moved) != bare
    assert model_key(Path("remote:0123456789ab")) == "remote:0123456789ab"


def test_stored_model_defaults_are_checked_one_by_one() -> None:
    good = ModelDefaults.of_chat("weights:ab", "demo", ChatSettings(), "Hi").to_stored()
    hot = {**good, "model": "weights:cd", "settings": {"temperature": 9.0}}
    entries, bad = clean_model_defaults([good, hot, 7, good])
    assert [e.model for e in entries] == ["weights:ab"] and len(bad) == 3
    assert MAX_THINKING_BUDGET == RECORDS_MAX_THINKING_BUDGET
    assert replaced([good, hot], "weights:ab", None) == [hot]
    assert replaced([good], "weights:cd", entries[0]) == [good, good]
