"""Chat presets: a name, a system prompt and the sampling settings a chat can take at once.

Presets are app-wide (kept in the settings file, `Settings.chat_presets`); a chat takes a
preset's values when the user applies it, and a new chat starts from the default preset when
one is chosen. A preset holds what the chat options panel holds besides the model and the
decoding method (device, MTP, draft tokens, prompt lookup and MCP tools stay the chat's own).
This module does not import the chat store (the settings file reads presets, and sits below
it); the chat panel applies a preset's `values` to a chat's ChatSettings.

The stored form is read as hostile input: each preset is checked on its own, and a damaged
one is dropped and named (the others are kept), as every other settings value.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from qwen_mtp_desktop.core.errors import UserFacingError


def _integer(low: int, high: int, *, none: bool = False) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        if value is None:
            return none
        return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high

    return check


def _number(low: float, high: float, *, open_low: bool = False) -> Callable[[object], bool]:
    def check(value: object) -> bool:
        if not isinstance(value, int | float) or isinstance(value, bool):
            return False
        if not math.isfinite(value):
            return False
        return (low < value if open_low else low <= value) and value <= high

    return check


#: The chat settings a preset holds (core.chat.store.records.ChatSettings' names) and what each
#: may be: ChatSettings' own checks within the chat options panel's ranges (a stored value
#: past them would show clamped while the chat ran with another).
PRESET_CHECKS: dict[str, Callable[[object], bool]] = {
    "thinking": lambda v: isinstance(v, bool),
    "max_new_tokens": _integer(1, 32768),
    "model_sampling": lambda v: isinstance(v, bool),
    "temperature": _number(0.0, 2.0),
    "top_p": _number(0.0, 1.0, open_low=True),
    "top_k": _integer(0, 1000),
    "repetition_penalty": _number(0.5, 2.0),
    "presence_penalty": _number(-2.0, 2.0),
    "seed": _integer(0, 2**31 - 1, none=True),  # None: a random seed
}
PRESET_SETTINGS: tuple[str, ...] = tuple(PRESET_CHECKS)
MAX_PRESETS = 100
MAX_NAME_CHARS = 60
MAX_SYSTEM_PROMPT_CHARS = 32_000


class PresetError(UserFacingError):
    """A preset name or a stored preset that cannot be used; the message says why."""

    code = "CHAT_PRESET"


def check_preset_name(name: object) -> str:
    """The name, trimmed; PresetError saying what to change when it cannot name a preset."""
    if not isinstance(name, str):
        raise PresetError("A preset's name must be text.")
    trimmed = " ".join(name.split())
    if not trimmed:
        raise PresetError("A preset needs a name.", "Type a name, such as “Coding”.")
    if len(trimmed) > MAX_NAME_CHARS:
        raise PresetError(
            f"A preset's name can have at most {MAX_NAME_CHARS} characters "
            f"(this one has {len(trimmed)}).",
            "Choose a shorter name.",
        )
    if not trimmed.isprintable():
        raise PresetError("A preset's name cannot hold control characters.")
    return trimmed


def _checked_prompt(prompt: object, name: str) -> str:
    if not isinstance(prompt, str) or "\x00" in prompt:
        raise PresetError(f"The preset “{name}” has a damaged system prompt.")
    if len(prompt) > MAX_SYSTEM_PROMPT_CHARS:
        raise PresetError(
            f"The system prompt is too long for a preset ({len(prompt):,} characters; at "
            f"most {MAX_SYSTEM_PROMPT_CHARS:,}).",
            "Shorten it, then save the preset again.",
        )
    return prompt


def _checked_values(values: Mapping[str, object], name: str) -> dict[str, Any]:
    """The preset settings among `values` (others ignored), each checked; PresetError names
    the first that fails."""
    kept: dict[str, Any] = {}
    for key, check in PRESET_CHECKS.items():
        if key not in values:
            continue
        value = values[key]
        if not check(value):
            raise PresetError(f"The preset “{name}” has a {key} it cannot use: {value!r:.40}.")
        kept[key] = float(value) if isinstance(value, int | float) and key in _FLOATS else value
    return kept


_FLOATS = ("temperature", "top_p", "repetition_penalty", "presence_penalty")


@dataclass(frozen=True)
class ChatPreset:
    """A named system prompt with chat settings (PRESET_SETTINGS; a missing one is left as
    the chat has it)."""

    name: str
    system_prompt: str = ""
    values: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of_chat(cls, name: str, settings: object, system_prompt: str) -> ChatPreset:
        """A preset of a chat's settings (a ChatSettings) and system prompt; PresetError for
        a bad name, an over-long prompt or a value the panel cannot show."""
        name = check_preset_name(name)
        values = {key: getattr(settings, key) for key in PRESET_SETTINGS}
        return cls(name, _checked_prompt(system_prompt, name), _checked_values(values, name))

    def renamed(self, name: str) -> ChatPreset:
        return replace(self, name=check_preset_name(name))

    def to_stored(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "system_prompt": self.system_prompt,
            "settings": dict(self.values),
        }

    @classmethod
    def from_stored(cls, raw: object) -> ChatPreset:
        """A preset from its stored form; PresetError when any part is damaged. Keys a newer
        version added are ignored."""
        if not isinstance(raw, dict):
            raise PresetError("A stored preset is not an object.")
        name = check_preset_name(raw.get("name"))
        prompt = _checked_prompt(raw.get("system_prompt", ""), name)
        values = raw.get("settings", {})
        if not isinstance(values, dict):
            raise PresetError(f"The preset “{name}” has damaged settings.")
        return cls(name, prompt, _checked_values(values, name))


def preset_label(raw: object, index: int) -> str:
    """What a damaged stored preset is called in the settings' notice."""
    name = raw.get("name") if isinstance(raw, dict) else None
    if isinstance(name, str) and name.strip() and name.isprintable():
        return f"the chat preset “{name.strip()[:MAX_NAME_CHARS]}”"
    return f"chat preset {index + 1}"


def clean_presets(raw: object) -> tuple[list[ChatPreset], list[str]]:
    """The stored presets that pass their check, and the names of those that do not (each
    damaged preset falls back alone; a second preset of one name is dropped and named)."""
    if not isinstance(raw, list) or len(raw) > MAX_PRESETS:
        return [], ["chat presets"]
    good: list[ChatPreset] = []
    bad: list[str] = []
    for index, item in enumerate(raw):
        try:
            preset = ChatPreset.from_stored(item)
        except PresetError:
            bad.append(preset_label(item, index))
            continue
        if any(p.name.casefold() == preset.name.casefold() for p in good):
            bad.append(f"a second chat preset named “{preset.name}”")
            continue
        good.append(preset)
    return good, bad


def find_preset(presets: Sequence[ChatPreset], name: str | None) -> ChatPreset | None:
    """The preset of that name (names compare without case), or None."""
    if name is None:
        return None
    wanted = name.casefold()
    return next((p for p in presets if p.name.casefold() == wanted), None)
