"""Every script in benchmarks/ runs in its `--smoke` mode, as a real subprocess, so none of them
rots: the same code path as a real run, tiny sizes. Each script checks its own results and exits
1 when they are not sane; here the printed numbers are parsed again and checked independently
(present, finite, positive), so a script that prints nothing useful cannot pass either."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from tests.conftest import CACHE_ROOT, REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"
DEMO = REPO_ROOT / "resources" / "demo-model" / "openvino"
NUMBER = r"(\d+(?:\.\d+)?)"


def run_script(script: str, args: list[str], cwd: Path, timeout: float) -> CompletedProcess[str]:
    """`python benchmarks/SCRIPT ARGS` with this checkout importable, offscreen Qt, the hub
    offline and the shared fixture cache."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {
        **os.environ,
        "PYTHONPATH": path,
        "QT_QPA_PLATFORM": "offscreen",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "QWEN_MTP_TEST_CACHE": str(CACHE_ROOT),
    }
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=cwd,  # anything a script writes by accident lands in the test's folder
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_smoke(script: str, cwd: Path, timeout: float = 600) -> str:
    """The script's --smoke run; its stdout, after checking it exited 0 and said it passed."""
    result = run_script(script, ["--smoke"], cwd, timeout)
    output = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, f"{script} --smoke exited {result.returncode}\n{output}"
    assert "Traceback" not in result.stderr, output
    assert f"{script} smoke check passed" in result.stdout, output
    return result.stdout


def numbers(pattern: str, text: str, count: int | None = None) -> list[tuple[float, ...]]:
    """Every match of `pattern` with its groups as floats; each must be finite and >= 0."""
    found = [tuple(float(g) for g in m.groups()) for m in re.finditer(pattern, text, re.M)]
    assert found, f"no {pattern!r} in:\n{text}"
    if count is not None:
        assert len(found) == count, f"{len(found)} x {pattern!r}, expected {count}:\n{text}"
    for values in found:
        assert all(math.isfinite(v) and v >= 0 for v in values), (pattern, values)
    return found


def positive(rows: list[tuple[float, ...]]) -> None:
    for values in rows:
        assert all(v > 0 for v in values), values


