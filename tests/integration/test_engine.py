"""The engine on the real runtime with real models."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from qwen_mtp_desktop.core import engine as engine_module
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod, Sampling
from qwen_mtp_desktop.core.engine import (
    Engine,
    EngineError,
    GenerationSettings,
    LoadOptions,
    Message,
)
from qwen_mtp_desktop.core.engine import runtime as engine_runtime

COUNTING = [Message("user", "Count from 1 to 30.")]


def _run(engine: Engine, messages: list[Message], **settings: object) -> tuple[list[int], object]:
    generation = engine.generate(messages, GenerationSettings(**settings))  # type: ignore[arg-type]
    stats = generation.run_to_end()
    return generation.token_ids, stats


@pytest.fixture(scope="module")
def exact_engines(demo_model: Path) -> dict[str, Engine]:
    engines = {}
    for mode in ("mtp", "plain"):
        engine = Engine()
        engine.load(demo_model, LoadOptions(mtp=mode == "mtp", exact_numerics=True))
        engines[mode] = engine
    yield engines
    for engine in engines.values():
        engine.unload()


@pytest.mark.model
@pytest.mark.parametrize("n", [1, 2, 3])
def test_demo_mtp_output_equals_baseline(exact_engines: dict[str, Engine], n: int) -> None:
    baseline_ids, _ = _run(exact_engines["plain"], COUNTING, max_new_tokens=80)
    method = DecodingMethod.mtp(n)
    mtp_ids, stats = _run(exact_engines["mtp"], COUNTING, max_new_tokens=80, method=method)
    assert mtp_ids == baseline_ids
    assert stats.method == method
    assert stats.accepted_tokens > 0


@pytest.mark.export
@pytest.mark.parametrize("n", [1, 2, 3])
def test_moe_mtp_output_equals_baseline(moe_model: Path, n: int) -> None:
    outputs = {}
    for mode in ("plain", "mtp"):
        engine = Engine()
        engine.load(moe_model, LoadOptions(mtp=mode == "mtp", exact_numerics=True))
        outputs[mode], _ = _run(engine, COUNTING, max_new_tokens=40, method=DecodingMethod.mtp(n))
        engine.unload()
    assert outputs["mtp"] == outputs["plain"]
    assert len(outputs["mtp"]) > 0


@pytest.mark.model
def test_demo_acceptance_and_consistent_stats(exact_engines: dict[str, Engine]) -> None:
    generation = exact_engines["mtp"].generate(COUNTING, GenerationSettings(max_new_tokens=120))
    chunks = list(generation)
    stats = generation.stats
    assert stats is not None
    assert stats.acceptance_rate >= 0.6, stats
    assert stats.accepted_tokens <= stats.drafted_tokens
    assert (
        stats.generated_tokens == sum(len(c.token_ids) for c in chunks) == len(generation.token_ids)
    )
    # Every step yields one target token plus its accepted drafts.
    assert stats.generated_tokens == stats.steps + stats.accepted_tokens
    assert stats.steps == len(chunks)  # one chunk per step, and no empty chunks
    assert all(c.token_ids for c in chunks)
    assert stats.reasoning_tokens + stats.answer_tokens == stats.generated_tokens
    assert stats.ttft_s > 0 and stats.decode_tokens_per_s > 0 and stats.total_s >= stats.ttft_s
    assert stats.prompt_tokens > 5
    # The demo model counts.
    assert generation.answer.split()[:5] == ["1", "2", "3", "4", "5"]
    assert json.loads(json.dumps(stats.to_json_dict()))["acceptance_rate"] == stats.acceptance_rate


@pytest.mark.model
def test_acceptance_matches_continuous_batching_metric(
    exact_engines: dict[str, Engine], demo_model: Path
) -> None:
    import openvino_genai

    engine = exact_engines["mtp"]
    prompt = engine.render_prompt(COUNTING)
    stats = engine.generate_raw(prompt, GenerationSettings(max_new_tokens=60)).run_to_end()

    scheduler = openvino_genai.SchedulerConfig()
    scheduler.enable_prefix_caching = False
    draft = openvino_genai.draft_model(
        str(demo_model), "CPU", mtp_mode=True, **engine_module.EXACT_NUMERICS
    )
    pipeline = openvino_genai.ContinuousBatchingPipeline(
        str(demo_model), scheduler, "CPU", {"draft_model": draft, **engine_module.EXACT_NUMERICS}
    )
    config = openvino_genai.GenerationConfig()
    config.max_new_tokens = 60
    config.num_assistant_tokens = 1
    config.apply_chat_template = False
    tokenizer = openvino_genai.Tokenizer(str(demo_model))
    config.eos_token_id = tokenizer.get_eos_token_id()
    result = pipeline.generate([prompt], [config])[0]
    reference = result.extended_perf_metrics.get_draft_acceptance_rate()
    assert stats.acceptance_rate == pytest.approx(reference, abs=0.02)


@pytest.mark.model
def test_cancel_keeps_partial_answer(demo_model: Path) -> None:
    engine = Engine()
    engine.load(demo_model)
    generation = engine.generate(COUNTING, GenerationSettings(max_new_tokens=400))
    for seen, _chunk in enumerate(generation, start=1):
        if seen == 5:
            generation.cancel()
            steps_at_cancel = len(generation.token_ids)
    stats = generation.stats
    assert stats is not None and stats.finish_reason == "cancelled"
    # It stopped within one decoding step of the request.
    assert stats.steps <= 6
    assert len(generation.token_ids) >= steps_at_cancel
    assert generation.answer.strip() != ""
    # The engine is free again.
    assert engine.generate(COUNTING, GenerationSettings(max_new_tokens=5)).run_to_end()
    engine.unload()


@pytest.mark.model
def test_cancel_from_another_thread(demo_model: Path) -> None:
    engine = Engine()
    engine.load(demo_model)
    generation = engine.generate(COUNTING, GenerationSettings(max_new_tokens=400))
    first = next(generation)
    timer = threading.Timer(0.05, generation.cancel)
    timer.start()
    stats = generation.run_to_end()
    timer.join()
    assert first.token_ids
    assert stats.finish_reason in ("cancelled", "eos")
    engine.unload()


@pytest.mark.model
def test_busy_engine_refuses_second_generation(demo_model: Path) -> None:
    engine = Engine()
    engine.load(demo_model)
    generation = engine.generate(COUNTING, GenerationSettings(max_new_tokens=200))
    with pytest.raises(EngineError) as info:
        engine.generate(COUNTING)
    assert info.value.code == "BUSY"
    generation.close()
    engine.unload()


@pytest.mark.model
def test_thinking_is_split_from_answer(demo_model: Path) -> None:
    engine = Engine()
    engine.load(demo_model)
    assert engine.render_prompt(COUNTING, thinking=False).endswith("<think>\n\n</think>\n\n")
    assert engine.render_prompt(COUNTING, thinking=True).endswith("<think>\n")
    generation = engine.generate(COUNTING, GenerationSettings(max_new_tokens=60, thinking=True))
    stats = generation.run_to_end()
    assert stats.reasoning_tokens + stats.answer_tokens == stats.generated_tokens
    assert "<think>" not in generation.answer and "</think>" not in generation.answer
    engine.unload()


@pytest.mark.model
def test_settings_are_validated(demo_model: Path) -> None:
    engine = Engine()
    engine.load(demo_model)
    for bad, says in (
        (GenerationSettings(max_new_tokens=0), "at least 1"),
        (GenerationSettings(method=DecodingMethod.mtp(0)), "MTP needs 1 to"),
        (GenerationSettings(method=DecodingMethod.plain(Sampling(top_p=1.5))), "top-p is 1.5"),
        (GenerationSettings(method=DecodingMethod.lookup(4, 0)), "n-gram size"),
        (GenerationSettings(replay_lookup=DecodingMethod.mtp(1)), "lookup replay"),
    ):
        with pytest.raises(EngineError) as info:
            engine.generate(COUNTING, bad)
        assert info.value.code == "BAD_SETTINGS" and says in info.value.message
    with pytest.raises(EngineError) as info:
        engine.generate([Message("assistant", "hi")])
    assert info.value.code == "BAD_CONVERSATION"
    engine.unload()


@pytest.mark.model
def test_sampling_with_seed_is_reproducible_in_baseline_mode(demo_model: Path) -> None:
    engine = Engine()
    engine.load(demo_model, LoadOptions(mtp=False))
    sampled = DecodingMethod.plain(Sampling(temperature=0.8, seed=7))
    first, stats = _run(engine, COUNTING, max_new_tokens=30, method=sampled)
    second, _ = _run(engine, COUNTING, max_new_tokens=30, method=sampled)
    assert first == second and stats.method == sampled  # the stats keep the sampling
    # Every sampling value reaches openvino-genai's sampler (top-k 0 keeps every token).
    for sampling in (
        Sampling(temperature=0.8, top_k=0, seed=7),
        Sampling(temperature=0.8, top_p=0.5, top_k=3, min_p=0.1, seed=7),
        Sampling(temperature=0.8, presence_penalty=1.0, frequency_penalty=0.5, seed=7),
    ):
        ids, _ = _run(engine, COUNTING, max_new_tokens=12, method=DecodingMethod.plain(sampling))
        assert ids
    engine.unload()


@pytest.mark.model
def test_sampling_with_mtp_and_lookup_on_the_apps_decoder(demo_model: Path) -> None:
    """Every drafting method samples (exact speculative sampling); a seed reproduces, no seed
    means a fresh one per answer, reported in the stats."""
    engine = Engine()
    engine.load(demo_model)
    story = [Message("user", "Write a poem about the sea")]
    for method in (DecodingMethod.mtp(2), DecodingMethod.lookup(4, 3), DecodingMethod.plain()):
        seeded = method.with_sampling(Sampling(temperature=1.2, top_k=40, seed=11))
        first = engine.generate(story, GenerationSettings(max_new_tokens=16, method=seeded))
        stats = first.run_to_end()
        again = engine.generate(story, GenerationSettings(max_new_tokens=16, method=seeded))
        again.run_to_end()
        assert first.token_ids == again.token_ids, method
        assert stats.method.sampling.seed == 11 and stats.decoder == "app"
        assert stats.method.kind == method.kind
        unseeded = method.with_sampling(Sampling(temperature=1.2, top_k=40))
        seeds, answers = set(), set()
        # The demo model is sure of itself: 4 plain answers of 16 tokens were all equal in 2 of
        # 40 trials (a flaky test); 8 answers of 24 tokens were never all equal in 40.
        for _ in range(8):
            turn = engine.generate(story, GenerationSettings(max_new_tokens=24, method=unseeded))
            seeds.add(turn.run_to_end().method.sampling.seed)
            answers.add(tuple(turn.token_ids))
        assert None not in seeds and len(seeds) == 8 and len(answers) >= 2, method
    engine.unload()


@pytest.mark.model
def test_sampling_with_mtp_is_refused_where_only_openvino_genai_runs(demo_model: Path) -> None:
    engine = Engine()
    engine.load(demo_model, LoadOptions(app_decoder=False))
    sampled = Sampling(temperature=0.8)
    with pytest.raises(EngineError) as info:
        engine.generate(COUNTING, GenerationSettings(method=DecodingMethod.mtp(1, sampled)))
    assert info.value.code == "MTP_NEEDS_GREEDY" and "temperature" in info.value.fix
    with pytest.raises(EngineError) as info:
        engine.generate(COUNTING, GenerationSettings(method=DecodingMethod.lookup(4, 3, sampled)))
    assert info.value.code == "LOOKUP_NEEDS_GREEDY"
    # Plain sampling there gets a fresh seed (openvino-genai's default seed is fixed).
    plain = GenerationSettings(max_new_tokens=8, method=DecodingMethod.plain(sampled))
    seeds = {engine.generate(COUNTING, plain).run_to_end().method.sampling.seed for _ in range(3)}
    assert None not in seeds and len(seeds) == 3
    # The engine is still usable.
    assert engine.generate(COUNTING, GenerationSettings(max_new_tokens=5)).run_to_end()
    engine.unload()


@pytest.mark.model
def test_stop_string(demo_model: Path) -> None:
    engine = Engine()
    engine.load(demo_model)
    generation = engine.generate(
        COUNTING, GenerationSettings(max_new_tokens=100, stop_strings=(" 7",))
    )
    stats = generation.run_to_end()
    assert stats.finish_reason == "stop_string"
    assert generation.answer.split()[-1] in ("6", "7") and "8" not in generation.answer.split()
    engine.unload()


@pytest.mark.model
def test_compile_cache(demo_model: Path, tmp_path: Path) -> None:
    cache = tmp_path / "ov-cache"
    first = Engine().load(demo_model, LoadOptions(cache_dir=cache))
    assert any(cache.iterdir()), "OpenVINO wrote nothing to the compile cache"
    second_engine = Engine()
    second = second_engine.load(demo_model, LoadOptions(cache_dir=cache))
    assert second.load_s > 0 and first.load_s > 0
    second_engine.unload()


@pytest.mark.model
def test_image_turn_in_both_modes(demo_model: Path, tmp_path: Path) -> None:
    from PIL import Image

    image = tmp_path / "red square.png"
    Image.new("RGB", (64, 64), (200, 30, 30)).save(image)
    messages = [Message("user", "Count from 1 to 5.", image=image)]
    outputs = {}
    for mode in ("plain", "mtp"):
        engine = Engine()
        engine.load(demo_model, LoadOptions(mtp=mode == "mtp", exact_numerics=True))
        generation = engine.generate(messages, GenerationSettings(max_new_tokens=20))
        generation.run_to_end()
        outputs[mode] = generation.token_ids
        engine.unload()
    assert outputs["mtp"] == outputs["plain"] and outputs["mtp"]


@pytest.mark.model
def test_unreadable_image_is_a_clear_error(demo_model: Path, tmp_path: Path) -> None:
    bad = tmp_path / "not an image.png"
    bad.write_text("hello")
    engine = Engine()
    engine.load(demo_model)
    with pytest.raises(EngineError) as info:
        engine.generate([Message("user", "hi", image=bad)])
    assert info.value.code == "IMAGE" and "not an image.png" in info.value.message
    engine.unload()


# --- faults -------------------------------------------------------------------------------


def _load_error(path: Path) -> EngineError:
    with pytest.raises(EngineError) as info:
        Engine().load(path)
    error = info.value
    assert error.message and error.fix, "every error needs a message and a fix"
    assert "Traceback" not in str(error)
    return error


@pytest.mark.model
def test_model_without_mtp_head_loads_baseline_with_warning(demo_copy: Path) -> None:
    (demo_copy / "openvino_mtp_model.xml").unlink()
    (demo_copy / "openvino_mtp_model.bin").unlink()
    engine = Engine()
    loaded = engine.load(demo_copy)
    assert not loaded.mtp
    assert any("no MTP head" in warning for warning in loaded.warnings)
    # An MTP method on a model without its head decodes plain, and the stats say so.
    stats = engine.generate(COUNTING, GenerationSettings(max_new_tokens=10)).run_to_end()
    assert stats.method == PLAIN and any("no MTP head" in w for w in stats.warnings)
    engine.unload()


@pytest.mark.model
def test_truncated_bin(demo_copy: Path) -> None:
    path = demo_copy / "openvino_language_model.bin"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    error = _load_error(demo_copy)
    assert error.code == "IR_CORRUPT" and "truncated" in error.message


@pytest.mark.model
def test_garbage_xml(demo_copy: Path) -> None:
    (demo_copy / "openvino_language_model.xml").write_text("this is not xml <<<")
    assert _load_error(demo_copy).code == "IR_CORRUPT"


@pytest.mark.model
@pytest.mark.parametrize("damage", ["garbage xml", "truncated bin"])
def test_damaged_mtp_head_loads_plain_with_warning(demo_copy: Path, damage: str) -> None:
    """A damaged MTP head costs the speed-up, not the chat (issue 18)."""
    if damage == "garbage xml":
        (demo_copy / "openvino_mtp_model.xml").write_text("this is not xml <<<")
    else:
        path = demo_copy / "openvino_mtp_model.bin"
        path.write_bytes(path.read_bytes()[:1000])
    engine = Engine()
    loaded = engine.load(demo_copy)
    assert not loaded.mtp
    (warning,) = loaded.warnings
    assert warning.startswith("This model's MTP head is damaged: openvino_mtp_model.")
    assert "re-export the model" in warning
    stats = engine.generate(COUNTING, GenerationSettings(max_new_tokens=10)).run_to_end()
    assert stats.method == PLAIN and stats.generated_tokens == 10
    engine.unload()


@pytest.mark.model
def test_foreign_xml(demo_copy: Path) -> None:
    (demo_copy / "openvino_language_model.xml").write_text(
        '<?xml version="1.0"?><html><body>hello</body></html>'
    )
    assert _load_error(demo_copy).code in ("IR_CORRUPT", "LOAD_FAILED")


@pytest.mark.model
def test_missing_tokenizer(demo_copy: Path) -> None:
    (demo_copy / "openvino_tokenizer.xml").unlink()
    assert _load_error(demo_copy).code == "TOKENIZER_MISSING"


@pytest.mark.model
def test_empty_and_missing_dirs(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert _load_error(tmp_path / "empty").code == "EMPTY_DIR"
    assert _load_error(tmp_path / "nope").code == "MODEL_NOT_FOUND"
    (tmp_path / "file.txt").write_text("x")
    assert _load_error(tmp_path / "file.txt").code == "MODEL_NOT_FOUND"
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "notes.txt").write_text("x")
    assert _load_error(tmp_path / "junk").code == "NOT_A_MODEL"


@pytest.mark.model
def test_non_qwen35_model(demo_copy: Path) -> None:
    config = json.loads((demo_copy / "config.json").read_text())
    config["model_type"] = "llama"
    (demo_copy / "config.json").write_text(json.dumps(config))
    error = _load_error(demo_copy)
    assert error.code == "NOT_QWEN35" and "llama" in error.message


@pytest.mark.model
def test_incompatible_runtime(demo_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    versions = {
        "openvino": "2026.4.1",
        "openvino-genai": "2026.3.0.0",
        "openvino-tokenizers": "2026.4.1.0",
    }
    monkeypatch.setattr(engine_runtime, "package_version", versions.get)
    error = _load_error(demo_model)
    assert error.code == "RUNTIME_INCOMPATIBLE" and "different release families" in error.message


@pytest.mark.model
def test_unknown_device(demo_model: Path) -> None:
    error = _load_error_with(demo_model, LoadOptions(device="NOSUCHDEVICE"))
    assert error.code in ("DEVICE_UNAVAILABLE", "LOAD_FAILED")


def _load_error_with(path: Path, options: LoadOptions) -> EngineError:
    with pytest.raises(EngineError) as info:
        Engine().load(path, options)
    return info.value


@pytest.mark.model
@pytest.mark.parametrize("fast_vocab", [True, False])
def test_streamed_text_equals_the_detokenizer(demo_copy: Path, fast_vocab: bool) -> None:
    """Streamed text is the runtime detokenizer's text of the generated ids, whether it came
    from the tokenizer.json byte table (the fast path) or from the detokenizer itself."""
    if not fast_vocab:  # without tokenizer.json the engine keeps the runtime's detokenizer
        (demo_copy / "tokenizer.json").unlink()
    engine = Engine()
    engine.load(demo_copy)
    assert (engine._vocab is not None) is fast_vocab
    generation = engine.generate(
        [Message("user", "Repeat 'the quick brown fox jumps over the lazy dog' three times.")],
        GenerationSettings(max_new_tokens=60, method=DecodingMethod.mtp(2), ignore_eos=True),
    )
    chunks = list(generation)
    assert generation.stats is not None and generation.stats.generated_tokens == 60
    decoded = engine._tokenizer.decode(generation.token_ids)
    assert "".join(c.answer for c in chunks) == generation.answer == decoded.lstrip("\n")
    assert "quick brown fox" in generation.answer
    engine.unload()


@pytest.mark.model
def test_a_tokenizer_json_that_disagrees_is_not_used(demo_copy: Path) -> None:
    path = demo_copy / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    one, two = vocab["1"], vocab["2"]
    vocab["1"], vocab["2"] = two, one  # "1" would decode as "2"
    path.write_text(json.dumps(data), encoding="utf-8")
    engine = Engine()
    engine.load(demo_copy)
    assert engine._vocab is None
    stats = engine.generate([Message("user", "Count from 1 to 5.")]).run_to_end()
    assert stats.generated_tokens > 0
    engine.unload()


@pytest.mark.model
def test_next_chunks_batches_ready_steps_within_a_time_limit(demo_model: Path) -> None:
    engine = Engine()
    engine.load(demo_model)
    generation = engine.generate(COUNTING, GenerationSettings(max_new_tokens=80, ignore_eos=True))
    first = generation.next_chunks(None)
    assert first, "the first step always comes"
    deadline = time.monotonic() + 30
    while engine._active is generation and time.monotonic() < deadline:
        time.sleep(0.01)  # let the decoding loop finish: every step is queued now
    # A consumer that fell behind takes one step per zero-second window ...
    assert len(generation.next_chunks(0, within_s=0)) == 1
    # ... and everything that is ready when unbounded.
    rest = generation.next_chunks(0)
    with pytest.raises(StopIteration):
        generation.next_chunks(0)
    assert generation.stats is not None
    assert len(first) + 1 + len(rest) == generation.stats.steps
    assert len(generation.token_ids) == generation.stats.generated_tokens == 80
    engine.unload()
