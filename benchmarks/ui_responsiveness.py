"""Chat UI responsiveness while answers stream, and the time to open a long chat.

    python benchmarks/ui_responsiveness.py [--tokens 2000] [--rate 2000] [--opens 5]
    python benchmarks/ui_responsiveness.py --smoke   # 500 tokens at 1000/s, 2 opens; checks

Prints:
- synthetic stream: a source on another thread emits `--tokens` tokens at `--rate` tokens/s
  in 30 ms batches as the engine process sends them; the GUI thread's heartbeat gaps
  (p50/p99/max), whether rendering kept up (lag at the end), and the cost of handling one
  chunk early vs late in the answer (it must not grow with the answer's length);
- demo model: the same measurements while the real engine streams a long counting answer;
- opening a chat of 200 messages (store read + widgets built), median of --opens.
Runs offscreen; targets: heartbeat p99 < 50 ms, no backlog, open < 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qwen_mtp_desktop.core.system.privacy import block_telemetry

block_telemetry()

from PySide6.QtCore import QElapsedTimer, QObject, Qt, QTimer, Signal  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from qwen_mtp_desktop.core.chat.store.store import ChatStore  # noqa: E402
from qwen_mtp_desktop.core.engine import StepChunk  # noqa: E402
from qwen_mtp_desktop.core.units import plain_figures  # noqa: E402


class Heartbeat:
    """Records the gaps between 5 ms timer ticks on the GUI thread."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self._clock = QElapsedTimer()
        self._timer = QTimer()
        self._timer.setInterval(5)
        self._timer.timeout.connect(self._tick)
        self._last = 0

    def start(self) -> None:
        self.gaps.clear()
        self._clock.start()
        self._last = 0
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def _tick(self) -> None:
        now = self._clock.elapsed()
        self.gaps.append(now - self._last)
        self._last = now

    def percentiles(self) -> dict[str, float]:
        """Gap p50, p99 and max in ms (empty when the timer never fired)."""
        gaps = sorted(self.gaps)
        if not gaps:
            return {}
        p99 = gaps[max(int(len(gaps) * 0.99) - 1, 0)]
        return {"p50": statistics.median(gaps), "p99": p99, "max": gaps[-1]}

    def summary(self) -> str:
        gaps = self.percentiles()
        if not gaps:
            return "heartbeat: no ticks (the GUI thread never ran its timer)"
        return (
            f"heartbeat p50 {gaps['p50']:.0f} ms, p99 {gaps['p99']:.0f} ms, "
            f"max {gaps['max']:.0f} ms"
        )


class SyntheticSource(QObject):
    """Emits chunks from a worker thread as the engine process does (one batch per 30 ms)."""

    chunks = Signal(int, object)
    done = Signal()

    def run(self, tokens: int, rate: float) -> None:
        words = [f"{i} " for i in range(1, tokens + 1)]
        started = time.perf_counter()
        sent = 0
        while sent < tokens:
            time.sleep(0.03)
            due = min(tokens, int((time.perf_counter() - started) * rate))
            batch = [
                StepChunk((i,), "", words[i], time.perf_counter() - started, 0)
                for i in range(sent, due)
            ]
            sent = due
            if batch:
                self.chunks.emit(1, batch)
        self.done.emit()


def timed_chunks(panel: object, handler_times: list[tuple[int, float]]) -> None:
    """Wrap the chat's chunk handler (its turn controller's) to time each call."""
    turns = panel.turns  # type: ignore[attr-defined]
    original = turns._on_chunks

    def wrapped(request_id: int, chunks: list[StepChunk]) -> None:
        started = time.perf_counter()
        original(request_id, chunks)
        stream = turns.stream
        length = len(stream.widget.content) if stream is not None else 0
        handler_times.append((length, (time.perf_counter() - started) / max(len(chunks), 1)))

    turns._on_chunks = wrapped
    router = panel._router  # type: ignore[attr-defined]
    router.chunks.disconnect(original)
    router.chunks.connect(wrapped)


