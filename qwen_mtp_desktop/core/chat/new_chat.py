"""What a new chat starts with, and how the chat options say where its sampling came from.

One rule (NEW_CHAT_RULE): a new chat takes the device and decoding method last chosen (else
MTP); its system prompt and settings come from this model's defaults when it has some
(core.settings.model_defaults), else from the preset new chats start from, when one is chosen,
else from the model's own sampling (core.chat.generation_defaults): a temperature or seed
chosen in one chat, or left by a deleted preset, must not follow every new chat unseen (issue
44). MCP servers are enabled per chat, so a new chat starts with none.
"""

from __future__ import annotations

import json
from dataclasses import replace

from qwen_mtp_desktop.core.chat.store.records import ChatSettings
from qwen_mtp_desktop.core.settings.model_defaults import ModelDefaults
from qwen_mtp_desktop.core.settings.presets import ChatPreset

#: The precedence, as the chat options and the user guide say it.
NEW_CHAT_RULE = (
    "A new chat starts with this model's defaults when it has some, else with the default "
    "preset (Presets › New chats start with this preset), else with the model's own sampling "
    "(its generation_config.json). The device and decoding method are the ones last chosen."
)


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


def new_chat_settings(
    remembered: str | None, preset: ChatPreset | None, model: ModelDefaults | None = None
) -> ChatSettings:
    """A new chat's settings from the last chosen ones (`remembered`: their JSON, which may be
    damaged or absent), this model's defaults (`model`) or else the preset new chats start from
    (None for both: the model's own sampling)."""
    chosen = ChatSettings(temperature=0.0)
    if remembered:
        try:
            saved = json.loads(remembered)
        except ValueError:
            saved = None
        if isinstance(saved, dict):
            chosen = ChatSettings.from_dict(saved)
    chosen = chosen.model_defaults()
    source = model if model is not None else preset
    chosen = replace(chosen, **source.values) if source is not None else chosen
    return replace(chosen, mcp_servers=())


def new_chat_sampling_source(preset: ChatPreset | None, model: ModelDefaults | None = None) -> str:
    """Where a new chat's sampling values came from, as the chat options say it."""
    if model is not None:
        return "New chat: this model's defaults"
    if preset is not None:
        return f"New chat: the default preset “{preset.name}”"
    return "New chat: the model's own sampling"


def new_chat_system_prompt(preset: ChatPreset | None, model: ModelDefaults | None = None) -> str:
    """A new chat's system prompt: this model's defaults', else the default preset's, else
    none."""
    source = model if model is not None else preset
    return source.system_prompt if source is not None else ""
