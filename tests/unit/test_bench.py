"""core.measure.bench without a model: summaries, recommendation, projections, stored depth, CLI."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from qwen_mtp_desktop.core.errors import MeasurementError
from qwen_mtp_desktop.core.measure import recommendations
from qwen_mtp_desktop.core.measure.bench import (
    BENCH_KEYS,
    MODE_KEYS,
    RECOMMENDATION_KEYS,
    RssSampler,
    break_even_acceptance,
    expected_tokens_per_step,
    parse_depths,
    recommend,
    summarise_modes,
)
from qwen_mtp_desktop.core.measure.measurement import installed_versions, run_record
from qwen_mtp_desktop.core.measure.recommendations import depth_recommendation, save_recommendation
from qwen_mtp_desktop.core.measure.report_markdown import report_markdown
from tests.unit.test_validate import fake_model, fake_stats

mtp = DecodingMethod.mtp
PLAIN_KEY = (PLAIN, "genai")


def rows(
    depth: int | DecodingMethod | None, speeds: list[float], *, base: list[float],
    identical: bool = True, prompt_set: str = "demo", sizes: tuple[int, ...] = (1, 2, 2, 1, 2),
    decoder: str = "app",
) -> list[dict[str, Any]]:  # fmt: skip
    """Run rows as run_benchmark records them, one per round: plain decoding (None) on
    openvino-genai, MTP at a depth or another method on `decoder`."""
    method = PLAIN if depth is None else mtp(depth) if isinstance(depth, int) else depth
    out = []
    for index, speed in enumerate(speeds):
        plain = method.is_plain
        stats = fake_stats(method, (1, 1, 1, 1, 1) if plain else sizes, speed)
        row = run_record(stats)
        row.update(
            decoder="genai" if plain else decoder,
            decode_tokens_per_s=speed,
            round=index,
            order=0,
            prompt_set=prompt_set,
            prompt_id="p",
            peak_rss_bytes=100 * 2**20,
            identical=identical or plain,
            speedup=None if plain else speed / base[index],
        )
        out.append(row)
    return out


def keys(*depths: int) -> list[tuple[DecodingMethod, str]]:
    return [PLAIN_KEY, *[(mtp(d), "app") for d in depths]]


def fake_bench(path: Path, all_rows: list[dict[str, Any]], depths: list[int]) -> dict[str, Any]:
    modes = summarise_modes(all_rows, keys(*depths), PLAIN_KEY)
    return {
        "schema_version": 3,
        "kind": "bench",
        "id": "20261130-020000-bench-cccccc",
        "created": "2026-11-30T02:00:00Z",
        "app_version": "0.1.0",
        "duration_s": 12.0,
        "model": fake_model(path),
        "versions": installed_versions(),
        "machine": {"device_name": "Test CPU"},
        "device": "CPU",
        "numerics": "default",
        "prompt_sets": [{"name": "demo", "title": "Demo", "path": None, "prompt_ids": ["p"]}],
        "settings": {
            "depths": depths,
            "runs": 3,
            "warmup": 1,
            "max_new_tokens": None,
            "max_new_tokens_per_set": {"demo": 48},
            "greedy": True,
            "load_properties": {},
        },
        "runs": all_rows,
        "modes": modes,
        "baseline": {"decoder": "genai", "label": "plain · openvino-genai", "reason": "fastest"},
        "comparison": [],
        "per_set": [{"prompt_set": "demo", "modes": modes}],
        "memory": {
            "rss_start_bytes": 2**20,
            "rss_after_load_bytes": 50 * 2**20,
            "peak_rss_bytes": 100 * 2**20,
        },
        "recommendation": recommend(modes),
    }


def test_parse_depths() -> None:
    assert parse_depths("1,2,3,4") == (1, 2, 3, 4)
    assert parse_depths(" 3, 1,3 ") == (1, 3)
    for bad in ("", "0,1", "a", "1,,x", "9"):
        with pytest.raises(MeasurementError):
            parse_depths(bad)


def test_expected_tokens_and_break_even() -> None:
    assert expected_tokens_per_step(1.0, 3) == 4
    assert expected_tokens_per_step(0.0, 3) == 1
    assert expected_tokens_per_step(0.5, 2) == pytest.approx(1.75)
    # RUNTIME-NOTES' 0.8B INT4 costs: plain ~100 ms, n=1 step ~161 + ~29 ms -> break-even ~0.9.
    even = break_even_acceptance(190 / 100, 1)
    assert even == pytest.approx(0.9, abs=1e-6)
    assert break_even_acceptance(0.9, 2) == 0.0
    assert break_even_acceptance(3.5, 2) is None  # even 100 % acceptance cannot pay for it


def test_summary_and_recommendation_pick_the_fastest_identical_depth() -> None:
    base = [100.0, 80.0, 120.0]
    data = (
        rows(None, base, base=base)
        + rows(1, [120.0, 100.0, 140.0], base=base)
        + rows(2, [150.0, 110.0, 160.0], base=base)
        + rows(3, [200.0, 170.0, 230.0], base=base, identical=False)
    )
    modes = summarise_modes(data, keys(1, 2, 3), PLAIN_KEY)
    assert [m["label"] for m in modes] == [
        "plain · openvino-genai",
        "MTP n=1",
        "MTP n=2",
        "MTP n=3",
    ]
    for mode in modes:
        assert set(mode) == MODE_KEYS
    n2 = modes[2]
    # Speed-ups are per-round ratios, not a ratio of medians.
    assert n2["speedup"] == pytest.approx({"median": 1.375, "min": 1.3333333, "max": 1.5})
    assert n2["decode_tokens_per_s"] == {"median": 150.0, "min": 110.0, "max": 160.0}
    assert n2["acceptance_rate"] == pytest.approx(3 / 8)
    assert len(n2["acceptance_by_position"]) == 2
    assert set(n2["projected_speedup"]) == {"0.60", "0.80", "0.90"}
    assert modes[0]["speedup"] is None and modes[0]["acceptance_rate"] is None
    rec = recommend(modes)
    assert set(rec) == RECOMMENDATION_KEYS
    assert rec["method"] == mtp(2).to_record() and rec["label"] == "MTP n=2"
    assert not rec["mtp_slower"]
    assert rec["diverged_depths"] == [3]  # faster, but its output changed


def test_recommendation_is_baseline_when_mtp_is_slower() -> None:
    base = [100.0, 100.0]
    data = (
        rows(None, base, base=base)
        + rows(1, [60.0, 55.0], base=base)
        + rows(2, [40.0, 45.0], base=base)
    )
    rec = recommend(summarise_modes(data, keys(1, 2), PLAIN_KEY))
    assert rec["method"] == PLAIN.to_record() and rec["label"] == "plain" and rec["mtp_slower"]
    assert "slower" in rec["reason"] and "MTP n=1" in rec["reason"]
    diverged = rows(None, base, base=base) + rows(1, [300.0, 300.0], base=base, identical=False)
    rec = recommend(summarise_modes(diverged, keys(1), PLAIN_KEY))
    assert rec["method"] == PLAIN.to_record() and not rec["mtp_slower"]
    assert "validate" in rec["reason"]


def test_bench_schema_key_set_is_pinned(tmp_path: Path) -> None:
    assert {
        "schema_version", "kind", "id", "created", "app_version", "duration_s", "model",
        "versions", "machine", "device", "numerics", "prompt_sets", "settings", "runs", "modes",
        "per_set", "memory", "recommendation", "baseline", "comparison",
    } == BENCH_KEYS  # fmt: skip
    assert {
        "method", "decoder", "label", "runs", "decode_tokens_per_s", "ttft_s", "speedup",
        "acceptance_rate", "mean_accepted_per_step", "acceptance_by_position", "identical",
        "step_ms", "peak_rss_bytes", "projected_speedup", "break_even_acceptance",
    } == MODE_KEYS  # fmt: skip
    base = [100.0]
    report = fake_bench(tmp_path, rows(None, base, base=base) + rows(1, [90.0], base=base), [1])
    assert set(report) == BENCH_KEYS


def test_bench_markdown(tmp_path: Path) -> None:
    base = [100.0, 90.0]
    data = rows(None, base, base=base) + rows(1, [130.0, 120.0], base=base)
    text = report_markdown(fake_bench(tmp_path, data, [1]))
    assert "**Recommendation: MTP n=1 (1.32x plain decoding)" in text
    assert "| MTP n=1 | 125.0 (120.0–130.0) |" in text
    assert "## What this machine would give" in text and "90% accepted" in text
    assert "3 runs after 1 warm-up" in text


def test_stored_recommendation_round_trip(tmp_path: Path, app_home: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    for name in ("openvino_language_model", "openvino_mtp_model"):
        (model / f"{name}.xml").write_text("<net/>")
        (model / f"{name}.bin").write_bytes(b"\0" * 16)
    assert depth_recommendation(model, "CPU") is None

    def start(device: str = "CPU") -> DecodingMethod | None:
        found = depth_recommendation(model, device)
        return found.start if found is not None else None

    base = [100.0]
    faster = fake_bench(model, rows(None, base, base=base) + rows(2, [150.0], base=base), [2])
    stored = save_recommendation(faster)
    assert stored.start == mtp(2) and stored.speedup == pytest.approx(1.5)
    assert stored.label == "MTP n=2"
    assert recommendations.recommendations_file().is_relative_to(app_home)
    assert start("cpu") == mtp(2)  # device names are case-insensitive
    assert start("GPU") is None  # per device

    slower = fake_bench(model, rows(None, base, base=base) + rows(1, [50.0], base=base), [1])
    save_recommendation(slower)
    found = depth_recommendation(model, "CPU")
    assert found is not None and found.start == PLAIN and found.label == "plain"

    # Re-exporting the model invalidates what was measured on the old files.
    bin_path = model / "openvino_mtp_model.bin"
    bin_path.write_bytes(b"\0" * 32)
    os.utime(bin_path, ns=(1, 1))
    assert depth_recommendation(model, "CPU") is None

    recommendations.recommendations_file().write_text("{broken")
    assert depth_recommendation(model, "CPU") is None


def test_the_recommendation_is_safe_to_read_from_any_thread(tmp_path: Path) -> None:
    model = tmp_path / "m"
    model.mkdir()
    base = [100.0]
    report = fake_bench(model, rows(None, base, base=base) + rows(1, [150.0], base=base), [1])
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                save_recommendation(report)
                found = depth_recommendation(model, "CPU")
                assert found is not None and found.start == mtp(1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert json.loads(recommendations.recommendations_file().read_text())["schema_version"] == 1


def test_rss_sampler_tracks_a_peak_and_stops() -> None:
    with RssSampler(interval_s=0.01) as sampler:
        block = bytearray(64 * 2**20)  # touch 64 MiB
        block[::4096] = b"x" * len(block[::4096])
        window = sampler.window()
        del block
    assert sampler.peak >= window >= sampler.start_rss
    assert window - sampler.start_rss > 32 * 2**20
    assert not any(t.name == "rss-sampler" for t in threading.enumerate())


def test_cli_commands_register(monkeypatch: pytest.MonkeyPatch) -> None:
    from qwen_mtp_desktop import cli
    from qwen_mtp_desktop.commands import bench as bench_command
    from qwen_mtp_desktop.commands import validate as validate_command

    monkeypatch.setattr(cli, "COMMAND_MODULES", (validate_command, bench_command))
    parser = cli.build_parser()
    args = parser.parse_args(["bench", "m", "--depths", "2,1", "--runs", "2", "--prompts",
                              "demo,code", "--prompts", "x.json", "--warmup", "0"])  # fmt: skip
    assert args.depths == (1, 2) and args.runs == 2 and args.warmup == 0
    assert args.prompts == ["demo,code", "x.json"]
    args = parser.parse_args(["validate", "m", "--num-assistant-tokens", "3", "--json"])
    assert args.num_assistant_tokens == 3 and args.json and args.prompts is None
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "m", "--depths", "0,1"])


def test_cli_reports_user_errors_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from qwen_mtp_desktop import cli
    from qwen_mtp_desktop.commands import bench as bench_command
    from qwen_mtp_desktop.commands import validate as validate_command

    monkeypatch.setattr(cli, "COMMAND_MODULES", (validate_command, bench_command))
    assert cli.main(["validate", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "does not exist" in err
    assert cli.main(["bench", str(tmp_path), "--prompts", "poetry"]) == 1
    assert "no built-in prompt set called 'poetry'" in capsys.readouterr().err


def test_workload_winner_is_the_fastest_identical_method() -> None:
    from qwen_mtp_desktop.core.measure.bench import workload_winner

    base = [100.0, 100.0, 100.0]
    lookup = DecodingMethod.lookup(4, 3)
    data = [
        *rows(None, base, base=base),
        *rows(1, [120.0, 125.0, 118.0], base=base),
        *rows(lookup, [160.0, 150.0, 170.0], base=base, decoder="genai"),
    ]
    method_keys = [PLAIN_KEY, (mtp(1), "app"), (lookup, "genai")]
    modes = summarise_modes(data, method_keys, PLAIN_KEY)
    assert [m["method"] for m in modes] == [m.to_record() for m in (PLAIN, mtp(1), lookup)]
    assert modes[2]["label"] == "prompt lookup K=4, n-gram 3"
    assert modes[2]["projected_speedup"] is None
    winner = workload_winner(modes)
    assert winner["method"] == lookup.to_record()
    assert winner["label"] == "prompt lookup K=4, n-gram 3" and winner["speedup"] == 1.6
    # The depth recommendation stays about MTP depths.
    assert recommend(modes)["method"] == mtp(1).to_record()
    # A faster method whose output differed does not win; nothing faster than plain -> plain.
    for row in data:
        if row["method"] == lookup.to_record():
            row["identical"] = False
    found = workload_winner(summarise_modes(data, method_keys, PLAIN_KEY))
    assert found["method"] == mtp(1).to_record()
    slow = [*rows(None, base, base=base), *rows(1, [90.0, 95.0, 92.0], base=base)]
    plain = workload_winner(summarise_modes(slow, method_keys[:2], PLAIN_KEY))
    assert plain["method"] == PLAIN.to_record() and plain["runner_up"] == "MTP n=1"
    assert plain["runner_up_speedup"] == 0.92
