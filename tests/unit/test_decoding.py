from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.stats import build_stats, speculative_stats
from qwen_mtp_desktop.core.decoding.text import (
    ByteLevelVocab,
    ByteStreamDecoder,
    IncrementalDecoder,
    StopStringFilter,
    ThinkingSplitter,
    vocab_agrees,
)


# A toy byte-level "tokenizer": each id is one byte, so multi-byte characters span ids.
def _decode(ids: list[int]) -> str:
    return bytes(ids).decode("utf-8", errors="replace")


def _stream(
    decoder: IncrementalDecoder | ByteStreamDecoder, ids: list[int], cuts: list[int]
) -> list[str]:
    """The decoder's text pieces for `ids` pushed in steps of the sizes in `cuts` (cycled),
    ending with its flush."""
    out, position, index = [], 0, 0
    while position < len(ids):
        size = cuts[index % len(cuts)]
        out.append(decoder.push(ids[position : position + size]))
        position += size
        index += 1
    out.append(decoder.flush())
    return out


@given(st.text(max_size=60), st.lists(st.integers(1, 5), min_size=1, max_size=60))
def test_incremental_decoder_reassembles_any_split(text: str, cuts: list[int]) -> None:
    out = _stream(IncrementalDecoder(_decode), list(text.encode("utf-8")), cuts)
    assert "".join(out) == text
    # Only a character that really is broken shows as U+FFFD.
    assert all("\ufffd" not in piece for piece in out[:-1]) or "\ufffd" in text


def test_incremental_decoder_holds_incomplete_character() -> None:
    decoder = IncrementalDecoder(_decode)
    euro = list("€".encode())
    assert decoder.push(euro[:1]) == ""
    assert decoder.push(euro[1:2]) == ""
    assert decoder.push(euro[2:]) == "€"


def test_thinking_splitter_routes_sections() -> None:
    start, end = 100, 101
    splitter = ThinkingSplitter(start, end, thinking=True)
    assert splitter.split([1, 2, end, 3]) == ([1, 2], [3])
    assert splitter.split([4, 5]) == ([], [4, 5])
    assert splitter.reasoning_tokens == 3  # two thoughts + the closing marker
    assert splitter.answer_tokens == 3


def test_thinking_splitter_without_thinking_and_self_opened() -> None:
    splitter = ThinkingSplitter(100, 101, thinking=False)
    assert splitter.split([7, 8]) == ([], [7, 8])
    # A model may open a think block by itself.
    assert splitter.split([100, 9, 101, 10]) == ([9], [10])


def test_speculative_stats_from_chunk_sizes() -> None:
    # prefill token, then steps with n=3: accepted 0, 3, 1, 2
    drafted, accepted, by_position = speculative_stats([1, 1, 4, 2, 3], 3, "mtp")
    assert drafted == 12
    assert accepted == 6
    assert by_position == [0.75, 0.5, 0.25]
    assert speculative_stats([1, 1, 1], 2, "baseline") == (0, 0, [])


def test_speculative_stats_near_the_token_budget() -> None:
    # n=1, budget 6: after 5 tokens only 1 is left, so the last step drafts nothing.
    drafted, accepted, by_position = speculative_stats([1, 2, 2, 1], 1, "mtp", max_new_tokens=6)
    assert (drafted, accepted) == (2, 2)
    assert by_position == [1.0]
    # n=3, budget 7: the second step may draft only min(3, 7 - 5 - 1) = 1.
    drafted, accepted, by_position = speculative_stats([1, 4, 2], 3, "mtp", max_new_tokens=7)
    assert (drafted, accepted) == (4, 4)
    assert by_position == [1.0, 1.0, 1.0]


def test_build_stats_is_consistent() -> None:
    stats = build_stats(
        mode="mtp",
        num_assistant_tokens=1,
        device="CPU",
        prompt_tokens=12,
        chunk_sizes=[1, 2, 2, 1, 2],
        chunk_times=[0.5, 0.6, 0.7, 0.8, 0.9],
        total_s=0.95,
        reasoning_tokens=0,
        answer_tokens=8,
        finish_reason="eos",
    )
    assert stats.generated_tokens == 8
    assert stats.ttft_s == 0.5
    assert stats.decode_tokens_per_s == pytest.approx(7 / 0.4)
    assert (stats.drafted_tokens, stats.accepted_tokens) == (4, 3)
    assert stats.acceptance_rate == 0.75
    assert stats.mean_accepted_per_step == 0.75
    assert stats.generated_tokens == stats.steps + stats.accepted_tokens
    assert stats.to_json_dict()["chunk_sizes"] == [1, 2, 2, 1, 2]


def test_build_stats_empty_generation() -> None:
    stats = build_stats(
        mode="baseline",
        num_assistant_tokens=1,
        device="CPU",
        prompt_tokens=3,
        chunk_sizes=[],
        chunk_times=[],
        total_s=0.1,
        reasoning_tokens=0,
        answer_tokens=0,
        finish_reason="cancelled",
    )
    assert stats.generated_tokens == 0 and stats.decode_tokens_per_s == 0.0
    assert stats.num_assistant_tokens == 0


