"""Chat presets in the settings file are hostile input, like every other settings value.

Hypothesis writes `chat_presets` as garbage: wrong types for the list and each preset, names
that are empty, huge, control characters or duplicates, system prompts that are not text,
hold a NUL or are too long, settings of the wrong type, NaN-free extremes past the panel's
ranges, deep nesting, unknown keys; and `default_chat_preset` naming a preset or not.
Properties of `load_settings`: nothing raises; every preset kept passes its check and is
exactly what was written (as `to_stored` writes it); every damaged preset is dropped alone and
named in the notice; the valid ones are kept; the default preset is kept only when it names a
kept preset; a file with nothing damaged has no notice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.settings.presets import (
    ChatPreset,
    PresetError,
    clean_presets,
    find_preset,
)
from qwen_mtp_desktop.core.settings.store import load_settings

_GOOD_SETTINGS = {
    "thinking": True,
    "max_new_tokens": 1024,
    "model_sampling": False,
    "temperature": 0.6,
    "top_p": 0.95,
    "top_k": 20,
    "repetition_penalty": 1.0,
    "presence_penalty": 1.5,
    "seed": None,
}

_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)


def _name() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(["Coding", "coding", "Creative", "  Spaced   name ", "Ünïcode ✓"]),
        st.text(max_size=70),
        st.sampled_from(["", "   ", "a\x00b", "tab\there", "x" * 61, "\u202e"]),
        _junk,
    )


@st.composite
def preset_settings(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:
        return draw(_junk)
    values = dict(_GOOD_SETTINGS)
    for key in draw(st.lists(st.sampled_from(sorted(_GOOD_SETTINGS)), max_size=3)):
        values[key] = draw(
            st.one_of(
                _junk,
                st.sampled_from([0, 2.01, 32769, 1001, -3, 0.49, 2**31, 1e308, "0.7", True]),
            )
        )
    for key in draw(st.lists(st.sampled_from(sorted(_GOOD_SETTINGS)), max_size=2)):
        values.pop(key, None)  # a missing value is left as the chat has it
    if draw(st.booleans()):
        values[draw(st.text(max_size=8))] = draw(_junk)  # a newer version's key
    return values


@st.composite
def stored_preset(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 11)) == 0:
        return draw(_junk)
    raw: dict[str, Any] = {"name": draw(_name()), "settings": draw(preset_settings())}
    prompt = draw(
        st.one_of(
            st.text(max_size=60),
            st.sampled_from(["be brief", "nul\x00inside", "p" * 32_001, ""]),
            _junk,
        )
    )
    if draw(st.booleans()):
        raw["system_prompt"] = prompt
    if draw(st.integers(0, 15)) == 0:
        raw["settings"] = {"nested": [[[[{"deep": 1}]]]]}
    return raw


def _expected(raw: list[Any]) -> tuple[list[dict[str, Any]], int]:
    """What a correct reader keeps, written independently of clean_presets."""
    kept: list[dict[str, Any]] = []
    dropped = 0
    for item in raw:
        try:
            preset = ChatPreset.from_stored(item)
        except PresetError:
            dropped += 1
            continue
        if any(k["name"].casefold() == preset.name.casefold() for k in kept):
            dropped += 1
            continue
        kept.append(preset.to_stored())
    return kept, dropped


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(
    presets=st.one_of(st.lists(stored_preset(), max_size=6), _junk),
    default=st.one_of(st.none(), _name()),
)
@example(presets=[{"name": "Coding", "settings": _GOOD_SETTINGS}], default="coding")
@example(presets=[{"name": "Coding", "settings": {"temperature": "hot"}}], default="Coding")
@example(presets=[{"name": "A", "settings": {}}, {"name": "a", "settings": {}}], default=None)
def test_garbage_presets_fall_back_alone_and_are_named(
    tmp_path_factory: Any, presets: Any, default: Any
) -> None:
    path: Path = tmp_path_factory.mktemp("presets") / "settings.json"
    path.write_text(
        json.dumps({"device": "CPU", "chat_presets": presets, "default_chat_preset": default}),
        encoding="utf-8",
    )
    loaded = load_settings(path)  # never raises
    kept = loaded.settings.chat_presets
    for stored in kept:
        assert ChatPreset.from_stored(stored).to_stored() == stored  # passes its check
    if isinstance(presets, list):
        expected, dropped = _expected(presets)
        assert kept == expected  # the valid ones, exactly as written
        assert clean_presets(presets)[0] == [ChatPreset.from_stored(s) for s in expected]
    else:
        dropped = 0 if presets is None else 1  # not a list: all of it, named "chat_presets"
        assert kept == []
    chosen = loaded.settings.default_chat_preset
    presets_kept = [ChatPreset.from_stored(s) for s in kept]
    if chosen is not None:
        assert find_preset(presets_kept, chosen) is not None
    default_lost = default is not None and chosen is None
    if dropped or default_lost:
        assert loaded.notice is not None and "damaged" in loaded.notice
        if dropped and isinstance(presets, list):
            assert "chat preset" in loaded.notice
        assert list(path.parent.glob("settings.json.damaged-*")), "no backup kept"
    else:
        assert loaded.notice is None


def test_a_damaged_preset_is_named_and_the_others_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    good = {"name": "Coding", "system_prompt": "Answer with code.", "settings": _GOOD_SETTINGS}
    hot = {"name": "Hot", "settings": {"temperature": "very"}}
    path.write_text(
        json.dumps({"chat_presets": [good, hot, 7], "default_chat_preset": "Hot"}),
        encoding="utf-8",
    )
    loaded = load_settings(path)
    assert [p["name"] for p in loaded.settings.chat_presets] == ["Coding"]
    assert loaded.settings.chat_presets[0]["system_prompt"] == "Answer with code."
    assert loaded.settings.default_chat_preset is None
    notice = loaded.notice or ""
    for name in ("the chat preset “Hot”", "chat preset 3", "the preset new chats start from"):
        assert name in notice, notice
