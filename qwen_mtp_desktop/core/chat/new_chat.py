"""What a new chat starts with, and how the chat options say where its sampling came from.

A new chat takes the device and decoding method last chosen (else MTP) and samples as the preset
new chats start from says, when one is chosen, else as the model's own defaults
(core.chat.generation_defaults): a temperature or seed chosen in one chat, or left by a deleted
preset, must not follow every new chat unseen (issue 44). MCP servers are enabled per chat, so
a new chat starts with none.
"""

from __future__ import annotations

import json
from dataclasses import replace

from qwen_mtp_desktop.core.chat.store.records import ChatSettings
from qwen_mtp_desktop.core.settings.presets import ChatPreset


def sampling_key(settings: ChatSettings) -> tuple[object, ...]:
    """The values that decide how an answer is sampled."""
    return (
        settings.model_sampling,
        settings.temperature,
        settings.top_p,
        settings.top_k,
        settings.repetition_penalty,
        settings.presence_penalty,
        settings.seed,
    )


def new_chat_settings(remembered: str | None, preset: ChatPreset | None) -> ChatSettings:
    """A new chat's settings from the last chosen ones (`remembered`: their JSON, which may be
    damaged or absent) and the preset new chats start from (None: the model's defaults)."""
    chosen = ChatSettings(temperature=0.0)
    if remembered:
        try:
            saved = json.loads(remembered)
        except ValueError:
            saved = None
        if isinstance(saved, dict):
            chosen = ChatSettings.from_dict(saved)
    chosen = chosen.model_defaults()
    chosen = replace(chosen, **preset.values) if preset is not None else chosen
    return replace(chosen, mcp_servers=())


def new_chat_sampling_source(preset: ChatPreset | None) -> str:
    """Where a new chat's sampling values came from, as the chat options say it."""
    if preset is not None:
        return f"New chat: the default preset “{preset.name}”"
    return "New chat: the model's defaults"


def new_chat_system_prompt(preset: ChatPreset | None) -> str:
    """A new chat's system prompt: the default preset's, else none."""
    return preset.system_prompt if preset is not None else ""