def test_every_script_has_a_smoke_test() -> None:
    """Here (run_smoke) or in another test module that runs it with --smoke."""
    scripts = sorted(p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_"))
    here = Path(__file__).read_text()
    tested = {m.group(1) for m in re.finditer(r'run_smoke\("(\w+\.py)"', here)}
    for module in (REPO_ROOT / "tests").rglob("test_*.py"):
        text = module.read_text()
        if module != Path(__file__) and '"--smoke"' in text:
            tested |= {script for script in scripts if f'"{script}"' in text}
    assert scripts == sorted(tested)
    readme = (BENCHMARKS / "README.md").read_text()
    for script in scripts:
        assert re.search(rf"`{script} --smoke[` ]", readme), f"no smoke line for {script}"


@pytest.mark.subprocess
@pytest.mark.parametrize(
    ("script", "args", "message"),
    [
        ("step_costs.py", ["."], "is not an exported model with an MTP head"),
        ("step_overhead.py", ["."], "is not an exported model with an MTP head"),
        ("step_overhead.py", [str(DEMO), "--depths", "1,x"], "give whole numbers"),
        ("step_overhead.py", [str(DEMO), "--tokens", "0"], "must be at least 1, got 0"),
        # Every number option goes through benchmarks/_args.py; one of each kind per script.
        ("continuation_prefill.py", [str(DEMO), "--kept", "0"], "must be at least 1"),
        ("continuation_prefill.py", [str(DEMO), "--new", "32,x"], "give whole numbers"),
        ("context_steps.py", [str(DEMO), "--depths", "9"], "must be from 1 to 8"),
        ("fullsize.py", ["run", "--depths", "1,,x"], "give whole numbers"),
        ("fullsize.py", ["run", "--runs", "two"], "'two' is not a whole number"),
        ("methods_per_workload.py", ["--depths", ""], "give at least one number"),
        ("mtp_chain_check.py", ["--depths", "0,1"], "must be from 1 to 8"),
        ("multi_turn.py", ["--turns", "1"], "must be at least 2"),
        ("shared_preamble.py", ["--preamble-words", "10"], "must be at least 50"),
        ("prefill_costs.py", ["--lengths", "32;256"], "give whole numbers"),
        ("prefill_speed.py", ["--chunks", "-1"], "must be at least 0"),
        ("long_prefill.py", ["--lengths", "0"], "must be at least 1"),
        ("sampling_speed.py", ["--max-new-tokens", "1"], "must be at least 2"),
        ("step_costs.py", ["--repeats", "0"], "must be at least 1"),
        ("stop_latency.py", ["--at", "0.5,1.5"], "every fraction must be between 0 and 1"),
        ("structured_speed.py", ["--rounds", "x"], "'x' is not a whole number"),
        ("adaptive.py", ["--turns", "0"], "must be at least 1"),
        ("api_overhead.py", ["--tokens", "-3"], "must be at least 1"),
        ("engine_overhead.py", ["--cycles", "0"], "must be at least 1"),
        ("native_crashes.py", ["--load-workers", "-1"], "must be at least 0"),
        ("render_cost.py", ["--size", "0"], "must be at least 1"),
        ("sampling_cost.py", ["--history", "-1"], "must be at least 0"),
        ("sampling_exactness.py", ["--samples", "0"], "must be at least 1"),
        ("window_start.py", ["--runs", "0"], "must be at least 1"),
        ("engine_overhead.py", [".", "--smoke"], "is not an exported model folder"),
        ("adaptive.py", ["--prompts", "no-such-set"], "no built-in prompt set called"),
        ("fullsize.py", [], "give one of build, run, all, or --smoke"),
        ("ui_responsiveness.py", ["--tokens", "0"], "must be at least 1, got 0"),
        ("native_crashes.py", ["."], "is not an exported model folder"),
        ("native_crashes.py", ["--paths", "gpu"], "unknown path gpu"),
        ("mtp_chain_check.py", ["--model", ".", "--checkpoint", "."], "is not an exported"),
        ("window_start.py", ["--screen", "huge"], "--screen like 1600x1000"),
        ("plain_parity.py", ["."], "is not an exported model folder"),
        ("plain_parity.py", [".", "--tokens", "2"], "--tokens: must be at least 3"),
        ("download_resume.py", ["--model", "."], "is not an exported model folder"),
        ("download_resume.py", ["--seconds", "0"], "must be above 0 seconds"),
        ("graft_head.py", ["--export", "."], "is not an exported model with an MTP head"),
        ("graft_head.py", ["--positions", "2"], "must be at least 5, got 2"),
    ],
)
def test_bad_input_is_one_clear_line(
    script: str, args: list[str], message: str, tmp_path: Path
) -> None:
    result = run_script(script, args, tmp_path, timeout=120)
    assert result.returncode in (1, 2), result.stdout + result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.subprocess
@pytest.mark.gui
def test_ui_responsiveness(tmp_path: Path) -> None:
    out = run_smoke("ui_responsiveness.py", tmp_path)
    positive(numbers(rf"synthetic stream: {NUMBER} tokens at {NUMBER} tok/s in {NUMBER} s", out))
    heartbeats = numbers(rf"heartbeat p50 {NUMBER} ms, p99 {NUMBER} ms, max {NUMBER} ms", out, 2)
    positive(heartbeats)
    assert all(p50 <= p99 <= top for p50, p99, top in heartbeats), heartbeats
    numbers(rf"rendering lag at the end: {NUMBER} ms", out, 1)  # 0 ms is the ideal
    positive(numbers(rf"per-token handling early {NUMBER} ms, late {NUMBER} ms", out))
    positive(numbers(rf"demo model: {NUMBER} words in {NUMBER} s", out, 1))
    opened = numbers(
        rf"open a 200-message chat \({NUMBER} newest built\): median {NUMBER} s "
        rf"\(min {NUMBER}, max {NUMBER}\)",
        out,
        1,
    )
    positive(opened)
    _built, median, low, high = opened[0]
    assert low <= median <= high


@pytest.mark.subprocess
def test_step_overhead(tmp_path: Path) -> None:
    out = run_smoke("step_overhead.py", tmp_path)
    pattern = (
        rf"^(?:plain|n=\d) +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER}% +{NUMBER} +{NUMBER} +{NUMBER}x$"
    )
    rows = numbers(pattern, out, 3)
    for step, target, draft, _outside, per_step, direct, ratio in rows:
        assert target + draft <= step and per_step >= 1 and direct > 0 and ratio > 0, rows
    assert rows[0][2] == 0  # plain decoding drafts nothing


@pytest.mark.subprocess
def test_step_costs(tmp_path: Path) -> None:
    out = run_smoke("step_costs.py", tmp_path)
    costs, _end = json.JSONDecoder().raw_decode(out)
    values = [costs[k] for k in ("target_ms", "mtp_ms", "lm_head_ms", "draft_ms")]
    assert set(costs["verify_ms"]) == {"1", "2"}
    values += list(costs["verify_ms"].values())
    assert all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in values), costs
    assert costs["draft_ms"] == pytest.approx(costs["mtp_ms"] + costs["lm_head_ms"])


