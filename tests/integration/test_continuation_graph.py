"""Long calls that continue a kept conversation run on the explicit-cache graphs of the target
and the MTP head (core.decoding.continuation): the answers and logits equal those of the
stateful graphs and of a cold prefill, with exact numerics, through follow-ups, drafts and
rollbacks; short calls stay on the stateful requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from qwen_mtp_desktop.core.decoding import decoder as decoder_module
from qwen_mtp_desktop.core.decoding import kv_slots
from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.engine import EXACT_NUMERICS

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def decoders(demo_model: Path) -> Iterator[dict[str, AppDecoder]]:
    """The "explicit" decoder sends every continuing call of 2+ tokens to the continuation
    graph, "stateful" none; "cold" keeps nothing (every turn a cold prefill)."""
    explicit = AppDecoder(demo_model, "CPU", EXACT_NUMERICS)
    for graph in (explicit.target.continuation, explicit.mtp.continuation):
        assert graph is not None
        graph.min_new_tokens = 2
        graph.min_kept_tokens = 1
    stateful = AppDecoder(demo_model, "CPU", EXACT_NUMERICS)
    stateful.target.continuation = stateful.mtp.continuation = None
    cold = AppDecoder(demo_model, "CPU", EXACT_NUMERICS, cache_budget=0)
    yield {"explicit": explicit, "stateful": stateful, "cold": cold}


def words(seed: int, count: int) -> list[int]:
    """Token ids of ordinary text (ids below 2,000 are word pieces in the demo vocabulary)."""
    return np.random.default_rng(seed).integers(300, 2000, count).tolist()


def answer(
    decoder: AppDecoder,
    ids: list[int],
    method: DecodingMethod,
    stable_prefix: int | None = None,
) -> list[int]:
    steps = decoder.decode(
        ids, method=method, max_new_tokens=24, stop_ids=set(), stable_prefix=stable_prefix
    )
    return [t for step in steps for t in step.tokens]


@pytest.mark.parametrize(
    "method",
    [
        DecodingMethod.plain(),
        DecodingMethod.mtp(1),
        DecodingMethod.mtp(3),
        DecodingMethod.lookup(3, 2),
        DecodingMethod.mtp(2, Sampling(temperature=1.0, top_k=8, seed=3)),
    ],
    ids=lambda m: m.label if isinstance(m, DecodingMethod) else str(m),
)
def test_follow_ups_equal_the_stateful_graph_and_a_cold_prefill(
    decoders: dict[str, AppDecoder], method: DecodingMethod
) -> None:
    """A conversation of four turns (each adds a long new part after the last answer):
    token for token the same answers on all three decoders, and the explicit decoder really
    took the continuation graph for the follow-ups."""
    for decoder in decoders.values():
        decoder.drop_states()
    graph = decoders["explicit"].target.continuation
    head = decoders["explicit"].mtp.continuation
    assert graph is not None and head is not None
    calls, head_calls = graph.calls, head.calls
    conversation: list[int] = []
    for turn in range(4):
        conversation += words(turn, 40 + 30 * turn)
        answers = {name: answer(d, conversation, method) for name, d in decoders.items()}
        assert answers["explicit"] == answers["stateful"] == answers["cold"], turn
        conversation += answers["cold"]
    assert graph.calls >= calls + 3
    if method.kind == "mtp":  # the head caught up on each follow-up on its twin graph
        assert head.calls >= head_calls + 3
    assert decoders["explicit"].last_prefill is not None
    assert decoders["explicit"].last_prefill.reused > 0


@pytest.mark.parametrize("method", [DecodingMethod.plain(), DecodingMethod.mtp(2)], ids=str)
def test_a_chat_coming_back_continues_on_the_graph_from_its_kept_copy(
    decoders: dict[str, AppDecoder], method: DecodingMethod
) -> None:
    """Switching back to a chat whose follow-up takes the continuation graph: its kept caches
    go to the graph as they are (no copy), not into the stateful request and out again (three
    copies), and the answer equals a cold prefill's."""
    for decoder in decoders.values():
        decoder.drop_states()
    explicit, cold = decoders["explicit"], decoders["cold"]
    first = words(20, 120)
    first += answer(explicit, first, method)
    answer(explicit, words(21, 90), method)  # another chat: the first one is put aside
    follow_up = first + words(22, 60)
    copies, other = explicit.target.kv.copies, explicit.target.kv.live
    steps = explicit.decode(follow_up, method=method, max_new_tokens=24, stop_ids=set())
    tokens = list(next(steps).tokens)  # the prefill ran
    resumed = explicit.last_prefill
    assert resumed is not None and resumed.source == "aside" and resumed.reused > 100
    # The other chat's entries copied aside; the first chat's go to the graph as they are.
    assert explicit.target.kv.copies - copies == other
    tokens += [t for step in steps for t in step.tokens]
    assert tokens == answer(cold, follow_up, method)


