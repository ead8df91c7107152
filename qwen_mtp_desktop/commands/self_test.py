"""`--self-test`: prove that this copy of the app can chat, without a window.

Loads the bundled demo model twice (plain and with its MTP head), decodes the `demo` prompt set
greedily in both modes (`core.measure.validate.run_validation`, exact numerics, no timing pass), and
passes when every output is identical and some drafted tokens were accepted. It prints one line
and exits 0 (passed) or 1 (failed). It works the same from source and from a PyInstaller bundle
(resources are found through `core.files.paths.resources_dir`, which knows `sys._MEIPASS`), so
`make package` runs it against the freshly built bundle. It writes nothing: no report is saved.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from qwen_mtp_desktop.commands import EXIT_FAILED, EXIT_OK

PROMPT_SET = "demo"
NUM_ASSISTANT_TOKENS = 1


@dataclass(frozen=True)
class SelfTestResult:
    passed: bool
    line: str


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def run_self_test(
    model_dir: Path | None = None, *, device: str = "CPU", max_new_tokens: int | None = None
) -> SelfTestResult:
    """Run the check; never raises for a failure of the app (it becomes the result line)."""
    started = time.perf_counter()
    try:
        from qwen_mtp_desktop.core.decoding.method import DecodingMethod
        from qwen_mtp_desktop.core.files.paths import demo_model_dir
        from qwen_mtp_desktop.core.measure.prompt_sets import load_prompt_set
        from qwen_mtp_desktop.core.measure.validate import run_validation
        from qwen_mtp_desktop.core.system.buildinfo import build_info

        model = model_dir or demo_model_dir()
        info = build_info()
        report = run_validation(
            model,
            load_prompt_set(PROMPT_SET),
            max_new_tokens=max_new_tokens,
            method=DecodingMethod.mtp(NUM_ASSISTANT_TOKENS),
            device=device,
            timing=False,
        )
    except Exception as exc:  # a self-test reports every failure as its one line
        return SelfTestResult(False, f"self-test FAILED: {_short(exc)}")
    elapsed = time.perf_counter() - started
    summary = report["summary"]
    acceptance = summary["acceptance_rate"]
    tokens = sum(result["baseline_tokens"] for result in report["results"])
    where = f"{info.kind} {info.app_version} (git {info.revision})"
    runtime = f"openvino {info.versions.get('openvino') or 'unknown'} on {device}"
    counts = f"{summary['identical_prompts']}/{summary['prompts']} prompts"
    problems: list[str] = []
    if not summary["all_identical"]:
        different = [r["prompt_id"] for r in report["results"] if not r["identical"]]
        problems.append(f"MTP output differs from plain decoding on {', '.join(different)}")
    if tokens == 0:
        problems.append("the demo model generated no tokens")
    if acceptance is None or acceptance <= 0:
        problems.append("no drafted token was accepted (acceptance 0 %)")
    accepted = "n/a" if acceptance is None else f"{acceptance:.1%}"
    details = (
        f"{counts} identical with and without MTP (n={NUM_ASSISTANT_TOKENS}), "
        f"acceptance {accepted}, {tokens} tokens, {elapsed:.1f} s; {where}; {runtime}"
    )
    if problems:
        return SelfTestResult(False, f"self-test FAILED: {'; '.join(problems)} ({details})")
    return SelfTestResult(True, f"self-test passed: {details}")


def main_self_test(device: str = "CPU") -> int:
    result = run_self_test(device=device)
    print(result.line, flush=True)
    return EXIT_OK if result.passed else EXIT_FAILED