def early_late(handler_times: list[tuple[int, float]]) -> tuple[float, float] | None:
    """Median per-token handling time (ms) of the first and last tenth of the chunks."""
    if len(handler_times) < 10:
        return None
    tenth = len(handler_times) // 10
    early = statistics.median(t for _l, t in handler_times[:tenth]) * 1e3
    late = statistics.median(t for _l, t in handler_times[-tenth:]) * 1e3
    return early, late


def growth(handler_times: list[tuple[int, float]]) -> str:
    found = early_late(handler_times)
    if found is None:
        return "too few chunks to compare"
    early, late = found
    ratio = f"{late / early:.2f}" if early > 0 else "–"
    return f"per-token handling early {early:.3f} ms, late {late:.3f} ms (ratio {ratio})"


def check_smoke(results: dict[str, Any]) -> int:
    from _smoke import SmokeCheck

    check = SmokeCheck("ui_responsiveness.py")
    for part in ("synthetic", "demo"):
        gaps = results.get(part, {}).get("heartbeat", {})
        check.require(sorted(gaps) == ["max", "p50", "p99"], f"{part}: heartbeat {gaps}")
        for name, value in gaps.items():
            check.positive(f"{part} heartbeat {name} ms", value)
    synthetic = results.get("synthetic", {})
    check.require(
        synthetic.get("rendered") == synthetic.get("tokens"),
        f"synthetic: {synthetic.get('rendered')} of {synthetic.get('tokens')} tokens rendered",
    )
    check.positive("synthetic seconds", synthetic.get("seconds"))
    check.positive("synthetic lag s", synthetic.get("lag_s"))
    handling = synthetic.get("early_late")
    check.require(handling is not None, "synthetic: too few chunks to compare handling times")
    for value in handling or ():
        check.positive("synthetic per-token handling ms", value)
    demo = results.get("demo", {})
    check.positive("demo words", demo.get("words"))
    check.positive("demo seconds", demo.get("seconds"))
    check.require("tok/s" in demo.get("stats", ""), f"demo stats line {demo.get('stats')!r}")
    opened = results.get("open", {})
    check.require(bool(opened.get("times")), "open: no timings")
    for value in opened.get("times", ()):
        check.positive("open seconds", value)
    check.positive("open: messages built", opened.get("built"))
    return check.finish()