@pytest.mark.parametrize("method", [DecodingMethod.plain(), DecodingMethod.mtp(2)], ids=str)
def test_a_chat_coming_back_before_its_last_answer_hides_the_answer_without_a_copy(
    decoders: dict[str, AppDecoder], method: DecodingMethod
) -> None:
    """Switching back to a chat with a new message in place of its last answer (what every
    follow-up looks like when the template re-renders earlier answers, as Qwen3.5's does):
    the kept caches still go to the graph as they are, the answer's entries hidden by the mask
    rather than cut off (a cut copies every entry before it), and the answer equals a cold
    prefill's."""
    for decoder in decoders.values():
        decoder.drop_states()
    explicit, cold = decoders["explicit"], decoders["cold"]
    prompt = words(30, 120)
    answered = len(answer(explicit, prompt, method))
    answer(explicit, words(31, 90), method)  # another chat: the first one is put aside
    follow_up = prompt + words(32, 60)
    copies, other = explicit.target.kv.copies, explicit.target.kv.live
    steps = explicit.decode(follow_up, method=method, max_new_tokens=24, stop_ids=set())
    tokens = list(next(steps).tokens)
    resumed = explicit.last_prefill
    assert resumed is not None and resumed.source == "aside" and resumed.reused == len(prompt)
    assert explicit.target.kv.copies - copies == other  # the other chat's, nothing more
    assert explicit.target.kv.hidden == answered - 1  # the answer's entries (its last was
    # never processed), hidden
    tokens += [t for step in steps for t in step.tokens]
    assert tokens == answer(cold, follow_up, method)


