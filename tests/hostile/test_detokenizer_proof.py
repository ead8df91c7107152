"""Class 6: the fast byte table is used only when it decodes every id like the runtime.

Hypothesis mutates the demo model's tokenizer.json (swaps two tokens, rewrites a piece,
rewrites a partial-character byte token, flips an added token's `special` flag or content,
adds ids past the vocabulary) and builds the byte table from it. The proof against the real
runtime detokenizer (openvino-tokenizers, from the untouched IR) must pass exactly when the
table still gives every id its runtime bytes. Then the engine: a model with a doctored
tokenizer.json streams the runtime's text, and the proof's load-time cost is measured.
"""

from __future__ import annotations

import copy
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reliability import figures

EXAMPLES = 200
_counts = {"tried": 0, "refused": 0}


@pytest.fixture(scope="module")
def runtime(demo_model: Path) -> Any:
    import openvino_genai

    return openvino_genai.Tokenizer(str(demo_model))


@pytest.fixture(scope="module")
def original(demo_model: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((demo_model / "tokenizer.json").read_text("utf-8"))
    return data


@st.composite
def mutation(draw: st.DrawFn, size: int, added: int) -> tuple[str, int, int]:
    kind = draw(st.sampled_from(["none", "swap", "rewrite", "byte", "special", "content", "extra"]))
    first = draw(st.integers(min_value=0, max_value=size - 1))
    second = draw(st.integers(min_value=0, max_value=size - 1))
    if kind in ("special", "content"):
        first = draw(st.integers(min_value=0, max_value=added - 1))
    return kind, first, second


def _mutate(data: dict[str, Any], kind: str, first: int, second: int) -> dict[str, Any]:
    out = copy.deepcopy(data)
    vocab: dict[str, int] = out["model"]["vocab"]
    by_id = {v: k for k, v in vocab.items()}
    if kind == "swap" and first in by_id and second in by_id:
        vocab[by_id[first]], vocab[by_id[second]] = second, first
    elif kind == "rewrite" and first in by_id and second in by_id and first != second:
        del vocab[by_id[first]]
        vocab[by_id[second] + by_id[second]] = first  # a longer, different piece for the id
    elif kind == "byte":  # the bytes 0x80-0xBF: partial characters, U+FFFD alone
        pieces = [p for p in vocab if len(p) == 1 and 0x80 <= _byte(p) <= 0xBF]
        a, b = pieces[first % len(pieces)], pieces[second % len(pieces)]
        vocab[a], vocab[b] = vocab[b], vocab[a]
    elif kind == "special":
        token = out["added_tokens"][first]
        token["special"] = not token["special"]
    elif kind == "content":
        out["added_tokens"][first]["content"] += "x"
    elif kind == "extra":
        vocab["Ġhello" + str(first)] = len(vocab) + len(out["added_tokens"]) + second
    return out


def _byte(piece: str) -> int:
    from qwen_mtp_desktop.core.decoding.text import _byte_level_alphabet

    return _byte_level_alphabet()[piece]


class TestFastDetokenizerProven:
    @pytest.mark.slow  # the whole demo vocabulary, generated (~6 s)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def test_proof_passes_exactly_when_every_id_agrees(
        self, data: st.DataObject, runtime: Any, original: dict[str, Any], demo_model: Path
    ) -> None:
        from qwen_mtp_desktop.core.decoding.text import ByteLevelVocab
        from qwen_mtp_desktop.core.prompt.guards import emitted_vocab_size
        from qwen_mtp_desktop.core.prompt.vocab_proof import prove

        size = len(original["model"]["vocab"])
        kind, first, second = data.draw(mutation(size, len(original["added_tokens"])))
        _counts["tried"] += 1
        mutated = _mutate(original, kind, first, second)
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "tokenizer.json"
            path.write_text(json.dumps(mutated), encoding="utf-8")
            table = ByteLevelVocab.from_tokenizer_json(path)
        truth = ByteLevelVocab.from_tokenizer_json(demo_model / "tokenizer.json")
        assert table is not None and truth is not None
        emit = emitted_vocab_size(demo_model)
        limit = max(len(table), len(truth), emit)
        same = all(table.decode_bytes([i]) == truth.decode_bytes([i]) for i in range(limit))
        result = prove(table, lambda batch: [str(t) for t in runtime.decode(batch)], emit)
        if not result.ok:
            _counts["refused"] += 1
        assert result.ok == same, (kind, first, second, result.mismatches)
        assert result.checked_ids >= emit

    @pytest.mark.model
    def test_doctored_model_streams_the_runtimes_text(self, demo_copy: Path) -> None:
        from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message

        data = json.loads((demo_copy / "tokenizer.json").read_text("utf-8"))
        vocab = data["model"]["vocab"]
        # Two tokens that no sample text uses: a sampled check would not notice the swap.
        a, b = sorted(vocab, key=vocab.__getitem__)[-2:]
        vocab[a], vocab[b] = vocab[b], vocab[a]
        (demo_copy / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
        engine = Engine()
        engine.load(demo_copy, LoadOptions(mtp=False))
        try:
            assert engine._vocab is None  # the runtime's detokenizer is used
            generation = engine.generate(
                [Message("user", "Count from 1 to 20.")], GenerationSettings(max_new_tokens=24)
            )
            generation.run_to_end()
            assert generation.answer or generation.reasoning
        finally:
            engine.unload()

    def test_load_time_cost(self, demo_model: Path, runtime: Any, tmp_path: Path) -> None:
        from qwen_mtp_desktop.core.decoding.text import ByteLevelVocab
        from qwen_mtp_desktop.core.prompt.guards import emitted_vocab_size
        from qwen_mtp_desktop.core.prompt.vocab_proof import cached_prove, prove
        from qwen_mtp_desktop.core.system.environment import package_version

        table = ByteLevelVocab.from_tokenizer_json(demo_model / "tokenizer.json")
        assert table is not None
        version = package_version("openvino-tokenizers") or "?"

        def run() -> Any:
            return prove(
                table,
                lambda batch: [str(t) for t in runtime.decode(batch)],
                emitted_vocab_size(demo_model),
            )

        started = time.perf_counter()
        first = cached_prove(demo_model, tmp_path, version, run)
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        again = cached_prove(demo_model, tmp_path, version, run)
        again_s = time.perf_counter() - started
        assert first.ok and again.ok and again.cached and not first.cached
        assert first.context_checks > 0  # the partial-character tokens were pinned too
        figures.record(
            "hostile",
            detok_inputs=_counts["tried"],
            detok_refused=_counts["refused"],
            detok_ids_checked=first.checked_ids,
            detok_context_checks=first.context_checks,
            detok_proof_ms=round(first_s * 1000, 1),
            detok_cached_ms=round(again_s * 1000, 1),
        )
