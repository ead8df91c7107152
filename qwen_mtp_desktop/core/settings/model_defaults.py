"""A model's default chat settings: what new chats of that model start with (issue 44, "what LM
Studio users reach for" 2).

The rule a new chat follows (core.chat.new_chat): this model's defaults when it has some, else
the default preset, else the model's own sampling (generation_config.json). Each entry holds a
system prompt and every value a preset holds, plus the thinking budget and "When too long";
the device and decoding method stay the ones last chosen (how this computer runs a model).

An entry is keyed by what core.models.library.model_key says names the model (its weights'
sums from the export manifest, else its folder with its weights' size, or a remote server's
id), so a folder moved or renamed keeps its defaults when its build record says which weights
it holds, and another model put in its place never takes them. Kept in the settings file
(`Settings.model_defaults`), read as hostile input: a damaged entry is dropped and named.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from qwen_mtp_desktop.core.prompt.context_limit import OVERFLOW_POLICIES
from qwen_mtp_desktop.core.settings.presets import (
    MAX_SYSTEM_PROMPT_CHARS,
    PRESET_CHECKS,
    PresetError,
)

#: core.chat.store.records.MAX_THINKING_BUDGET (that module sits above this one; a unit test
#: holds the two equal).
MAX_THINKING_BUDGET = 1_000_000


def _budget(value: object) -> bool:
    if value is None:
        return True
    return (
        isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_THINKING_BUDGET
    )


#: What a model's defaults hold (ChatSettings' names) and what each may be.
MODEL_DEFAULT_CHECKS: dict[str, Callable[[object], bool]] = {
    **PRESET_CHECKS,
    "thinking_budget": _budget,
    "context_overflow": lambda v: v in OVERFLOW_POLICIES,
}
MODEL_DEFAULT_SETTINGS: tuple[str, ...] = tuple(MODEL_DEFAULT_CHECKS)
MAX_MODEL_DEFAULTS = 200
MAX_KEY_CHARS = 1024
_FLOATS = ("temperature", "top_p", "repetition_penalty", "presence_penalty")


def _key(value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_KEY_CHARS or "\x00" in value:
        raise PresetError("Stored model defaults name no model.")
    return value


def _checked(values: Mapping[str, object], prompt: object) -> tuple[str, dict[str, Any]]:
    if not isinstance(prompt, str) or "\x00" in prompt:
        raise PresetError("A model's stored defaults have a damaged system prompt.")
    if len(prompt) > MAX_SYSTEM_PROMPT_CHARS:
        raise PresetError(
            f"The system prompt is too long for a model's defaults ({len(prompt):,} characters; "
            f"at most {MAX_SYSTEM_PROMPT_CHARS:,}).",
            "Shorten it, then save the model's defaults again.",
        )
    kept: dict[str, Any] = {}
    for key, check in MODEL_DEFAULT_CHECKS.items():
        if key not in values:
            continue
        value = values[key]
        if not check(value):
            raise PresetError(f"A model's defaults have a {key} they cannot use: {value!r:.40}.")
        kept[key] = float(value) if isinstance(value, int | float) and key in _FLOATS else value
    return prompt, kept


@dataclass(frozen=True)
class ModelDefaults:
    """The settings new chats of one model start with."""

    #: core.models.library.model_key of the model.
    model: str
    #: What the model was called when they were saved (shown; never used to find them).
    name: str
    system_prompt: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of_chat(cls, model: str, name: str, settings: object, prompt: str) -> ModelDefaults:
        """A chat's settings (a ChatSettings) and system prompt as a model's defaults;
        PresetError for an over-long prompt or a value the chat options cannot show."""
        values = {key: getattr(settings, key) for key in MODEL_DEFAULT_SETTINGS}
        prompt, kept = _checked(values, prompt)
        return cls(_key(model), name[:200], prompt, kept)

    def to_stored(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "name": self.name,
            "system_prompt": self.system_prompt,
            "settings": dict(self.values),
        }

    @classmethod
    def from_stored(cls, raw: object) -> ModelDefaults:
        """An entry from its stored form; PresetError when any part is damaged."""
        if not isinstance(raw, dict):
            raise PresetError("Stored model defaults are not an object.")
        name = raw.get("name", "")
        if not isinstance(name, str) or len(name) > 200 or not name.isprintable():
            raise PresetError("Stored model defaults have a damaged name.")
        values = raw.get("settings", {})
        if not isinstance(values, dict):
            raise PresetError("Stored model defaults have damaged settings.")
        prompt, kept = _checked(values, raw.get("system_prompt", ""))
        return cls(_key(raw.get("model")), name, prompt, kept)


def clean_model_defaults(raw: object) -> tuple[list[ModelDefaults], list[str]]:
    """The stored entries that pass their check, and the names of those that do not (each
    falls back alone; a second entry for one model is dropped)."""
    if not isinstance(raw, list) or len(raw) > MAX_MODEL_DEFAULTS:
        return [], ["models' default settings"]
    good: list[ModelDefaults] = []
    bad: list[str] = []
    for index, item in enumerate(raw):
        try:
            entry = ModelDefaults.from_stored(item)
        except PresetError:
            bad.append(f"model defaults {index + 1}")
            continue
        if any(other.model == entry.model for other in good):
            bad.append(f"a second set of defaults for “{entry.name}”")
            continue
        good.append(entry)
    return good, bad


def find_model_defaults(entries: Sequence[ModelDefaults], key: str | None) -> ModelDefaults | None:
    """The defaults saved for the model `key` names, or None (None: the model is not known yet)."""
    if key is None:
        return None
    return next((entry for entry in entries if entry.model == key), None)


def replaced(stored: Sequence[object], key: str, entry: ModelDefaults | None) -> list[Any]:
    """The stored list (`Settings.model_defaults`) with the model `key`'s entry replaced by
    `entry` (None: removed); the other models' entries stay as they are (merge on write)."""
    kept = [item for item in stored if not (isinstance(item, dict) and item.get("model") == key)]
    if entry is not None:
        kept.append(entry.to_stored())
    return kept[-MAX_MODEL_DEFAULTS:]
