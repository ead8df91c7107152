"""The real window, driven through chat, validate, benchmark, a killed run and export, reporting
which heavy modules its own process imported.

Run as `python -m tests.gui.window_actions CHECKPOINT` with QWEN_MTP_DESKTOP_HOME set (a fresh
profile: the chat opens the demo model). It boots as `app.run_gui` does (telemetry blocked,
settings, logging, `MainWindow` offscreen, its panels built), then does what a user does, each
step waiting for its result:

1. a chat turn on the demo model;
2. Validate and Benchmark from the Benchmark panel (the demo prompt set, 16 tokens, depths 1-2);
3. a validation whose process is killed mid-run, then another chat turn (the window is usable);
4. an export of CHECKPOINT (INT8, MTP head INT4) through the Export panel's pages.

Its last stdout line is one JSON object: what each step gave and `heavy`, the heavy modules
(OpenVINO, the export toolkit) found in sys.modules. Everything is the app's own code.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

HEAVY = ("openvino", "openvino_genai", "openvino_tokenizers", "torch", "transformers", "optimum")
STEP_TIMEOUT_S = 300.0


def wait_until(what: str, done: Callable[[], bool], timeout_s: float = STEP_TIMEOUT_S) -> None:
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        QApplication.processEvents()
        time.sleep(0.01)


def main() -> int:
    checkpoint = Path(sys.argv[1])
    from qwen_mtp_desktop.core.system.privacy import block_telemetry

    block_telemetry()
    from qwen_mtp_desktop.core.files.paths import app_paths, demo_model_dir
    from qwen_mtp_desktop.core.settings.store import SettingsStore
    from qwen_mtp_desktop.core.system.logs import setup_logging

    paths = app_paths().ensure()
    settings = SettingsStore(paths.settings_file)
    setup_logging(paths.log_file, debug=False)

    from PySide6.QtWidgets import QApplication

    from qwen_mtp_desktop.ui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    window = MainWindow(paths, settings)
    window.resize(1280, 800)
    window.show()
    window.build_panels()
    chat, bench, export = window.chat, window.bench, window.export_panel
    result: dict[str, Any] = {"window_pid": os.getpid()}

    finished: list[object] = []
    window.engine_process.finished.connect(lambda _rid, stats: finished.append(stats))

    def chat_turn(prompt: str) -> str:
        wait_until("the chat's model", lambda: chat.store_ready and chat._loaded is not None)
        wait_until("an idle chat", lambda: not chat.generating)
        count = len(finished)
        chat.composer.set_text(prompt)
        chat.composer.send_button.click()
        wait_until("the answer", lambda: len(finished) > count and not chat.generating)
        return str(getattr(finished[-1], "finish_reason", ""))

    chat.settings_panel.max_tokens_spin.setValue(24)
    result["chat"] = chat_turn("Count from 1 to 5.")

    # Validate and benchmark the demo model from the Benchmark panel.
    demo = demo_model_dir()
    outcomes: list[tuple[str, Any]] = []
    bench.job.finished.connect(lambda r: outcomes.append(("finished", r.report)))
    bench.job.failed.connect(lambda e: outcomes.append(("failed", e)))
    bench.job.cancelled.connect(lambda: outcomes.append(("cancelled", None)))
    bench.tokens_spin.setValue(16)
    bench.runs_spin.setValue(1)
    bench.lookup_check.setChecked(False)
    for check in bench.depth_checks[2:]:
        check.setChecked(False)
    assert bench.validate_model(demo, prompt_set="demo")
    wait_until("the validation", lambda: len(outcomes) == 1 and not bench.job.running)
    what, report = outcomes[-1]
    result["validate"] = [what, report["summary"]["all_identical"] if what == "finished" else ""]
    assert bench.benchmark_model(demo)
    wait_until("the benchmark", lambda: len(outcomes) == 2 and not bench.job.running)
    what, report = outcomes[-1]
    result["bench"] = [what, len(report["modes"]) if what == "finished" else str(report)]

    # A run whose process dies: a clear error in the panel, and the window goes on.
    killed: list[int] = []

    def kill_mid_run(step: Any) -> None:
        pid = bench.job.pid
        if "plain decoding" in step.message and not killed and pid is not None:
            killed.append(pid)
            psutil.Process(pid).kill()  # what the out-of-memory killer does

    bench.job.progress.connect(kill_mid_run)
    assert bench.validate_model(demo, prompt_set="demo")
    wait_until("the killed validation", lambda: len(outcomes) == 3 and not bench.job.running)
    bench.job.progress.disconnect(kill_mid_run)
    what, error = outcomes[-1]
    result["killed"] = [what, getattr(error, "code", ""), bench.status_label.text(), killed]
    result["chat_after_kill"] = chat_turn("Count from 1 to 3.")
    result["chat_engine_pid"] = window.engine_process.pid

    # An export through the Export panel's pages.
    window.show_panel("Export")
    export.folder_edit.setText(str(checkpoint))
    export.folder_radio.setChecked(True)
    export.run_check()
    wait_until("the export check", lambda: export.check_busy.isHidden(), 60)
    export.options_button.click()
    export.format_radios["int8"].setChecked(True)
    export.mtp_combo.setCurrentIndex(export.mtp_combo.findData("int4"))
    export.group_combo.setCurrentIndex(export.group_combo.findData(16))
    export.export_button.click()
    wait_until("the export", lambda: export.last_outcome is not None, 600)
    outcome = export.last_outcome
    assert outcome is not None
    result["export"] = [outcome.status, outcome.reason() if outcome.status != "succeeded" else ""]

    result["heavy"] = sorted({m.split(".")[0] for m in sys.modules} & set(HEAVY))
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    window.close()
    app.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
