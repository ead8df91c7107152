"""The model's sampling defaults from generation_config.json (issue 26 item 3): a hostile file
never breaks a chat; good values are used as the chat's "model default"; every ignored value
is said."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.generation_defaults import (
    FILE_NAME,
    LIMITS,
    MAX_BYTES,
    ModelSampling,
    parse_generation_config,
    read_generation_defaults,
)
from qwen_mtp_desktop.core.chat.store.records import ChatSettings
from qwen_mtp_desktop.core.decoding.method import Sampling

#: Qwen3.5's own file (thinking defaults).
QWEN = {
    "bos_token_id": 248044,
    "do_sample": True,
    "eos_token_id": [248046, 248044],
    "pad_token_id": 248044,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
    "transformers_version": "4.57.0",
}

_VALUES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
    | st.lists(st.integers(), max_size=3)
    | st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)
)
_KEYS = st.sampled_from(
    [*LIMITS, "do_sample", "min_p", "frequency_penalty", "eos_token_id", "max_new_tokens"]
)


def _within_limits(sampling: Sampling) -> bool:
    for name, (low, high, with_low, _) in LIMITS.items():
        value = getattr(sampling, name)
        if not (value >= low if with_low else value > low) or value > high:
            return False
    return True


@settings(max_examples=500, deadline=None)
@given(raw=st.dictionaries(_KEYS, _VALUES, max_size=8))
def test_any_values_give_runnable_defaults_or_none_and_say_what_was_ignored(
    raw: dict[str, object],
) -> None:
    found = parse_generation_config(raw)
    assert isinstance(found, ModelSampling)
    if found.sampling is not None:
        assert found.sampling.problems() == []
        assert found.sampling.greedy or _within_limits(found.sampling)
        assert found.describe().startswith("the model's own (")
        # The chat can hold it: its settings accept it, and apply it unchanged.
        chat = ChatSettings().following(found.sampling)
        assert chat.sampling.temperature == found.sampling.temperature
        if not found.sampling.greedy:
            assert chat.sampling.top_k == found.sampling.top_k
    for name, (low, high, with_low, _) in LIMITS.items():
        if name not in raw:
            continue
        value = raw[name]
        good = (
            not isinstance(value, bool)
            and isinstance(value, int if name == "top_k" else int | float)
            and math.isfinite(float(value))  # type: ignore[arg-type]
            and (value >= low if with_low else value > low)  # type: ignore[operator]
            and value <= high  # type: ignore[operator]
        )
        noted = any(note.startswith(f"{FILE_NAME}: {name} is") for note in found.notes)
        assert noted == (not good), (name, value, found.notes)
    for note in found.notes:
        assert len(note) < 300


def test_qwens_own_file_is_the_chats_model_default() -> None:
    found = parse_generation_config(QWEN)
    assert found.sampling == Sampling(temperature=0.6, top_p=0.95, top_k=20)
    assert found.describe() == "the model's own (temperature 0.6, top-p 0.95, top-k 20)"
    assert found.notes == ()
    chat = ChatSettings(temperature=0.0).following(found.sampling)
    assert (chat.temperature, chat.top_p, chat.top_k) == (0.6, 0.95, 20)
    # A chat whose user chose their own values keeps them.
    own = ChatSettings(temperature=0.3, model_sampling=False)
    assert own.following(found.sampling) == own


def test_greedy_unless_do_sample_and_penalties_kept() -> None:
    assert parse_generation_config({"temperature": 0.7}).sampling == Sampling()
    with_penalty = parse_generation_config({"do_sample": False, "repetition_penalty": 1.1})
    assert with_penalty.sampling == Sampling(repetition_penalty=1.1)
    assert with_penalty.describe() == "the model's own (greedy, repetition penalty 1.1)"
    assert parse_generation_config({"eos_token_id": 3}).sampling is None
    unused = parse_generation_config({**QWEN, "min_p": 0.0})
    assert unused.notes == (f"{FILE_NAME}: min_p has no chat setting and is not used.",)


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not an object"),
        (b"{" + b" " * (MAX_BYTES + 1) + b"}", "such a file can reasonably hold"),
        (json.dumps({"do_sample": True, "temperature": 1e308 * 10}).encode(), "not valid JSON"),
        ('{"temperature": 0.5, "top_p": "\ud800"}'.encode("utf-8", "surrogatepass"), ""),
        (b'{"a":' * 10_000 + b"1" + b"}" * 10_000, ""),
    ],
)
def test_a_damaged_file_is_ignored_with_a_note(tmp_path: Path, content: bytes, words: str) -> None:
    (tmp_path / FILE_NAME).write_bytes(content)
    found = read_generation_defaults(tmp_path)
    assert found.sampling is None
    assert found.notes and "sampling settings apply" in found.notes[0]
    assert words in found.notes[0]


def test_no_file_no_defaults_and_the_demo_model_is_greedy(tmp_path: Path) -> None:
    assert read_generation_defaults(tmp_path) == ModelSampling(None)
    from qwen_mtp_desktop.core.files.paths import demo_model_dir

    demo = read_generation_defaults(demo_model_dir())
    assert demo.sampling == Sampling() and demo.describe() == "the model's own (greedy)"


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.dictionaries(st.sampled_from(["model_sampling", "temperature", "top_p",
                                             "top_k", "presence_penalty"]), _VALUES))  # fmt: skip
def test_stored_chat_settings_with_any_values_load(raw: dict[str, object]) -> None:
    """Old rows (no model_sampling) follow the model only when they hold the old defaults."""
    loaded = ChatSettings.from_dict(raw)
    assert isinstance(loaded.model_sampling, bool)
    if isinstance(raw.get("model_sampling"), bool):
        assert loaded.model_sampling is raw["model_sampling"]
    assert ChatSettings.from_dict(loaded.to_dict()) == loaded
