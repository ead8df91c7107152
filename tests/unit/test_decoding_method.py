"""DecodingMethod and Sampling: construction, what check() refuses (in words a user can act on),
labels, and records: round trips, the older "baseline" spelling, and generated garbage."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.method import (
    DEFAULT_LOOKUP_DRAFTS,
    DEFAULT_NGRAM,
    GREEDY,
    MAX_LOOKUP_DRAFTS,
    MAX_MTP_DEPTH,
    MAX_NGRAM,
    MAX_SEED,
    PLAIN,
    DecodingMethod,
    MethodError,
    Sampling,
)

# --- construction, labels ----------------------------------------------------------------------


def test_the_three_methods_and_their_labels() -> None:
    assert PLAIN == DecodingMethod.plain() == DecodingMethod()
    assert (PLAIN.label, PLAIN.short_label, str(PLAIN)) == (
        "plain decoding",
        "plain",
        "plain decoding",
    )
    mtp = DecodingMethod.mtp(2)
    assert (mtp.kind, mtp.drafts, mtp.ngram) == ("mtp", 2, 0)
    assert mtp.label == mtp.short_label == "MTP n=2"
    lookup = DecodingMethod.lookup()
    assert (lookup.drafts, lookup.ngram) == (DEFAULT_LOOKUP_DRAFTS, DEFAULT_NGRAM)
    assert lookup.label == "prompt lookup K=4, n-gram 3"
    assert lookup.short_label == "lookup K=4"


def test_what_each_method_is() -> None:
    assert PLAIN.is_plain and not PLAIN.uses_mtp_head and not PLAIN.drafts_vary
    assert DecodingMethod.mtp(1).uses_mtp_head and not DecodingMethod.mtp(1).drafts_vary
    assert DecodingMethod.lookup(2, 1).drafts_vary and not DecodingMethod.lookup().uses_mtp_head


def test_sampling_is_part_of_the_method_and_drafting_drops_it() -> None:
    sampled = Sampling(temperature=0.7, top_p=0.8, top_k=20, seed=3)
    method = DecodingMethod.plain(sampled)
    assert not sampled.greedy and method != PLAIN
    assert method.drafting == PLAIN and method.drafting.sampling is GREEDY
    assert str(method) == "plain decoding, temperature 0.7, top-p 0.8, top-k 20"
    assert DecodingMethod.mtp(2).with_sampling(sampled).sampling == sampled
    penalised = DecodingMethod.mtp(1, Sampling(repetition_penalty=1.2))
    assert penalised.sampling.greedy and penalised.sampling.penalised
    assert str(penalised) == "MTP n=1, greedy, repetition penalty 1.2"
    # Values are hashable: Auto keys its costs by method.
    assert len({PLAIN, DecodingMethod.plain(), DecodingMethod.mtp(1), DecodingMethod.mtp(1)}) == 2


# --- check() -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "says"),
    [
        (DecodingMethod("plain", 1, 0), "plain decoding drafts nothing"),
        (DecodingMethod.mtp(0), f"MTP needs 1 to {MAX_MTP_DEPTH}"),
        (DecodingMethod.mtp(MAX_MTP_DEPTH + 1), f"MTP needs 1 to {MAX_MTP_DEPTH}"),
        (DecodingMethod("mtp", 2, 3), "MTP has no n-gram size"),
        (DecodingMethod.lookup(0, 3), f"Prompt lookup needs 1 to {MAX_LOOKUP_DRAFTS}"),
        (DecodingMethod.lookup(MAX_LOOKUP_DRAFTS + 1, 3), "Prompt lookup needs"),
        (DecodingMethod.lookup(4, 0), f"n-gram size for prompt lookup must be 1 to {MAX_NGRAM}"),
        (DecodingMethod.lookup(4, MAX_NGRAM + 1), "n-gram size"),
        (DecodingMethod("beam", 0, 0), "unknown decoding method 'beam'"),  # type: ignore[arg-type]
        (DecodingMethod.mtp(True), "MTP needs"),  # type: ignore[arg-type]
        (DecodingMethod.plain(Sampling(temperature=-1)), "temperature is -1"),
        (DecodingMethod.plain(Sampling(temperature=math.nan)), "temperature is nan"),
        (DecodingMethod.plain(Sampling(temperature=10**400)), "temperature is"),
        (DecodingMethod.plain(Sampling(top_p=0)), "top-p is 0"),
        (DecodingMethod.plain(Sampling(top_k=-1)), "top-k is -1"),
        (DecodingMethod.plain(Sampling(min_p=1.0)), "min-p is 1.0"),
        (DecodingMethod.plain(Sampling(repetition_penalty=0)), "repetition penalty is 0"),
        (DecodingMethod.plain(Sampling(presence_penalty=3)), "presence penalty is 3"),
        (DecodingMethod.plain(Sampling(frequency_penalty=-2.5)), "frequency penalty is -2.5"),
        (DecodingMethod.plain(Sampling(seed=-1)), "seed is -1"),
        (DecodingMethod.plain(Sampling(seed=MAX_SEED + 1)), "seed is"),
        (DecodingMethod.plain(Sampling(temperature="hot")), "temperature must be a number"),  # type: ignore[arg-type]
    ],
)
def test_check_names_the_value_that_cannot_run(method: DecodingMethod, says: str) -> None:
    with pytest.raises(MethodError, match=None) as caught:
        method.check()
    assert says in str(caught.value)


def test_check_passes_the_bounds() -> None:
    for method in (
        PLAIN,
        DecodingMethod.mtp(1),
        DecodingMethod.mtp(MAX_MTP_DEPTH),
        DecodingMethod.lookup(1, 1),
        DecodingMethod.lookup(MAX_LOOKUP_DRAFTS, MAX_NGRAM),
        DecodingMethod.plain(Sampling(temperature=100, top_p=1, top_k=0, seed=MAX_SEED)),
    ):
        method.check()


def test_every_sampling_problem_is_listed() -> None:
    problems = Sampling(temperature=-1, top_p=2, seed=-5).problems()
    assert len(problems) == 3


# --- records -----------------------------------------------------------------------------------

_methods = st.one_of(
    st.just(PLAIN),
    st.integers(1, MAX_MTP_DEPTH).map(DecodingMethod.mtp),
    st.builds(DecodingMethod.lookup, st.integers(1, MAX_LOOKUP_DRAFTS), st.integers(1, MAX_NGRAM)),
)
_samplings = st.builds(
    Sampling,
    temperature=st.sampled_from([0.0, 0.3, 1.0, 100]),
    top_p=st.floats(0.01, 1.0),
    top_k=st.integers(0, 500),
    min_p=st.floats(0.0, 0.99),
    repetition_penalty=st.floats(0.5, 2.0),
    presence_penalty=st.floats(-2, 2),
    frequency_penalty=st.floats(-2, 2),
    seed=st.none() | st.integers(0, MAX_SEED),
)


@given(_methods, _samplings)
@settings(max_examples=150)
def test_a_record_round_trips_through_json(method: DecodingMethod, sampling: Sampling) -> None:
    method = method.with_sampling(sampling)
    method.check()
    record = json.loads(json.dumps(method.to_record()))
    assert DecodingMethod.from_record(record) == method


@pytest.mark.parametrize(
    ("old", "method"),
    [
        ({"mode": "baseline", "num_assistant_tokens": 0}, PLAIN),
        ({"mode": "baseline", "num_assistant_tokens": 3, "max_ngram_size": 2}, PLAIN),
        ({"mode": "mtp", "num_assistant_tokens": 2, "max_ngram_size": 0}, DecodingMethod.mtp(2)),
        ({"mode": "mtp", "num_assistant_tokens": 2, "max_ngram_size": 3}, DecodingMethod.mtp(2)),
        (
            {"mode": "lookup", "num_assistant_tokens": 3, "max_ngram_size": 2},
            DecodingMethod.lookup(3, 2),
        ),
        ({"mode": "lookup", "num_assistant_tokens": 3}, None),  # no n-gram: not a method
        ({"mode": "mtp", "num_assistant_tokens": 0}, None),
        ({"mode": "mtp", "num_assistant_tokens": "2"}, None),
        ({"mode": "beam"}, None),
        ({}, None),
    ],
)
def test_older_records_read_as_methods(old: dict[str, Any], method: DecodingMethod | None) -> None:
    assert DecodingMethod.from_record(old) == method


def test_the_stored_message_stats_of_main_read_as_methods() -> None:
    from pathlib import Path

    rows = json.loads(
        (Path(__file__).parent / "data" / "main_records" / "message_stats.json").read_text()
    )
    found = {name: DecodingMethod.from_record(row) for name, row in rows.items()}
    assert found["mtp_fixed"] == DecodingMethod.mtp(2)
    assert found["lookup"] == DecodingMethod.lookup(3, 2)
    assert found["plain"] == found["sampled"] == PLAIN  # main kept no sampling in its stats
    assert found["auto_0"] == DecodingMethod.mtp(1) and found["auto_1"] == PLAIN


def test_an_invalid_sampling_value_keeps_its_default_alone() -> None:
    record = DecodingMethod.plain(Sampling(temperature=0.5, seed=9)).to_record()
    record["sampling"]["top_k"] = -3
    record["sampling"]["seed"] = True
    found = DecodingMethod.from_record(record)
    assert found is not None and found.sampling == Sampling(temperature=0.5)
    record["sampling"] = "hot"
    assert DecodingMethod.from_record(record) == PLAIN
    # One value out of range as a whole (temperature above 100): greedy, not a crash.
    record["sampling"] = {"temperature": 1e300}
    assert DecodingMethod.from_record(record) == PLAIN


_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
    | st.sampled_from(["plain", "mtp", "lookup", "baseline", "kind", "drafts"])
)
_json = st.recursive(
    _json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
_keys = st.sampled_from(
    ["kind", "mode", "drafts", "ngram", "num_assistant_tokens", "max_ngram_size", "sampling"]
)
_sampling_keys = st.sampled_from([*Sampling().to_record(), "other"])
_records = st.dictionaries(
    _keys,
    _json
    | st.dictionaries(_sampling_keys, _json_scalars | st.integers(-(10**400), 10**400), max_size=8),
    max_size=7,
)


@given(_records | _json)
@settings(max_examples=400)
@example({"kind": "plain", "sampling": {"temperature": 10**400}})
@example({"kind": "mtp", "drafts": 10**400})
@example({"kind": "lookup", "drafts": 2, "ngram": 2, "sampling": {"seed": 2**64}})
@example({"mode": "baseline", "sampling": {"top_k": 10**30}})
@example([1, 2])
def test_garbage_never_raises_and_gives_a_valid_method_or_none(data: Any) -> None:
    found = DecodingMethod.from_record(data)
    if found is not None:
        found.check()  # what it returns can run
        assert DecodingMethod.from_record(found.to_record()) == found