@pytest.mark.subprocess
def test_engine_overhead(tmp_path: Path) -> None:
    out = run_smoke("engine_overhead.py", tmp_path)
    assert "MTP n=1:" in out and "plain:" in out
    rates = rf"^\s+(?:bare|engine|process)\s+median\s+{NUMBER} tok/s \(min {NUMBER}, max {NUMBER}\)"
    positive(numbers(rates, out, 6))
    positive(numbers(rf"median ratio {NUMBER}", out, 4))
    hop = (
        rf"chunk batch hop, engine process -> window: median {NUMBER} ms, 95th percentile {NUMBER}"
    )
    positive(numbers(hop, out, 2))
    positive(numbers(rf"engine process {NUMBER} MiB", out, 2))
    positive(numbers(rf"load time \(MTP\): cold {NUMBER} s, with compile cache {NUMBER} s", out, 1))
    positive(numbers(rf"RSS across 2 load/generate/unload cycles: {NUMBER} MiB -> {NUMBER}", out))


@pytest.mark.subprocess
def test_api_overhead(tmp_path: Path) -> None:
    out = run_smoke("api_overhead.py", tmp_path)
    positive(numbers(rf"^\s+in process\s+median {NUMBER} ms$", out, 1))
    rows = numbers(
        rf"^\s+HTTP(?: streaming)?\s+median {NUMBER} ms, overhead median -?{NUMBER}", out, 2
    )
    positive([(row[0],) for row in rows])
    positive(numbers(rf"first streamed text after median {NUMBER} ms", out, 1))
    assert "same text on every path: True" in out


@pytest.mark.subprocess
def test_adaptive(tmp_path: Path) -> None:
    out = run_smoke("adaptive.py", tmp_path)
    settings = ["plain", "MTP n=1", "MTP n=2", "MTP n=3", "Auto (cold)", "Auto (bench-seeded)"]
    row = re.compile(
        rf"^\| ([^|]+) \| {NUMBER} \| {NUMBER} \| {NUMBER} \| (\d+)/(\d+) \| (\d+) \|$", re.M
    )
    for title in ("MTP wins", "MTP loses"):
        section = out.split(f"## {title}", 1)[1].split("\n## ", 1)[0]
        rows = {m.group(1): m.groups()[1:] for m in row.finditer(section)}
        assert list(rows) == settings, section
        for name, (tok_s, vs_plain, vs_best, same, turns, _switches) in rows.items():
            assert float(tok_s) > 0 and float(vs_plain) > 0 and float(vs_best) > 0, name
            assert same == turns == "2", f"{title} / {name}: answers differ from plain decoding"
        assert rows["plain"][1] == "1.000"


