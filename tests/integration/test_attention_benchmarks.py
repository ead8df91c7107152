"""The attention-kernel benchmarks of issue 41 item 1 in their `--smoke` mode, as real
subprocesses (the pattern of test_benchmark_scripts.py): `attention_kernels.py` (synthetic
attention graphs, every path's output against a float64 reference) and `paged_target.py` (the
demo model's target graph with PagedAttention against the stateful one)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.integration.test_benchmark_scripts import NUMBER, numbers, positive, run_script

pytestmark = pytest.mark.subprocess
#: A table row's cells after its name: ms for q = 1..4, then the ratios for q = 2..4.
CELLS = rf"{NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER}x \| {NUMBER}x \| {NUMBER}x \|"


def smoke(script: str, cwd: Path) -> str:
    result = run_script(script, ["--smoke"], cwd, timeout=600)
    output = f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.returncode == 0, f"{script} --smoke exited {result.returncode}\n{output}"
    assert "Traceback" not in result.stderr, output
    assert f"{script} smoke check passed" in result.stdout, output
    return result.stdout


def test_attention_kernels(tmp_path: Path) -> None:
    out = smoke("attention_kernels.py", tmp_path)
    assert "fused into ScaledDotProductAttentionWithKVCache: yes" in out, out
    for past in ("64", "100"):
        assert f"## past {past} tokens" in out, out
    paths = r"(?:stateful u8|paged u8|paged bf16|paged bf16 split|sdpa bf16)"
    positive(numbers(rf"^\| {paths} \| {CELLS}$", out, 10))
    lines = re.findall(r"^largest \|output - float64 reference\| over q: (.*)$", out, re.M)
    assert len(lines) == 2, out
    for line in lines:
        errors = dict(re.findall(rf"({paths}) {NUMBER}", line))
        assert len(errors) == 5 and all(float(e) < 0.05 for e in errors.values()), line


def test_paged_target(tmp_path: Path) -> None:
    out = smoke("paged_target.py", tmp_path)
    verify = re.findall(
        r"^(stateful u8|stateful f32|paged \w+(?: split)?): 4-token verification vs 4 single "
        r"steps: .*argmax equal (\d)/4, bit-identical: (yes|no)$",
        out,
        re.M,
    )
    # Exact numerics: stateful, u8, f32 (+ split); defaults: stateful, u8, bf16 (+ split).
    assert len(verify) == 8, out
    assert verify[0][0] == "stateful f32" and verify[4][0] == "stateful u8", verify
    versus = numbers(
        rf"^paged \w+ \(\w+ cache\) vs stateful (?:u8|f32): max \|diff\| {NUMBER}(?:e-\d+)? of the "
        r"largest logit, argmax equal in (\d+)/(\d+) rows; residual stream max \|diff\| "
        rf"{NUMBER}(?:e-\d+)? of its largest \((\d+) positions\)$",
        out,
        4,
    )
    assert all(rows > 0 and positions > rows for _d, _s, rows, _r, positions in versus), versus
    graphs = r"(?:stateful u8|paged u8|paged bf16|paged bf16 split)"
    positive(numbers(rf"^\| {graphs} \| {CELLS}$", out, 8))
