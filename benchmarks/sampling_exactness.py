"""Exact speculative sampling, the large version of tests/integration/test_speculative_sampling.py
(issue 26): for a fixed prompt, the first three tokens sampled with MTP at depths 1-3 and with
plain sampling, against the joint distribution plain sampling defines (enumerated from the
model's own logits through the same processing, tests.exactness), and a deliberately biased
sampler (on rejection it draws from p instead of the residual) shown failing.

    .venv/bin/python benchmarks/sampling_exactness.py [MODEL_DIR ...] [--samples 20000]
                                                      [--model-samples 1000] [--smoke]

The demo model (resources/demo-model/openvino) always runs, with `--samples` per case; each
MODEL_DIR given (e.g. the full-size bigram variant built by fullsize.py) runs with
`--model-samples` per case and its own settings (MODEL_SETTINGS: a full-size variant's logits
are much sharper than the demo's; at Qwen's recommended temperature 0.7 / top-p 0.8 / top-k 20
the bigram variant's first three tokens have a single outcome, nothing to test, so the
temperature is raised until the joint spreads over enough categories). Printed per model and
case: the chi-squared goodness of fit of
the three tokens' joint and of each position's own distribution (p-values; categories with an
expected count below 5 pooled), and the acceptance of the drafts. A correct case passes at
p > 0.01 on the joint; the biased sampler must fail (p < 1e-4) on the demo model. Exit 1 when
either does not hold. Seeds are 0..N-1 per case, so a run reproduces exactly.
`--smoke`: 150 samples per case on the demo model; checks the numbers are sane.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Hashable, Mapping
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _smoke import SmokeCheck

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.engine import EXACT_NUMERICS
from tests.exactness import (
    POEM_PROMPT,
    POEM_SETTINGS,
    TOKENS,
    exact_joint,
    marginal,
    marginal_counts,
    prompt_ids,
    sample_counts,
    skipping_residual,
)
from tests.statistics import ChiSquared, goodness_of_fit

#: Full-size models (see the docstring): the bigram variant's joint of three tokens has 27
#: outcomes at these settings, about ten with an expected count of 5 or more in 1,500 samples.
MODEL_SETTINGS = Sampling(temperature=8.0, top_k=3, repetition_penalty=1.2)
PASS_P = 0.01
BIASED_FAIL_P = 1e-4
CASES: list[tuple[str, DecodingMethod, Callable[[], AbstractContextManager[None]]]] = [
    ("plain", DecodingMethod.plain(), nullcontext),
    ("MTP n=1", DecodingMethod.mtp(1), nullcontext),
    ("MTP n=2", DecodingMethod.mtp(2), nullcontext),
    ("MTP n=3", DecodingMethod.mtp(3), nullcontext),
    ("biased MTP n=1", DecodingMethod.mtp(1), skipping_residual),
]


def fit(counts: Mapping[Hashable, int], probs: Mapping[Hashable, float]) -> ChiSquared | None:
    """The goodness of fit, or None when the distribution is too concentrated for this many
    samples (every category pooled into one: nothing to test)."""
    try:
        return goodness_of_fit(counts, probs)
    except ValueError:
        return None


def p_text(test: ChiSquared | None) -> str:
    return f"{test.p_value:.3g}" if test is not None else "-"


def run_model(
    model_dir: Path,
    samples: int,
    check: SmokeCheck | None,
    cases: list[str] | None = None,
    settings: Sampling = POEM_SETTINGS,
) -> list[str]:
    """Every case on one model; returns the problems (a correct case failing, the biased one
    passing on the demo model)."""
    print(f"\n== {model_dir} ({samples:,} samples per case, {settings.describe()})")
    decoder = AppDecoder(model_dir, "CPU", EXACT_NUMERICS)
    prompt = prompt_ids(model_dir, POEM_PROMPT)
    joint = exact_joint(decoder, prompt, settings, TOKENS)
    print(f"plain sampling's joint of {TOKENS} tokens: {len(joint)} outcomes (enumerated)")
    header = f"{'case':<16} {'joint p':>9} " + " ".join(
        f"{f'token {i + 1} p':>10}" for i in range(TOKENS)
    )
    print(header + f" {'accepted':>9} {'seconds':>8}")
    problems: list[str] = []
    for name, method, context in CASES:
        if cases is not None and name not in cases:
            continue
        started = time.perf_counter()
        with context():
            run = sample_counts(decoder, prompt, method, samples, settings, TOKENS)
        seconds = time.perf_counter() - started
        tests = [fit(run.counts, joint)]
        for position in range(TOKENS):
            tests.append(fit(marginal_counts(run.counts, position), marginal(joint, position)))
        accepted = run.accepted / run.drafted if run.drafted else None
        shown = f"{accepted:.1%}" if accepted is not None else "-"
        print(
            f"{name:<16} "
            + " ".join(f"{p_text(t):>{9 if i == 0 else 10}}" for i, t in enumerate(tests))
            + f" {shown:>9} {seconds:>8.1f}"
        )
        print(f"  joint: {tests[0] or 'too few samples to test'}")
        biased = name.startswith("biased")
        joint_p = tests[0].p_value if tests[0] is not None else math.nan
        if check is not None:
            check.require(run.samples == samples, f"{name}: {run.samples} samples")
            check.require(tests[0] is not None, f"{name}: no joint test")
            for test in tests:
                if test is not None:
                    check.fraction(f"{name} p-value", test.p_value)
            if method.uses_mtp_head:
                check.require(run.drafted > 0, f"{name}: no drafts")
        elif biased and model_dir == DEMO and not joint_p < BIASED_FAIL_P:
            problems.append(f"{model_dir.name}: the biased sampler passed (p {joint_p:.3g})")
        elif not biased and not joint_p > PASS_P:
            problems.append(f"{model_dir.name}: {name} failed (p {joint_p:.3g})")
    return problems


def main(argv: list[str] | None = None) -> int:
    from _args import at_least

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="*", type=Path, help="more model folders (full size)")
    parser.add_argument("--samples", type=at_least(1), default=20_000, help="per case, demo model")
    parser.add_argument(
        "--model-samples", type=at_least(1), default=1000, help="per case, MODEL_DIR"
    )
    parser.add_argument(
        "--cases",
        help="only these cases, comma-separated (e.g. 'MTP n=3,biased MTP n=1'; seeds are "
        "per case, so split runs give the same numbers as one)",
    )
    parser.add_argument(
        "--no-demo", action="store_true", help="only the MODEL_DIRs (the demo's cases are long)"
    )
    parser.add_argument("--smoke", action="store_true", help="150 samples, sanity checks")
    args = parser.parse_args(argv)
    if args.no_demo and (args.smoke or not args.models):
        print("error: --no-demo needs a MODEL_DIR and no --smoke", file=sys.stderr)
        return 2
    names = [name for name, _m, _c in CASES]
    cases = [c.strip() for c in args.cases.split(",")] if args.cases else None
    unknown = [c for c in cases or [] if c not in names]
    if unknown:
        print(f"error: unknown case {unknown[0]!r}; cases: {', '.join(names)}", file=sys.stderr)
        return 2
    for folder in args.models:
        if not (folder / "openvino_mtp_model.xml").is_file():
            print(f"error: {folder} is not an exported model with an MTP head", file=sys.stderr)
            return 2
    check = SmokeCheck("sampling_exactness.py") if args.smoke else None
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    problems = (
        [] if args.no_demo else run_model(DEMO, 150 if args.smoke else args.samples, check, cases)
    )
    if not args.smoke:
        for folder in args.models:
            problems += run_model(folder, args.model_samples, None, cases, MODEL_SETTINGS)
    if check is not None:
        return check.finish()
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print("all correct cases pass, the biased sampler fails" if not problems else "FAILED")
    return 1 if problems else 0


DEMO = Path(__file__).resolve().parents[1] / "resources" / "demo-model" / "openvino"

if __name__ == "__main__":
    sys.exit(main())
