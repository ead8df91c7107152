"""Chat UI responsiveness while answers stream, and the time to open a long chat.

    python benchmarks/ui_responsiveness.py [--tokens 2000] [--rate 2000]

Prints:
- synthetic stream: a source on another thread emits `--tokens` tokens at `--rate` tokens/s
  through the same coalescing path as the engine thread; the GUI thread's heartbeat gaps
  (p50/p99/max), whether rendering kept up (lag at the end), and the cost of handling one
  chunk early vs late in the answer (it must not grow with the answer's length);
- demo model: the same measurements while the real engine streams a long counting answer;
- opening a chat of 200 messages (store read + widgets built), median of 5.
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

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from qwen_mtp_desktop.core.privacy import block_telemetry

block_telemetry()

from PySide6.QtCore import QElapsedTimer, QObject, Qt, QTimer, Signal  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from qwen_mtp_desktop.core.chats.store import ChatStore  # noqa: E402
from qwen_mtp_desktop.core.engine import StepChunk  # noqa: E402


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

    def summary(self) -> str:
        gaps = sorted(self.gaps)
        p99 = gaps[int(len(gaps) * 0.99) - 1] if gaps else 0
        median = statistics.median(gaps)
        return f"heartbeat p50 {median:.0f} ms, p99 {p99:.0f} ms, max {gaps[-1]:.0f} ms"


class SyntheticSource(QObject):
    """Emits chunks from a worker thread like EngineThread does (coalesced every 30 ms)."""

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
    """Wrap the panel's chunk handler to time each call."""
    original = panel._on_chunks  # type: ignore[attr-defined]

    def wrapped(request_id: int, chunks: list[StepChunk]) -> None:
        started = time.perf_counter()
        original(request_id, chunks)
        stream = panel._stream  # type: ignore[attr-defined]
        length = len(stream.widget.content) if stream is not None else 0
        handler_times.append((length, (time.perf_counter() - started) / max(len(chunks), 1)))

    panel._on_chunks = wrapped  # type: ignore[attr-defined]
    engine = panel._engine  # type: ignore[attr-defined]
    engine.chunks.disconnect(original)
    engine.chunks.connect(wrapped)


def growth(handler_times: list[tuple[int, float]]) -> str:
    if len(handler_times) < 10:
        return "too few chunks to compare"
    tenth = len(handler_times) // 10
    early = statistics.median(t for _l, t in handler_times[:tenth]) * 1e3
    late = statistics.median(t for _l, t in handler_times[-tenth:]) * 1e3
    return f"per-token handling early {early:.3f} ms, late {late:.3f} ms (ratio {late / early:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--rate", type=float, default=2000.0)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="qmd-ui-bench-")
    os.environ["QWEN_MTP_DESKTOP_HOME"] = home

    from qwen_mtp_desktop.core.paths import app_paths
    from qwen_mtp_desktop.core.settings import SettingsStore
    from qwen_mtp_desktop.ui.chat.chat_panel import _Stream
    from qwen_mtp_desktop.ui.main_window import MainWindow

    app = QApplication([])
    paths = app_paths().ensure()
    window = MainWindow(paths, SettingsStore(paths.settings_file))
    window.resize(1280, 800)
    window.show()
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
    # Queued, like the engine thread's signals: handled on the GUI thread.
    source.chunks.connect(chat._on_chunks, Qt.ConnectionType.QueuedConnection)
    widget = chat._add_widget("assistant")
    widget.begin_stream()
    chat._stream = _Stream(1, widget)
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
    chat._stream = None
    widget.end_stream()
    print(
        f"synthetic stream: {args.tokens} tokens at {args.rate:.0f} tok/s "
        f"in {produced_at - started:.2f} s"
    )
    print(f"  {heartbeat.summary()}")
    print(f"  rendering lag at the end: {lag * 1000:.0f} ms (backlog if large)")
    print(f"  {growth(handler_times)}\n")

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

    # --- opening a 200-message chat ------------------------------------------------------
    with ChatStore(paths.data_dir / "chats.sqlite3") as store:
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
    for _ in range(5):
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
    window.close()


if __name__ == "__main__":
    main()