@pytest.mark.subprocess
@pytest.mark.export
@pytest.mark.timeout(600)  # a fresh clone builds and exports the 248k-vocabulary model (~3 min)
def test_fullsize(tmp_path: Path) -> None:
    """The tiny geometry (real 248k vocabulary): build + export once (cached in the fixture
    cache, a few minutes), then the benchmark and every part of the printed table."""
    out = run_smoke("fullsize.py", tmp_path, timeout=1800)
    row = re.compile(
        rf"^(agree|bigram)\s+(\S.*?)\s+{NUMBER} \({NUMBER}–{NUMBER}\)\s+{NUMBER}x"
        rf"(?: \({NUMBER}x–{NUMBER}x\))?\s+(\d+%|–)\s+{NUMBER}$",
        re.M,
    )
    rows = {(m.group(1), m.group(2)): m.groups()[2:] for m in row.finditer(out)}
    for variant in ("agree", "bigram"):
        labels = [label for v, label in rows if v == variant]
        assert {"MTP n=1", "MTP n=2"} <= set(labels), labels
        assert any(label.startswith("plain · ") for label in labels), labels
    for (variant, label), (med, low, high, speedup, s_low, s_high, accepted, step) in rows.items():
        speeds = [float(v) for v in (med, low, high, speedup, step)]
        assert all(math.isfinite(v) and v > 0 for v in speeds), (variant, label, speeds)
        assert float(low) <= float(med) <= float(high)
        if label.startswith("MTP"):
            assert s_low is not None and s_high is not None, (variant, label)
            assert accepted.endswith("%") and 0 <= int(accepted[:-1]) <= 100
            if variant == "agree":  # both heads emit all-zero logits: every draft matches
                assert int(accepted[:-1]) >= 90, (label, accepted)
        else:
            assert accepted == "–"
    positive(numbers(rf"baseline parity: agree {NUMBER} vs bigram {NUMBER} tok/s", out, 1))
    projection = rf"^n=[12]\s+{NUMBER}\s+" + r"\s+".join([rf"{NUMBER}x"] * 6) + "$"
    positive(numbers(projection, out, 2))
    positive(
        numbers(
            rf"target 1 token {NUMBER}; verify 2 tokens {NUMBER}, 3 tokens {NUMBER}; "
            rf"MTP draft call {NUMBER} \(MTP layer {NUMBER} \+ lm_head {NUMBER}\)",
            out,
            1,
        )
    )


@pytest.mark.subprocess
@pytest.mark.export
def test_mtp_chain_check(tmp_path: Path) -> None:
    """The demo model's drafts at depths 1-4 against the reference computed from its checkpoint
    (the script itself requires agreement up to near-ties); here every printed row again."""
    out = run_smoke("mtp_chain_check.py", tmp_path)
    pct = r"(\d+\.\d)%"
    row = re.compile(
        rf"^depth (\d) \| agreement by position ((?:{pct} ?)+) \(([\d/ ]+)\) \| acceptance "
        rf"{NUMBER} by position ([\d. ]+) \| target agreement {pct}$",
        re.M,
    )
    rows = {int(m.group(1)): m for m in row.finditer(out)}
    assert sorted(rows) == [1, 2, 3, 4], out
    for depth, m in rows.items():
        agreements = [float(v) for v in m.group(2).split("%") if v.strip()]
        counts = [tuple(int(x) for x in c.split("/")) for c in m.group(4).split()]
        assert len(agreements) == len(counts) == depth, m.group(0)
        assert all(compared > 0 and agreed <= compared for agreed, compared in counts)
        assert all(90.0 <= a <= 100.0 for a in agreements), m.group(0)
        assert 0.0 <= float(m.group(5)) <= 1.0
        assert len(m.group(6).split()) == depth
        assert m.group(7) == "100.0"
    chain = numbers(
        rf"depth >= 2 agreement with a post-norm chain {pct}, with a pre-norm chain {pct}; "
        rf"the two rules differ in (\d+)/(\d+) chains",
        out,
        1,
    )[0]
    assert chain[0] >= chain[1] and chain[3] > 0, chain
    assert "verdict: the decoder chains on the post-norm MTP output" in out or chain[2] == 0


@pytest.mark.subprocess
def test_prefill_costs(tmp_path: Path) -> None:
    out = run_smoke("prefill_costs.py", tmp_path)
    paths = ("MTP (app)", "plain (app)", "lookup (app)", "MTP (genai, image)",
             "plain (genai, image)")  # fmt: skip
    for path in paths:
        escaped = re.escape(path)
        row = rf"^\| {escaped} \[(?:app|genai)\] \| (-?\d+\.\d) \| (-?\d+\.\d) \| "
        row += rf"{NUMBER} ms / {NUMBER} ms \| {NUMBER} \|$"
        found = [m.groups() for m in re.finditer(row, out, re.M)]
        assert len(found) == 1, (path, out)
        first, warm, switch = (float(v) for v in found[0][2:])
        assert first > 0 and warm > 0 and switch > 0, (path, found)
        cost = rf"demo: {escaped} first use costs (-?\d+\.\d+)x the model's load time"
        (share,) = [float(m.group(1)) for m in re.finditer(cost, out)]
        if "genai" in path:  # opens a pipeline on its first turn; the app's decoder is loaded
            assert share > 0, (path, share)
    positive(numbers(rf"demo: model load {NUMBER} s", out, 1))
    # A ratio needs both slopes above the noise. The app's paths prefill the demo model's
    # tokens in microseconds each, so their lines may say so instead of printing a ratio of
    # noise (one printed -0.74x); genai's image pipeline is slower (1.8-11x in runs here).
    ratio = r"demo: plain \(genai, image\) prefill per token = {}x MTP \(app\)"
    positive(numbers(ratio.format(NUMBER), out, 1))
    for path in ("plain (app)", "lookup (app)"):
        told = rf"^demo: {re.escape(path)} prefill per token"
        told += rf"(?: = {NUMBER}x MTP \(app\)|: too small to tell from the noise here)$"
        assert len(re.findall(told, out, re.M)) == 1, (path, out)