def main(argv: list[str] | None = None) -> int:
    from _args import at_least

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=at_least(1), default=2000)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument(
        "--opens", type=at_least(1), default=5, help="times the long chat is opened"
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="500 tokens at 1000 tok/s, 2 opens, then check every number; exit 1 if not",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        args.tokens, args.rate, args.opens = 500, 1000.0, 2
    if args.rate <= 0:
        parser.error("--rate must be positive")
    with tempfile.TemporaryDirectory(prefix="qmd-ui-bench-") as home:
        os.environ["QWEN_MTP_DESKTOP_HOME"] = home
        results = measure(args)
    return check_smoke(results) if args.smoke else 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The three measurements in one offscreen main window (imports need the app home set)."""
    from qwen_mtp_desktop.core.files.paths import app_paths
    from qwen_mtp_desktop.core.settings.store import SettingsStore
    from qwen_mtp_desktop.ui.main_window import MainWindow

    app = QApplication.instance() or QApplication([])
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    window.resize(1280, 800)
    window.show()
    try:
        return measure_window(args, app, window, paths.data_dir)
    finally:
        window.close()  # stops the window's worker threads


def measure_window(
    args: argparse.Namespace, app: Any, window: Any, data_dir: Path
) -> dict[str, Any]:
    from qwen_mtp_desktop.core.chat.turns import Turn
    from qwen_mtp_desktop.ui.chat.turns.controller import Stream

    results: dict[str, Any] = {}
    chat = window.chat
    heartbeat = Heartbeat()

    def wait(predicate: object, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while not predicate() and time.monotonic() < deadline:  # type: ignore[operator]
            app.processEvents()
            time.sleep(0.002)

    wait(lambda: chat.store_ready and chat._loaded is not None)

    # --- synthetic 2,000 tokens/s -------------------------------------------------------
    handler_times: list[tuple[int, float]] = []
    timed_chunks(chat, handler_times)
    source = SyntheticSource()
    # Queued, like the engine process's signals: handled on the GUI thread.
    source.chunks.connect(chat.turns._on_chunks, Qt.ConnectionType.QueuedConnection)
    widget = chat._add_widget("assistant")
    widget.begin_stream()
    # What TurnController.start does without the engine: the chat's settings for this turn.
    chat.turns._stream = Stream(1, widget, Turn(chat.model.engine_settings()))
    finished = threading.Event()
    source.done.connect(finished.set)
    heartbeat.start()
    started = time.perf_counter()
    worker = threading.Thread(target=source.run, args=(args.tokens, args.rate))
    worker.start()
    wait(lambda: finished.is_set())
    produced_at = time.perf_counter()
    wait(lambda: widget.content.count(" ") >= args.tokens)
    lag = time.perf_counter() - produced_at
    heartbeat.stop()
    worker.join()
    chat.turns._stream = None
    widget.end_stream()
    print(
        f"synthetic stream: {args.tokens} tokens at {args.rate:.0f} tok/s "
        f"in {produced_at - started:.2f} s"
    )
    print(f"  {heartbeat.summary()}")
    print(f"  rendering lag at the end: {lag * 1000:.0f} ms (backlog if large)")
    print(f"  {growth(handler_times)}\n")
    results["synthetic"] = {
        "tokens": args.tokens,
        "rendered": widget.content.count(" "),
        "seconds": produced_at - started,
        "lag_s": lag,
        "heartbeat": heartbeat.percentiles(),
        "early_late": early_late(handler_times),
    }

    # --- the demo model -----------------------------------------------------------------
    handler_times.clear()
    chat.settings_panel.max_tokens_spin.setValue(args.tokens)
    heartbeat.start()
    started = time.perf_counter()
    chat.send(f"Count from 1 to {args.tokens}.")
    wait(lambda: chat.generating)
    wait(lambda: not chat.generating, timeout=900)
    heartbeat.stop()
    answer = chat.transcript.messages[-1]
    print(
        f"demo model: {len(answer.content.split())} words in {time.perf_counter() - started:.1f} s"
        f"  ({answer.stats_label.text()})"
    )
    print(f"  {heartbeat.summary()}")
    print(f"  {growth(handler_times)}\n")
    results["demo"] = {
        "words": len(answer.content.split()),
        "seconds": time.perf_counter() - started,
        "stats": plain_figures(answer.stats_label.text()),
        "heartbeat": heartbeat.percentiles(),
    }

    # --- opening a 200-message chat ------------------------------------------------------
    with ChatStore(data_dir / "chats.sqlite3") as store:
        conversation = store.create_conversation("long chat")
        for i in range(100):
            store.add_message(conversation.id, "user", f"Question {i}: count from 1 to 20.")
            store.add_message(
                conversation.id,
                "assistant",
                "Here you go:\n\n"
                + " ".join(str(n) for n in range(1, 21))
                + "\n\n```python\nprint(list(range(1, 21)))\n```\n\n- done\n- **ok**",
                stats={
                    "mode": "mtp",
                    "num_assistant_tokens": 1,
                    "acceptance_rate": 0.8,
                    "decode_tokens_per_s": 100.0,
                    "ttft_s": 0.1,
                    "generated_tokens": 60,
                },
            )
    times = []
    for _ in range(args.opens):
        chat.new_chat()
        wait(lambda: chat.conversation is None)
        started = time.perf_counter()
        chat.open_conversation(conversation.id)
        wait(lambda: chat.transcript.hidden_count == 200 - len(chat.transcript.messages) > 0)
        app.processEvents()
        times.append(time.perf_counter() - started)
    print(
        f"open a 200-message chat ({len(chat.transcript.messages)} newest built): "
        f"median {statistics.median(times):.3f} s "
        f"(min {min(times):.3f}, max {max(times):.3f})"
    )
    results["open"] = {"times": times, "built": len(chat.transcript.messages)}
    return results


if __name__ == "__main__":
    raise SystemExit(main())
