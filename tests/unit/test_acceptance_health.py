"""core.measure.acceptance_health on synthetic turns and reports: the reference a report gives, the
live check (quiet at the measured acceptance, one warning after a collapse) and its causes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import GenerationStats, build_stats
from qwen_mtp_desktop.core.measure.acceptance_health import (
    MIN_TRIALS,
    AcceptanceReference,
    HealthMonitor,
    ModelState,
    likely_causes,
    load_reference,
    reference_file,
    reference_from_report,
    save_reference,
)
from qwen_mtp_desktop.core.measure.recommendations import model_fingerprint


def _turn(accepted_share: float, steps: int = 20, depth: int = 1) -> GenerationStats:
    """An MTP turn at `depth` whose first draft was accepted in `accepted_share` of steps."""
    hits = round(steps * accepted_share)
    sizes = [1] + [1 + depth] * hits + [1] * (steps - hits)
    times = [0.01 * i for i in range(len(sizes))]
    return build_stats(
        method=DecodingMethod.mtp(depth), device="CPU", prompt_tokens=10,
        chunk_sizes=sizes, chunk_times=times, total_s=times[-1], reasoning_tokens=0,
        answer_tokens=sum(sizes), finish_reason="eos",
    )  # fmt: skip


def _reference(first: float = 0.9, **changes: Any) -> AcceptanceReference:
    values: dict[str, Any] = {
        "model_path": "/m", "device": "CPU", "source": "validate", "report_id": "r",
        "created": "2026-11-30T20:00:00Z", "first_draft": first, "prompt_sets": ("demo",),
        "fingerprint": [["openvino_mtp_model.bin", 10, 1]], "genai_version": "2026.4.1.0",
        "mtp_precision": "FP16",
    }  # fmt: skip
    values.update(changes)
    return AcceptanceReference(**values)


SAME = ModelState([["openvino_mtp_model.bin", 10, 1]], "2026.4.1.0", "FP16")


def test_quiet_at_the_measured_acceptance_and_with_too_little_evidence() -> None:
    monitor = HealthMonitor(_reference(0.9), SAME)
    for _ in range(20):
        assert monitor.observe(_turn(0.85)) is None
    fresh = HealthMonitor(_reference(0.9), SAME)
    assert fresh.observe(_turn(0.0, steps=MIN_TRIALS - 1)) is None  # too few drafts yet
    # A plain turn or a prompt-lookup turn says nothing about the MTP head.
    plain = build_stats(
        method=PLAIN, device="CPU", prompt_tokens=1,
        chunk_sizes=[1, 1, 1], chunk_times=[0, 1, 2], total_s=2, reasoning_tokens=0,
        answer_tokens=3, finish_reason="eos",
    )  # fmt: skip
    assert fresh.observe(plain) is None


def test_warns_once_after_a_collapse_with_the_causes_it_can_see() -> None:
    changed = ModelState([["openvino_mtp_model.bin", 12, 2]], "2026.5.0.0", "INT4_ASYM")
    monitor = HealthMonitor(_reference(0.9), changed)
    warnings = [monitor.observe(_turn(0.05, depth=2)) for _ in range(4)]
    fired = [w for w in warnings if w is not None]
    assert len(fired) == 1 and monitor.warned
    warning = fired[0]
    assert warning.live < 0.1
    text = warning.text
    assert "90%" in text and "validate" in text and "2026-11-30" in text
    assert "model files changed" in text and "2026.5.0.0" in text and "INT4_ASYM" in text
    assert "unlike the demo prompts" in text


def test_four_rejected_steps_are_enough_one_lucky_draft_is_not() -> None:
    """Auto leaves MTP after four rejected steps: that alone must be reported."""
    assert HealthMonitor(_reference(0.95), SAME).observe(_turn(0.0, steps=4)) is not None
    assert HealthMonitor(_reference(0.95), SAME).observe(_turn(0.25, steps=4)) is None


def test_wilson_bound() -> None:
    from qwen_mtp_desktop.core.measure.acceptance_health import wilson_upper

    assert wilson_upper(0, 4) == pytest.approx(0.4035, abs=1e-3)
    assert wilson_upper(90, 100) > 0.9 > wilson_upper(80, 100)
    assert wilson_upper(0, 0) == 1.0


def test_a_moderate_drop_is_not_marked() -> None:
    monitor = HealthMonitor(_reference(0.9), SAME)
    assert all(monitor.observe(_turn(0.6)) is None for _ in range(10))


def test_causes_name_a_quantized_head_even_when_unchanged() -> None:
    causes = likely_causes(_reference(mtp_precision="INT4_ASYM"), ModelState(
        [["openvino_mtp_model.bin", 10, 1]], "2026.4.1.0", "INT4_ASYM"))  # fmt: skip
    assert causes[0] == "the MTP head is quantized (INT4_ASYM)" and len(causes) == 2


def _validation(path: Path, identical: bool = True, first: float = 0.8) -> dict[str, Any]:
    return {
        "kind": "validate", "id": "v1", "created": "2026-11-30T21:00:00Z", "device": "cpu",
        "model": {"path": str(path), "mtp_precision": "FP16"},
        "versions": {"openvino-genai": "2026.4.1.0"}, "prompt_set": {"name": "demo"},
        "settings": {"method": DecodingMethod.mtp(1).to_record()},
        "summary": {"all_identical": identical, "acceptance_by_position": [first, 0.5]},
    }  # fmt: skip


def test_reports_give_references_that_round_trip(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "openvino_mtp_model.bin").write_bytes(b"x" * 10)
    saved = save_reference(_validation(model))
    assert saved is not None and saved.first_draft == 0.8 and saved.device == "CPU"
    assert saved.fingerprint == model_fingerprint(model)
    assert load_reference(model, "cpu") == saved
    assert load_reference(model, "GPU") is None
    # A failed validation or a prompt-lookup one keeps the old reference.
    assert save_reference(_validation(model, identical=False)) is None
    lookup = _validation(model)
    lookup["settings"]["method"] = DecodingMethod.lookup().to_record()
    assert reference_from_report(lookup) is None
    n1, n2 = DecodingMethod.mtp(1).to_record(), DecodingMethod.mtp(2).to_record()
    lookup4 = DecodingMethod.lookup(4).to_record()
    bench = {
        "kind": "bench", "id": "b1", "created": "2026-11-30T22:00:00Z", "device": "CPU",
        "model": {"path": str(model), "mtp_precision": "FP16"}, "versions": {},
        "prompt_sets": [{"name": "chat"}, {"name": "edit"}],
        "modes": [
            {"method": PLAIN.to_record(), "identical": True, "acceptance_by_position": []},
            {"method": n2, "identical": True, "acceptance_by_position": [0.7, 0.4]},
            {"method": n1, "identical": True, "acceptance_by_position": [0.75]},
            {"method": lookup4, "identical": True, "acceptance_by_position": [0.3]},
        ],
    }  # fmt: skip
    reference = save_reference(bench)
    assert reference is not None and reference.first_draft == 0.75
    assert reference.method == DecodingMethod.mtp(1)  # the shallowest depth measured
    assert reference.prompt_sets == ("chat", "edit") and load_reference(model, "CPU") == reference
    # A damaged file is ignored, not a crash.
    reference_file().write_text(json.dumps({"schema_version": 1, "entries": {"x": 1}}))
    assert load_reference(model, "CPU") is None
    reference_file().write_text("{not json")
    assert load_reference(model, "CPU") is None