@pytest.mark.subprocess
def test_methods_per_workload(tmp_path: Path) -> None:
    out = run_smoke("methods_per_workload.py", tmp_path)
    rows = numbers(
        rf"^(?:list|edit): MTP {NUMBER}x, lookup {NUMBER}x, lookup/MTP {NUMBER}x, winner ",
        out,
        2,
    )
    positive(rows)
    for mtp, lookup, ratio in rows:  # lookup / MTP is per run, so near their quotient
        assert 0.25 * lookup / mtp <= ratio <= 4 * lookup / mtp, (mtp, lookup, ratio)
    assert re.search(r"^overall winner: (plain|MTP n=\d|prompt lookup K=4) \(", out, re.M), out


@pytest.mark.subprocess
def test_native_crashes(tmp_path: Path) -> None:
    """2 load + generate cycles per path in child processes under load; the smoke run injects
    one SIGSEGV into the app decoder's second cycle, which must be counted as a crash at
    generate while every other cycle completes."""
    out = run_smoke("native_crashes.py", tmp_path)
    paths = ("decoder", "genai-plain", "genai-mtp", "lookup", "vision")
    for path in paths:
        crashes = "1 SIGSEGV at generate" if path == "decoder" else "0"
        row = rf"^\| {path} \| 2 \| (\d) \| {re.escape(crashes)} \| 0 \| 0 \| (?:\d|-) \| 0 \| "
        row += rf"{NUMBER} \| {NUMBER} \|$"
        found = [m.groups() for m in re.finditer(row, out, re.M)]
        assert len(found) == 1, (path, out)
        assert int(found[0][0]) == (1 if path == "decoder" else 2), (path, found)
        assert float(found[0][1]) > 0 and float(found[0][2]) > 0, (path, found)
    assert "first crash on decoder:\nFatal Python error: Segmentation fault" in out, out


@pytest.mark.subprocess
@pytest.mark.gui
def test_window_start(tmp_path: Path) -> None:
    out = run_smoke("window_start.py", tmp_path)
    bare = numbers(
        rf"^bare QMainWindow\s+median {NUMBER} s \(min {NUMBER}, max {NUMBER}\)$", out, 1
    )
    positive(bare)
    starts = numbers(
        rf"^app, (?:fresh|restored) profile\s+median {NUMBER} s \(min {NUMBER}, max {NUMBER}\), "
        rf"{NUMBER}x the bare window$",
        out,
        2,
    )
    positive(starts)
    for median, low, high, _ratio in [*starts, (*bare[0], 1.0)]:
        assert low <= median <= high
    cpu = numbers(
        rf"^app, (?:fresh|restored) profile CPU\s+median {NUMBER} s \(min {NUMBER}, max {NUMBER}\)"
        rf", {NUMBER}x the bare window$",
        out,
        2,
    )
    positive(cpu)
    placed = numbers(
        rf"window {NUMBER}x{NUMBER} at \({NUMBER}, {NUMBER}\) on the 1600x1000", out, 2
    )
    for width, height, left, top in placed:
        assert left + width <= 1600 and top + height <= 1000
    assert (
        len(re.findall(r"^target \(under 1\.0 s, median\), .*: (?:met|NOT met)$", out, re.M)) == 2
    )
    positive(numbers(rf"imports before the window: {NUMBER} ms in all", out, 1))


@pytest.mark.subprocess
def test_prefill_speed(tmp_path: Path) -> None:
    out = run_smoke("prefill_speed.py", tmp_path)
    for path in ("genai SDPA bf16", "genai PA f32", "app bf16", "app f32 chunk 64"):
        row = rf"^{re.escape(path)} +{NUMBER} tok/s +{NUMBER}x +{NUMBER} tok/s +{NUMBER}x"
        positive(numbers(row, out, 1))