@pytest.mark.parametrize("method", [DecodingMethod.plain(), DecodingMethod.mtp(2)], ids=str)
def test_an_edit_far_back_reads_the_conversation_out_once(
    decoders: dict[str, AppDecoder], method: DecodingMethod, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Editing an earlier message copies the conversation aside (its old version can come
    back) and prefills the edited part on the continuation graph: the copy just made feeds
    the graph, so the request's caches are read out once, not twice. The answer equals a cold
    prefill's, and switching back to the old version finds it kept."""
    monkeypatch.setattr(decoder_module, "MIN_TAIL_WORTH_SAVING", 8)  # 1,024 in the app
    for decoder in decoders.values():
        decoder.drop_states()
    explicit, cold = decoders["explicit"], decoders["cold"]
    first = words(40, 100)
    old = first + answer(explicit, first, method) + words(41, 80)
    old += answer(explicit, old, method)
    edited = first + words(42, 60)  # the second message, edited
    reads = explicit.target.kv.reads
    steps = explicit.decode(edited, method=method, max_new_tokens=24, stop_ids=set())
    tokens = list(next(steps).tokens)  # the prefill ran
    resumed = explicit.last_prefill
    assert resumed is not None and resumed.source == "live" and resumed.reused >= len(first)
    assert explicit.target.kv.reads - reads == 1  # the copy put aside, and no other
    tokens += [t for step in steps for t in step.tokens]
    assert tokens == answer(cold, edited, method)
    assert explicit.cache.aside  # the old version
    back = explicit.decode(old, method=method, max_new_tokens=24, stop_ids=set())
    tokens = list(next(back).tokens)
    # All of it but the last answer's last token (never processed: it ended the answer).
    assert explicit.last_prefill is not None and explicit.last_prefill.reused == len(old) - 1
    tokens += [t for step in back for t in step.tokens]
    assert tokens == answer(cold, old, method)


@pytest.mark.parametrize("method", [DecodingMethod.plain(), DecodingMethod.mtp(2)], ids=str)
@pytest.mark.parametrize("enough_hidden", [True, False], ids=["left-out", "masked"])
def test_a_follow_up_leaves_the_hidden_entries_out_of_its_call_once_they_are_many(
    decoders: dict[str, AppDecoder],
    method: DecodingMethod,
    enough_hidden: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A regenerated answer leaves the first answer's entries hidden in the request's caches.
    The follow-up after it reads the caches out for the continuation graph anyway, so once
    the hidden entries are enough of them it leaves them out (a gather of the live ones): the
    call does not attend to them and the caches come back without them. Fewer stay masked.
    Either way the answer equals a cold prefill's."""
    for decoder in decoders.values():
        decoder.drop_states()
    explicit, cold = decoders["explicit"], decoders["cold"]
    prompt = words(50, 100)
    first = answer(explicit, prompt, method)
    assert answer(explicit, prompt, method) == first  # regenerated: the same answer
    kv = explicit.target.kv
    hidden = kv.hidden
    # The first answer's entries (its last token was never processed), and any of rejected
    # drafts: a share the rule counts as many.
    assert hidden >= len(first) - 1 and hidden >= kv_slots.CALL_COMPACT_SHARE * kv.size
    if enough_hidden:  # 256 in the app; the demo conversations are short (and the fixture
        # sends even the regenerate's verifications to the graph: patched only from here)
        monkeypatch.setattr(kv_slots, "CALL_COMPACT_MIN_HIDDEN", 8)
    follow_up = prompt + first + words(51, 60)
    reads = kv.reads
    steps = explicit.decode(follow_up, method=method, max_new_tokens=24, stop_ids=set())
    tokens = list(next(steps).tokens)  # the prefill ran
    assert explicit.last_prefill is not None and explicit.last_prefill.reused >= len(prompt)
    assert kv.reads - reads == 1
    assert kv.hidden == (0 if enough_hidden else hidden)
    assert kv.size == kv.live + kv.hidden
    tokens += [t for step in steps for t in step.tokens]
    assert tokens == answer(cold, follow_up, method)


def test_logits_after_a_continuation_equal_a_cold_prefill(
    decoders: dict[str, AppDecoder],
) -> None:
    for decoder in decoders.values():
        decoder.drop_states()
    head = words(10, 300)
    tail = words(11, 120)
    explicit, cold = decoders["explicit"], decoders["cold"]
    explicit.logits_after(head)
    calls = explicit.target.continuation.calls  # type: ignore[union-attr]
    continued = explicit.logits_after(head + tail)
    assert explicit.target.continuation.calls == calls + 1  # type: ignore[union-attr]
    reference = cold.logits_after(head + tail)
    np.testing.assert_allclose(continued, reference, atol=2e-4, rtol=0)
    # The caches written back hold every position: the next token's logits agree as well.
    np.testing.assert_allclose(
        explicit.logits_after(head + tail + [500]),
        cold.logits_after(head + tail + [500]),
        atol=2e-4,
        rtol=0,
    )


def test_short_calls_and_a_first_prefill_stay_on_the_stateful_request(demo_model: Path) -> None:
    decoder = AppDecoder(demo_model, "CPU", EXACT_NUMERICS)
    graph = decoder.target.continuation
    assert graph is not None
    decoder.logits_after(words(20, 900))  # nothing kept yet: a cold prefill
    decoder.logits_after(words(20, 900) + words(21, graph.min_new_tokens - 1))
    assert graph.calls == 0 and graph.compile_s is None  # never even compiled
    decoder.logits_after(words(20, 900) + words(22, graph.min_new_tokens + 10))
    assert graph.calls == 1 and graph.compile_s is not None


@pytest.mark.parametrize("short_first", [True, False], ids=["short-then-long", "long-then-short"])
def test_each_part_of_a_split_prefill_takes_the_path_its_own_length_pays_for(
    demo_model: Path, short_first: bool
) -> None:
    """The engine prefills up to the template's stable prefix, then the rest. Only the long
    part takes the continuation graph: a call there copies the whole kept cache out and back,
    which a few tokens (the ones that open the answer) never pay for. The answer is a cold
    prefill's either way."""
    decoder = AppDecoder(demo_model, "CPU", EXACT_NUMERICS)
    cold = AppDecoder(demo_model, "CPU", EXACT_NUMERICS, continuation=False)
    graph = decoder.target.continuation
    assert graph is not None
    kept = words(30, 700)
    decoder.logits_after(kept)
    short, long = words(31, 5), words(32, 60)
    first, second = (short, long) if short_first else (long, short)
    prompt = kept + first + second
    calls, kept_entries = graph.calls, decoder.target.kv.live
    plain = DecodingMethod.plain()
    split = answer(decoder, prompt, plain, stable_prefix=len(kept) + len(first))
    assert split == answer(cold, prompt, plain)
    assert graph.calls == calls + 1  # the long part only
    assert decoder.last_prefill is not None and decoder.last_prefill.reused >= kept_entries - 8


@pytest.mark.parametrize("ir", ["openvino_language_model", "openvino_mtp_model"])
def test_the_continuation_graphs_attend_to_grouped_heads_without_repeating_them(
    demo_model: Path, ir: str
) -> None:
    """The export repeats each shared KV head over its query heads with a Broadcast, which
    the CPU plugin runs over the whole cache when the cache is an input; the continuation
    graphs attend to the shared heads directly (the equality tests above run on them)."""
    import openvino as ov

    from qwen_mtp_desktop.core.decoding.graphs import make_kv_explicit, transform_target

    model = ov.Core().read_model(demo_model / f"{ir}.xml")
    if ir == "openvino_language_model":
        transform_target(model)

    def attentions() -> list[ov.Node]:
        return [
            n for n in model.get_ordered_ops() if n.get_type_name() == "ScaledDotProductAttention"
        ]

    def repeated(node: ov.Node) -> bool:
        source = node.input_value(1).get_node()
        return source.get_type_name() == "Reshape" and (
            source.input_value(0).get_node().get_type_name() == "Broadcast"
        )

    assert attentions() and all(repeated(n) for n in attentions())  # as exported
    make_kv_explicit(model)
    assert attentions() and not any(repeated(n) for n in attentions())
    # [batch, kv heads, group, queries, head size]: 4 query heads share 2 KV heads
    shapes = {str(n.get_output_partial_shape(0)) for n in attentions()}
    assert shapes == {"[?,2,2,?,32]"}, shapes


@pytest.mark.parametrize("ir", ["openvino_language_model", "openvino_mtp_model"])
def test_exposed_states_are_read_without_a_beam_reorder(demo_model: Path, ir: str) -> None:
    """The export reorders each state by `beam_idx` (a Gather over the whole state); the app
    runs one sequence, so a state it exposes as a port (the target's Gated DeltaNet states,
    the continuation graphs' caches) feeds its readers directly (the equality tests above run
    on these graphs)."""
    import openvino as ov

    from qwen_mtp_desktop.core.decoding.graphs import KV_IN, make_kv_explicit, transform_target

    model = ov.Core().read_model(demo_model / f"{ir}.xml")

    def beam_gathers() -> int:
        return sum(
            1
            for n in model.get_ordered_ops()
            if n.get_type_name() == "Gather"
            and "beam_idx" in n.input_value(1).get_node().output(0).get_names()
        )

    exported = beam_gathers()
    states = transform_target(model).states if ir == "openvino_language_model" else ()
    names = make_kv_explicit(model)
    assert names and exported == len(states) + len(names)  # one reorder per state
    assert bool(states) == (ir == "openvino_language_model")
    assert beam_gathers() == 0
    for param in model.get_parameters():
        if param.get_friendly_name().startswith(KV_IN):
            readers = {i.get_node().get_type_name() for i in param.output(0).get_target_inputs()}
            assert "Gather" not in readers, readers
