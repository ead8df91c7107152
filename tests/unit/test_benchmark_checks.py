"""The benchmark scripts' smoke checks (benchmarks/_smoke.py, fullsize.smoke_problems) accept
sane results and name every insane one; the scripts themselves run in
tests/integration/test_benchmark_scripts.py."""

from __future__ import annotations

import copy
import importlib.util
import math
import sys
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod
from tests.conftest import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


smoke = load("_smoke")


@given(st.one_of(st.floats(), st.integers(), st.none(), st.booleans(), st.text(max_size=3)))
def test_positive_accepts_exactly_finite_numbers_above_zero(value: object) -> None:
    check = smoke.SmokeCheck("x.py")
    check.positive("speed", value)
    sane = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )
    assert check.problems == ([] if sane else [f"speed is {value!r}, expected a finite "
                                                "positive number"])  # fmt: skip


@given(st.floats())
def test_fraction_accepts_exactly_zero_to_one(value: float) -> None:
    check = smoke.SmokeCheck("x.py")
    check.fraction("acceptance", value)
    assert (not check.problems) == (0 <= value <= 1)


def test_finish_reports_problems_and_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    check = smoke.SmokeCheck("x.py")
    check.positive("speed", 3.0)
    check.require(True, "never shown")
    assert check.finish() == 0
    assert capsys.readouterr().out == "x.py smoke check passed (2 checks)\n"
    check.positive("ttft", math.nan)
    check.require(False, "no rows")
    assert check.finish() == 1
    err = capsys.readouterr().err
    assert "x.py smoke check FAILED" in err and "ttft is nan" in err and "- no rows" in err


# --- fullsize.py ---------------------------------------------------------------------------


def mode(depth: int | None, speed: float, decoder: str = "app") -> dict[str, Any]:
    label = "plain · openvino-genai" if depth is None else f"MTP n={depth}"
    if decoder == "genai" and depth is not None:
        label += " · openvino-genai"
    method = PLAIN if depth is None else DecodingMethod.mtp(depth)
    return {
        "method": method.to_record(),
        "label": label,
        "decode_tokens_per_s": {"median": speed, "min": speed * 0.9, "max": speed * 1.1},
        "speedup": None if depth is None else {"median": 1.2, "min": 1.1, "max": 1.3},
        "acceptance_rate": None if depth is None else 1.0,
        "step_ms": 10.0 * (depth or 1),
    }


def report() -> dict[str, Any]:
    return {
        "baseline": {"label": "plain · openvino-genai"},
        "settings": {"depths": [1, 2]},
        "modes": [mode(None, 100.0), mode(1, 120.0), mode(2, 130.0)],
        "comparison": [mode(1, 110.0, "genai"), mode(2, 115.0, "genai")],
    }


STEPS = {
    "target_ms": 10.0,
    "verify_ms": {"1": 11.0, "2": 12.0},
    "mtp_ms": 1.0,
    "lm_head_ms": 3.0,
    "draft_ms": 4.0,
}


@pytest.fixture(scope="module")
def fullsize() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))  # fullsize imports step_costs beside it
    try:
        return load("fullsize")
    finally:
        sys.path.remove(str(BENCHMARKS))


def problems(fullsize: ModuleType, reports: dict[str, Any], steps: Any = STEPS) -> list[str]:
    result: list[str] = fullsize.smoke_problems(reports, steps, fullsize.table(reports, steps))
    return result


def test_fullsize_smoke_accepts_a_sane_table(fullsize: ModuleType) -> None:
    assert problems(fullsize, {"agree": report(), "bigram": report()}) == []


def damaged(variant: str, index: int, **fields: Any) -> Any:
    return lambda reports: reports[variant]["modes"][index].update(fields)


NAN_SPEED = {"median": math.nan, "min": 1.0, "max": 2.0}


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (damaged("agree", 1, decode_tokens_per_s=NAN_SPEED), "agree / MTP n=1 decode tok/s median"),
        (damaged("bigram", 0, step_ms=0.0), "bigram / plain · openvino-genai ms/step is 0.0"),
        (damaged("agree", 2, acceptance_rate=0.5), "acceptance 50% on the agree variant"),
        (damaged("bigram", 2, acceptance_rate=1.5), "bigram / MTP n=2: acceptance 1.5"),
        (lambda r: r["bigram"]["modes"].pop(), "bigram: modes for depths [None, 1]"),
        (lambda r: r["agree"].update(comparison=[]), "agree: no comparison rows"),
        (lambda r: r.pop("bigram"), "variants benchmarked: ['agree']"),
    ],
)
def test_fullsize_smoke_names_what_is_wrong(
    fullsize: ModuleType, damage: Any, expected: str
) -> None:
    reports = {"agree": report(), "bigram": report()}
    damage(reports)
    found = problems(fullsize, reports)
    assert any(expected in p for p in found), found


def test_fullsize_smoke_needs_step_costs_and_every_table_part(fullsize: ModuleType) -> None:
    reports = {"agree": report(), "bigram": report()}
    assert "no direct step costs measured" in problems(fullsize, reports, None)
    bad_steps = copy.deepcopy(STEPS)
    bad_steps["verify_ms"]["2"] = -1.0
    assert any("verify_ms[2] is -1.0" in p for p in problems(fullsize, reports, bad_steps))
    text = fullsize.table(reports, STEPS).replace("baseline parity", "parity")
    found = fullsize.smoke_problems(reports, STEPS, text)
    assert found == ["table has no 'baseline parity: agree' line"]
    lines = fullsize.table(reports, STEPS).splitlines()
    gone = ("bigram   MTP n=1   ", "n=2")  # the row of the app decoder's n=1, not genai's
    text = "\n".join(line for line in lines if not line.startswith(gone))
    found = fullsize.smoke_problems(reports, STEPS, text)
    assert found == ["table has no row for bigram / MTP n=1", "table has no projection row for n=2"]
    # Nothing benchmarked is a problem to report, not a crash.
    assert "variants benchmarked: [], expected ['agree', 'bigram']" in fullsize.smoke_problems(
        {}, STEPS, ""
    )