@pytest.mark.subprocess
def test_sampling_cost(tmp_path: Path) -> None:
    out = run_smoke("sampling_cost.py", tmp_path, timeout=300)
    rows = numbers(rf"^  .+? +{NUMBER} ms/row median, {NUMBER} ms p90 \(kept {NUMBER}\)", out, 8)
    positive(rows)
    assert all(median <= p90 for median, p90, _kept in rows), rows
    steps = numbers(rf"^speculative step at depth (\d) .*: {NUMBER} ms median, {NUMBER} ms p90, "
                    rf"{NUMBER} drafts accepted per step", out, 2)  # fmt: skip
    assert [depth for depth, *_ in steps] == [1, 3]
    assert all(accepted <= depth for depth, _m, _p, accepted in steps), steps


@pytest.mark.subprocess
def test_sampling_exactness(tmp_path: Path) -> None:
    """Every case's row on the demo model: p-values in [0, 1], acceptance for the MTP cases,
    and the joint's chi-squared line (150 samples: the verdicts belong to the real run)."""
    out = run_smoke("sampling_exactness.py", tmp_path)
    assert "plain sampling's joint of 3 tokens: 216 outcomes (enumerated)" in out, out
    p = r"(\d+(?:\.\d+)?(?:e-?\d+)?|-)"
    for case in ("plain", "MTP n=1", "MTP n=2", "MTP n=3", "biased MTP n=1"):
        row = re.search(rf"^{re.escape(case)} +{p} +{p} +{p} +{p} +(\S+) +{NUMBER}$", out, re.M)
        assert row is not None, (case, out)
        values = [float(v) for v in row.groups()[:4] if v != "-"]
        assert values and all(0.0 <= v <= 1.0 for v in values), row.group(0)
        assert row.group(1) != "-", row.group(0)  # the joint is always tested
        assert (row.group(5) == "-") == (case == "plain"), row.group(0)
    numbers(r"^  joint: chi2 (\d+\.\d), dof (\d+), p = \S+ \((\d+) categories", out, 5)


@pytest.mark.subprocess
def test_sampling_speed(tmp_path: Path) -> None:
    out = run_smoke("sampling_speed.py", tmp_path)
    for mode in ("greedy", "sampled"):
        for name in ("plain (app)", "plain (genai)", "MTP n=1", "MTP n=2", "MTP n=3"):
            row = rf"^{re.escape(name)} +{mode} +{NUMBER} +(?:{NUMBER}%|-) +(\d+)$"
            found = re.search(row, out, re.M)
            assert found is not None and float(found.group(1)) > 0, (name, mode, out)
            assert (found.group(2) is None) == name.startswith("plain"), found.group(0)
    depths = numbers(rf"^MTP n=(\d) +{NUMBER}x +{NUMBER}x +{NUMBER}$", out, 3)
    positive(depths)
    assert [int(d) for d, *_ in depths] == [1, 2, 3]
    for _depth, greedy, sampled, ratio in depths:
        # The printed speed-ups are rounded to 0.01: their quotient can be a few % off.
        assert ratio == pytest.approx(sampled / greedy, rel=0.05, abs=0.02)
    assert re.search(
        r"^best sampled depth: MTP n=\d, .* ratio \d+\.\d\d \((meets|misses)", out, re.M
    )


@pytest.mark.subprocess
def test_shared_preamble(tmp_path: Path) -> None:
    out = run_smoke("shared_preamble.py", tmp_path)
    rounds = numbers(rf"^round (\d+): new task TTFT {NUMBER} s \((\d+) of (\d+) reused\)", out, 2)
    assert [int(r[0]) for r in rounds] == [1, 2]
    assert all(0 < reused < prompt for _n, _t, reused, prompt in rounds)
    bound = rf"^bound: 1\.5 x {NUMBER} s \(the new tokens' own prefill\) \+ 0\.3 s = {NUMBER} s"
    positive(numbers(bound, out, 1))
    assert "every new task answered as the cold engine: True" in out


