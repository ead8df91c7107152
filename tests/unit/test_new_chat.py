"""What a new chat starts with (core.chat.new_chat): the model's defaults or the default
preset's sampling, never a value left by another chat, whatever the remembered settings hold."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.new_chat import (
    new_chat_sampling_source,
    new_chat_settings,
    new_chat_system_prompt,
    sampling_key,
)
from qwen_mtp_desktop.core.chat.store.records import ChatSettings
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
    assert new_chat_sampling_source(None) == "New chat: the model's defaults"
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
