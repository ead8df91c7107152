"""Prompt lookup in the acceptance health check (core.measure.acceptance_health): references per
workload from validate and bench reports, requests read as workloads, and live lookup answers
compared only with the reference of their own workload."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import GenerationStats, StepDrafts, build_stats
from qwen_mtp_desktop.core.files.paths import resources_dir
from qwen_mtp_desktop.core.measure.acceptance_health import (
    HealthMonitor,
    ModelState,
    load_lookup_references,
    load_reference,
    lookup_references_from_report,
    save_reference,
    workload_kind,
)
from tests.unit.test_acceptance_health import SAME, _reference, _turn

WORKLOADS = ("code", "chat", "list", "summarise", "edit")


def _lookup_turn(drafted: int, accepted: int, steps: int = 6) -> GenerationStats:
    """A prompt lookup answer that drafted `drafted` tokens over `steps` and kept `accepted`."""
    per_step, extra = divmod(drafted, steps)
    drafts = [StepDrafts(0, 0)]
    sizes = [1]
    left = accepted
    for index in range(steps):
        proposed = per_step + (1 if index < extra else 0)
        kept = min(left, proposed)
        left -= kept
        drafts.append(StepDrafts(proposed, kept))
        sizes.append(1 + kept)
    times = [0.01 * i for i in range(len(sizes))]
    return build_stats(
        method=DecodingMethod.lookup(4), device="CPU", prompt_tokens=50,
        chunk_sizes=sizes, chunk_times=times, total_s=times[-1], reasoning_tokens=0,
        answer_tokens=sum(sizes), finish_reason="eos", drafts=drafts,
    )  # fmt: skip


LOOKUP = DecodingMethod.lookup(4, 3)


def _lookup_reference(workload: str, rate: float) -> Any:
    return _reference(
        rate, method=LOOKUP, workload=workload, prompt_sets=(workload,), mtp_precision=None,
    )  # fmt: skip


def test_every_builtin_workload_prompt_reads_as_its_own_workload() -> None:
    for name in WORKLOADS:
        prompts = json.loads((resources_dir() / "prompts" / f"{name}.json").read_text())
        for prompt in prompts["prompts"]:
            assert workload_kind(prompt["user"]) == name, (name, prompt["user"][:80])


@given(st.text(max_size=400))
def test_any_request_reads_as_one_of_the_workloads(text: str) -> None:
    assert workload_kind(text) in WORKLOADS


def test_lookup_collapse_on_its_own_workload_warns_once_and_says_it_compared_like() -> None:
    edit = _lookup_reference("edit", 0.8)
    monitor = HealthMonitor(None, SAME, {"edit": edit})
    request = "Rewrite this paragraph in the passive voice: ..."
    assert monitor.observe(_lookup_turn(24, 19), request) is None  # at the reference: quiet
    warnings = [monitor.observe(_lookup_turn(24, 1), request) for _ in range(4)]
    fired = [w for w in warnings if w is not None]
    assert len(fired) == 1
    warning = fired[0]
    assert warning.method == LOOKUP and warning.workload == "edit" and warning.live < 0.4
    assert warning.text.startswith("Prompt lookup acceptance dropped:")
    assert "on this chat's edit requests" in warning.text
    assert "Compared like with like only" in warning.text
    assert "copy less from the conversation than the edit prompts" in warning.text
    assert "drafts" not in warning.causes[0]  # same K=4 as the reference: not a cause


def test_a_different_drafts_per_step_is_named_as_a_cause() -> None:
    reference = _lookup_reference("edit", 0.8)  # measured at K=4
    monitor = HealthMonitor(None, SAME, {"edit": reference})
    stats = replace(_lookup_turn(24, 0), method=DecodingMethod.lookup(8, 3))
    warnings = [monitor.observe(stats, "Edit this list: ...") for _ in range(3)]
    warning = next(w for w in warnings if w is not None)
    assert "this chat drafts 8 tokens per step, the reference 4" in warning.text


def test_lookup_answers_are_not_compared_with_another_workloads_reference() -> None:
    """Chat requests copy little: compared with the edit prompts' acceptance they would
    always look collapsed, so without a chat reference nothing is said."""
    monitor = HealthMonitor(None, SAME, {"edit": _lookup_reference("edit", 0.9)})
    chat = "Explain in a few sentences why the sky is blue."
    assert all(monitor.observe(_lookup_turn(24, 0), chat) is None for _ in range(8))
    # With a chat reference of its own (low, as chat copies little) it stays quiet too.
    monitor = HealthMonitor(None, SAME, {"chat": _lookup_reference("chat", 0.1)})
    assert all(monitor.observe(_lookup_turn(24, 2), chat) is None for _ in range(8))


def test_mtp_and_lookup_are_watched_apart() -> None:
    monitor = HealthMonitor(_reference(0.9), SAME, {"edit": _lookup_reference("edit", 0.8)})
    edit = "Fix the typos in this sentence: ..."
    for _ in range(4):
        assert monitor.observe(_lookup_turn(24, 19), edit) is None
    fired = [monitor.observe(_turn(0.0)) for _ in range(3)]
    assert [w.method.kind for w in fired if w is not None] == ["mtp"]
    assert monitor.observe(_lookup_turn(24, 19), edit) is None  # lookup still healthy
    # A lookup answer never feeds the MTP evidence, nor the other way round.
    assert monitor.live is not None and monitor.live < 0.2


def _bench(model: Path) -> dict[str, Any]:
    def lookup(rate: float | None, identical: bool = True) -> dict[str, Any]:
        return {"method": LOOKUP.to_record(), "identical": identical, "acceptance_rate": rate}

    return {
        "kind": "bench", "id": "b1", "created": "2026-11-30T22:00:00Z", "device": "cpu",
        "model": {"path": str(model), "mtp_precision": "FP16"},
        "versions": {"openvino-genai": "2026.4.1.0"},
        "prompt_sets": [{"name": "chat"}, {"name": "edit"}, {"name": "code"}],
        "modes": [{"method": DecodingMethod.mtp(1).to_record(), "identical": True,
                   "acceptance_by_position": [0.75]}],
        "per_set": [
            {"prompt_set": "chat", "modes": [lookup(0.12)]},
            {"prompt_set": "edit", "modes": [lookup(0.81)]},
            {"prompt_set": "code", "modes": [lookup(0.5, identical=False)]},
        ],
    }  # fmt: skip


def test_bench_and_validate_give_lookup_references_per_workload(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "openvino_mtp_model.bin").write_bytes(b"x" * 10)
    found = lookup_references_from_report(_bench(model))
    assert {r.workload: r.first_draft for r in found} == {"chat": 0.12, "edit": 0.81}
    mtp = save_reference(_bench(model))
    assert mtp is not None and mtp.method == DecodingMethod.mtp(1)
    assert load_reference(model, "CPU") == mtp
    stored = load_lookup_references(model, "CPU")
    assert sorted(stored) == ["chat", "edit"] and stored["edit"].source == "bench"
    assert load_lookup_references(model, "GPU") == {}
    validation = {
        "kind": "validate", "id": "v2", "created": "2026-11-30T23:00:00Z", "device": "CPU",
        "model": {"path": str(model)}, "versions": {}, "prompt_set": {"name": "edit"},
        "settings": {"method": DecodingMethod.lookup(6, 2).to_record()},
        "summary": {"all_identical": True, "acceptance_rate": 0.7,
                    "acceptance_by_position": []},
    }  # fmt: skip
    assert save_reference(validation) is None  # no MTP reference in it ...
    stored = load_lookup_references(model, "CPU")
    edit = stored["edit"]  # ... but the edit workload's lookup reference is the new one
    assert (edit.source, edit.first_draft, edit.method) == (
        "validate",
        0.7,
        DecodingMethod.lookup(6, 2),
    )
    assert stored["chat"].source == "bench" and load_reference(model, "CPU") == mtp


@pytest.mark.parametrize("changed", ["files", "runtime"])
def test_lookup_causes_name_what_changed_and_never_a_head(changed: str) -> None:
    reference = _lookup_reference("edit", 0.8)
    now = ModelState(
        [["openvino_mtp_model.bin", 11, 2]] if changed == "files" else reference.fingerprint,
        "2026.5.0.0" if changed == "runtime" else "2026.4.1.0",
        "INT4_ASYM",
    )
    monitor = HealthMonitor(None, now, {"edit": reference})
    warning = None
    for _ in range(4):
        warning = warning or monitor.observe(_lookup_turn(24, 0), "Rewrite this: ...")
    assert warning is not None
    assert len(warning.causes) == 2 and "MTP head" not in warning.text
    assert ("model files changed" in warning.causes[0]) == (changed == "files")
    assert ("openvino-genai changed" in warning.causes[0]) == (changed == "runtime")