@pytest.mark.subprocess
def test_multi_turn(tmp_path: Path) -> None:
    out = run_smoke("multi_turn.py", tmp_path)
    turns = numbers(rf"^turn (\d+): (\d+) prompt tokens, (\d+) reused, TTFT {NUMBER} s$", out, 4)
    assert [int(t[0]) for t in turns] == [1, 2, 3, 4]
    assert turns[0][2] == 0 and all(0 < reused < prompt for _n, prompt, reused, _t in turns[1:])
    assert "answers with reuse identical to the cold answer: yes" in out
    positive(numbers(rf"^cold re-prefill of the whole history: TTFT {NUMBER} s", out, 1))
    numbers(rf"^regenerate: TTFT {NUMBER} s \(median\), {NUMBER}x faster than cold", out, 1)
    edit = rf"^edit the last question \(not in the bound: .*\): TTFT {NUMBER} s \(median\)"
    numbers(edit, out, 1)
    faults = rf"^page faults before the first token \(medians\): follow-up {NUMBER}k, regenerate"
    numbers(faults, out, 1)
    numbers(r"^bound 1\.5 x new-tokens prefill \+ 0\.3 s = ([\d.]+) s: \w[\w ]* (?:met|NOT met)$",
            out, 3)  # fmt: skip
    positive(numbers(rf"^this machine: a new process's first touch of 256 MB took {NUMBER} us per",
                     out, 1))  # fmt: skip


@pytest.mark.subprocess
def test_long_prefill(tmp_path: Path) -> None:
    out = run_smoke("long_prefill.py", tmp_path)
    rows = numbers(rf"^\s+(?:64|256)\s+(?:auto|96)\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+"
                   rf"{NUMBER}\s+{NUMBER}$", out, 4)  # fmt: skip
    assert all(row[1] > 0 and row[3] > 0 for row in rows), rows  # tokens/s, the model's MB
    assert "long_prefill.py smoke check passed" in out


@pytest.mark.subprocess
def test_context_steps(tmp_path: Path) -> None:
    out = run_smoke("context_steps.py", tmp_path)
    for length in ("64", "256"):
        assert f"## context {length} tokens" in out, out
    rows = numbers(rf"^\| (?:plain decoding|MTP n=[12]) \| {NUMBER} \| {NUMBER}x \| {NUMBER} \| "
                   rf"{NUMBER} \| {NUMBER}x \|$", out, 6)  # fmt: skip
    positive(rows)


@pytest.mark.subprocess
def test_continuation_prefill(tmp_path: Path) -> None:
    out = run_smoke("continuation_prefill.py", tmp_path)
    rows = numbers(rf"^\s+600\s+40 \|\s+{NUMBER}\s+{NUMBER}\s+{NUMBER} \|\s+{NUMBER}x \| "
                   rf"{NUMBER}x$", out, 1)  # fmt: skip
    positive(rows)
    numbers(rf"^continuation graph compiled in {NUMBER} s; process memory [+-]{NUMBER} MB after "
            rf"its first call \(at 600 kept tokens\); copying caches out and back took "
            rf"{NUMBER} % of its calls' time$", out, 1)  # fmt: skip
    assert "smoke check passed" in out


@pytest.mark.subprocess
def test_stop_latency(tmp_path: Path) -> None:
    out = run_smoke("stop_latency.py", tmp_path)
    full = numbers(rf"^(?:cold prefill|follow-up) .*: {NUMBER} s to its first token$", out, 2)
    stops = numbers(rf"^  cancel at 30%: stopped, ended {NUMBER} ms after the cancel; running "
                    rf"to its end would have taken {NUMBER} s more$", out, 2)  # fmt: skip
    positive(full)
    positive(stops)
    assert re.search(r"^  kept after the stop: 1,000 tokens ", out, re.M), out


@pytest.mark.subprocess
def test_plain_parity(tmp_path: Path) -> None:
    out = run_smoke("plain_parity.py", tmp_path)
    times = numbers(rf"^  (?:openvino-genai|app decoder|direct) +median {NUMBER}  "
                    rf"\(quartiles {NUMBER}-{NUMBER}\)$", out, 3)  # fmt: skip
    ratios = numbers(rf"^app decoder speed / (?:openvino-genai|direct) speed: median {NUMBER} "
                     rf"of 3 triples \(quartiles {NUMBER}-{NUMBER}\); the app decoder faster "
                     r"in [0-3]$", out, 2)  # fmt: skip
    lockstep = numbers(rf"^lockstep, 24 steps each: app decoder speed / direct speed: median "
                       rf"{NUMBER} \(quartiles {NUMBER}-{NUMBER}\); same tokens: (?:yes|no)$",
                       out, 1)  # fmt: skip
    positive(times)
    positive(ratios)
    positive(lockstep)