# --- ByteLevelVocab: Qwen's byte-level BPE decoded in Python ------------------------------------


def _byte_level_json(tmp_path: Path) -> Path:
    """A real tokenizers BPE with a ByteLevel decoder, trained on text with multi-byte chars."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    corpus = ["Grüße aus Köln, 1 2 3 €", "你好世界 hello world", "count from 1 to 20"] * 20
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.add_tokens(["<think>"])  # an added token that is not special
    path = tmp_path / "tokenizer.json"
    tokenizer.save(str(path))
    return path


@given(text=st.text(max_size=40), cuts=st.lists(st.integers(1, 4), min_size=1, max_size=20))
def test_byte_level_vocab_decodes_like_tokenizers(
    text: str, cuts: list[int], tmp_path_factory: pytest.TempPathFactory
) -> None:
    from tokenizers import Tokenizer

    path = _byte_level_json(tmp_path_factory.mktemp("tok"))
    reference = Tokenizer.from_file(str(path))
    vocab = ByteLevelVocab.from_tokenizer_json(path)
    assert vocab is not None
    ids = reference.encode(text + "<think><|im_end|>").ids
    assert vocab.decode(ids) == reference.decode(ids, skip_special_tokens=True)
    # Streamed in arbitrary step sizes, the pieces add up to the same text.
    pieces = _stream(ByteStreamDecoder(vocab), ids, cuts)
    assert "".join(pieces) == text + "<think>"
    assert all("\ufffd" not in piece for piece in pieces) or "\ufffd" in text


def test_byte_level_vocab_rejects_other_tokenizers(tmp_path: Path) -> None:
    assert ByteLevelVocab.from_tokenizer_json(tmp_path / "missing.json") is None
    (tmp_path / "bad.json").write_text("{not json")
    assert ByteLevelVocab.from_tokenizer_json(tmp_path / "bad.json") is None
    wordpiece = {"model": {"type": "WordPiece", "vocab": {"a": 0}}, "decoder": None}
    (tmp_path / "wp.json").write_text(json.dumps(wordpiece))
    assert ByteLevelVocab.from_tokenizer_json(tmp_path / "wp.json") is None


def test_vocab_agrees_catches_a_differing_detokenizer(tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    path = _byte_level_json(tmp_path)
    reference = Tokenizer.from_file(str(path))
    vocab = ByteLevelVocab.from_tokenizer_json(path)
    assert vocab is not None
    samples = [reference.encode("Grüße 你好 count 12").ids]
    assert vocab_agrees(vocab, lambda ids: reference.decode(ids), samples)
    # A detokenizer that, say, strips a leading space is told apart.
    assert not vocab_agrees(vocab, lambda ids: reference.decode(ids).strip(), samples)
    assert not vocab_agrees(vocab, lambda ids: reference.decode(ids).upper(), samples)


# --- stop strings (the fast decoder applies them itself) ------------------------------------

_PIECES = ["1", " 2", " 7", "3 ", "4", "\n", "ab", "c", " ", "7", "é", "zz"]


def _pieces(ids: Sequence[int]) -> str:
    return "".join(_PIECES[i] for i in ids)


@given(
    ids=st.lists(st.integers(0, len(_PIECES) - 1), max_size=40),
    chunks=st.lists(st.integers(1, 4), min_size=1, max_size=40),
    stops=st.lists(st.sampled_from([" 7", "3 4", "\n", "zzz", "ab c", "7"]), max_size=2),
)
def test_stop_string_filter_streams_the_text_up_to_the_first_stop(
    ids: list[int], chunks: list[int], stops: list[str]
) -> None:
    filt = StopStringFilter(_pieces, stops)
    emitted: list[int] = []
    stopped = False
    position = 0
    for size in chunks * 40:
        if position >= len(ids):
            break
        ready, stopped = filt.push(ids[position : position + size])
        position += size
        emitted += ready
        # Nothing shown can be taken back: the shown text never holds a stop string.
        assert not any(s in _pieces(emitted) for s in stops)
        if stopped:
            break
    if not stopped:
        emitted += filt.flush()
    full = _pieces(ids[:position])
    hits = [full.find(s) for s in stops if s in full]
    text = _pieces(emitted)
    assert emitted == ids[: len(emitted)]
    if hits:
        assert stopped
        # Every token that ends before the stop string begins is kept, none after it.
        kept = [n for n in range(len(ids) + 1) if len(_pieces(ids[:n])) <= min(hits)]
        assert len(emitted) == max(kept)
    else:
        assert not stopped and text == full


def test_stop_string_filter_without_stops_passes_ids_through() -> None:
    calls: list[Sequence[int]] = []
    filt = StopStringFilter(lambda ids: calls.append(ids) or "", [])
    assert filt.push([1, 2, 3]) == ([1, 2, 3], False)
    assert calls == []