@pytest.mark.subprocess
def test_structured_speed(tmp_path: Path) -> None:
    out = run_smoke("structured_speed.py", tmp_path)
    assert re.search(r"^answer: \d+ tokens, valid JSON: yes$", out, re.M), out
    rows = numbers(rf"^\| (?:plain|MTP n=[12]) \| {NUMBER} \| {NUMBER}x \| {NUMBER} % \| "
                   r"(?:\d+ %|-) \|$", out, 3)  # fmt: skip
    assert all(row[0] > 0 and row[1] > 0 for row in rows)
    assert "MTP answers identical to plain constrained decoding: yes" in out


@pytest.mark.subprocess
def test_download_resume(tmp_path: Path) -> None:
    """The demo export trickled from the hub stand-in, `models download` SIGKILLed at 3 seeded
    random points, then run to the end: every restart resumed, the folder is identical."""
    out = run_smoke("download_resume.py", tmp_path)
    row = re.compile(
        r"^kill +(\d+) after +\d+\.\d+ s: ([\d,]+) bytes on disk \((\d+) whole files, ([\d,]+) "
        r"in a \.part[^)]*\); the restart asked for \S+ from byte ([\d,]+)"
        r"( \(a new file; the whole ones kept\))?: resumed$",
        re.M,
    )
    found = list(row.finditer(out))
    kills = [[int(g.replace(",", "")) for g in m.groups()[:5]] for m in found]
    assert [k[0] for k in kills] == [1, 2, 3], out
    on_disk = [k[1] for k in kills]
    assert 0 < on_disk[0] < on_disk[1] < on_disk[2], on_disk  # every run added bytes
    for match, (_n, _disk, _whole, part, start) in zip(found, kills, strict=True):
        # A .part is continued from its size; after whole files only, a new file from 0.
        assert start == (0 if match.group(6) else part), match.group(0)
    last = re.search(
        r"^last run: [\d.]+ s at full speed, fetched ([\d,]+) bytes, resumed ([\d,]+) "
        r"\(the last kill left ([\d,]+)\)$",
        out,
        re.M,
    )
    assert last is not None and last.group(2) == last.group(3), out
    assert f"{on_disk[-1]:,}" == last.group(2)
    numbers(r"^bytes served over all runs: [\d,]+ \((\d\.\d+)x the model\)$", out, 1)
    assert "3 kills, 3 resumes, byte-identical: yes" in out


@pytest.mark.subprocess
def test_graft_head(tmp_path: Path) -> None:
    """The demo export's head grafted from a sharded BF16 copy of its checkpoint on the hub
    stand-in: the least bytes a graft can read, and the same drafts as the exported head."""
    out = run_smoke("graft_head.py", tmp_path)
    read = re.search(
        r"bytes read: ([\d,]+) = ([\d.]+) % of the checkpoint, in (\d+) range requests; the "
        r"least a graft can read: ([\d,]+) \(\+([\d,]+)\); the hub sent ([\d,]+) in",
        out,
    )
    assert read is not None, out
    got, _share, requests, least, extra, sent = (float(g.replace(",", "")) for g in read.groups())
    assert got == least + extra and extra <= 64 * 1024 and sent == got and requests >= 3
    positive(numbers(rf"peak RSS of the graft process: {NUMBER} MB", out, 1))
    positive(numbers(rf"wall time: {NUMBER} s for the process \({NUMBER} s in the graft\)", out, 1))
    value = r"(\d+(?:\.\d+)?(?:e[+-]\d+)?)"
    scale = numbers(rf"the export's head \(FP16 \(100 %\)\): max \|x\| {value}, RMS", out, 1)
    diffs = numbers(rf"^  graft .+\]: max \|diff\| {value} \(positions 0-4: {value}\), mean "
                    rf"{value}$", out, 3)  # fmt: skip
    assert diffs[-1][0] <= 1e-3 * scale[0][0], diffs  # fp16 graft vs fp16 export, same weights
    assert all(early <= whole for whole, early, _mean in diffs), diffs
    depths = numbers(
        r"^  n=(\d): export head MTP == plain: yes, acceptance (\d\.\d+); graft \(fp16\) MTP "
        r"== plain: yes, acceptance (\d\.\d+); same MTP tokens: yes$",
        out,
        3,
    )
    assert [d[0] for d in depths] == [1, 2, 3]
    assert all(0 <= a <= 1 and 0 <= b <= 1 for _d, a, b in depths), depths
