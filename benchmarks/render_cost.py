"""What rendering a hostile answer costs: time, per-chunk streaming cost, widgets and memory.

    python benchmarks/render_cost.py [--size 1000000] [--smoke] [--json]

For each answer shape (no whitespace at all, 10,000 paragraphs, 5,000 code fences, mixed
Markdown, 2,000 image references) of `--size` characters:
- render: building the finished message (MessageWidget(content=...)) and laying it out at
  800 px width, in seconds (target: < 1 s for 1 MB);
- stream: the answer fed in chunks of 64 characters, as the chat streams it, with the layout
  done after every 32 chunks; the mean cost per chunk over the first and the last tenth of the
  answer (flat: the last tenth may not cost much more than the first) and the final render;
- widgets: QWidget objects under the message when done;
- rss: growth of the process's resident memory over the whole shape, in MB.

Then the streamed many-blocks cases (issue 29): the 10,000 paragraphs and the 5,000 code
fences streamed in small chunks (`--small-chunk`, 8 characters: about two tokens, what a fast
model streams per step), laid out every 32 chunks as above, against the same answer set at
once: wall and CPU seconds (CPU is what counts on a busy machine), the ratio streamed / set at
once (target: a small constant, not growing with the answer), memory growth, and the cost
per chunk in the first and last tenth.

Then the same 10,000 paragraphs streamed into the chat (issue 45, item 10): the real main
window with the demo model loaded, the answer fed as the engine process sends it (StepChunks
of `--small-chunk` characters, a token each, 16 to a batch) through the chat's turn
controller, so everything the window does per batch runs (the message, the live figures, the
transcript); CPU seconds per batch in the first and last tenth (flat: the last may not cost
much more than the first) and in total. The live figures' draft counts once summed every
step of the answer per batch, so the cost per batch grew with the answer.

`--smoke` runs 100 kB answers (the test suite runs it and checks the same targets).
Runs offscreen; each shape in a fresh message widget.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil
from PySide6.QtCore import QEvent
from PySide6.QtWidgets import QApplication, QWidget

from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget

CHUNK = 64
LAYOUT_EVERY = 32
WIDTH = 800


def _repeat_to(unit: Callable[[int], str], size: int) -> str:
    parts: list[str] = []
    total = index = 0
    while total < size:
        piece = unit(index)
        parts.append(piece)
        total += len(piece)
        index += 1
    return "".join(parts)[:size]


def shapes(size: int) -> dict[str, str]:
    scale = size / 1_000_000
    paragraphs = max(1, int(10_000 * scale))
    fences = max(1, int(5_000 * scale))
    images = max(1, int(2_000 * scale))
    return {
        "no_whitespace": _repeat_to(lambda i: f"x{i % 10}", size),
        "paragraphs": _repeat_to(
            lambda i: f"Paragraph {i} " + "word " * 17 + "\n\n", size // paragraphs * paragraphs
        ),
        "code_fences": _repeat_to(
            lambda i: "```python\n" + f"def f{i}(x):\n    return x * {i}\n" * 5 + "```\n",
            size // fences * fences,
        ),
        "mixed_markdown": _repeat_to(
            lambda i: (
                f"## Heading {i}\n\n- item **bold** *it* `code` [link](https://e.com/{i})\n"
                f"- second\n\n| a | b |\n|---|---|\n| {i} | x |\n\n> quote {i}\n\n"
            ),
            size,
        ),
        "images": _repeat_to(
            lambda i: (
                f"![pic {i}](/nonexistent/{i}.png) ![r][ref{i}]\n\n[ref{i}]: file:///etc/passwd\n\n"
            ),
            size // images * images,
        ),
    }


def _settle(app: QApplication, widget: QWidget) -> None:
    widget.adjustSize()
    app.processEvents()
    # deleteLater() runs in the event loop; a benchmark without one runs it here.
    app.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def measure(app: QApplication, name: str, text: str) -> dict[str, float | int | str]:
    process = psutil.Process()
    gc.collect()
    rss0 = process.memory_info().rss
    host = QWidget()
    host.resize(WIDTH, 600)
    started = time.perf_counter()
    done = MessageWidget("assistant", dark=False, content=text, parent=host)
    done.setFixedWidth(WIDTH)
    _settle(app, done)
    render_s = time.perf_counter() - started
    widgets = len(done.findChildren(QWidget))
    done.deleteLater()
    _settle(app, host)

    streaming = MessageWidget("assistant", dark=False, parent=host)
    streaming.setFixedWidth(WIDTH)
    streaming.begin_stream()
    chunks = [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]
    costs: list[float] = []
    group_started = time.perf_counter()
    for index, chunk in enumerate(chunks, 1):
        streaming.append(chunk)
        if index % LAYOUT_EVERY == 0 or index == len(chunks):
            _settle(app, streaming)
            now = time.perf_counter()
            costs.append((now - group_started) / LAYOUT_EVERY)
            group_started = now
    stream_s = sum(costs) * LAYOUT_EVERY
    started = time.perf_counter()
    streaming.end_stream()
    _settle(app, streaming)
    end_s = time.perf_counter() - started
    tenth = max(1, len(costs) // 10)
    first = sum(costs[:tenth]) / tenth
    last = sum(costs[-tenth - 1 : -1] or costs[-1:]) / len(costs[-tenth - 1 : -1] or costs[-1:])
    streaming.deleteLater()
    host.deleteLater()
    app.processEvents()
    app.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
    rss_mb = (process.memory_info().rss - rss0) / 1e6
    return {
        "shape": name,
        "chars": len(text),
        "render_s": round(render_s, 3),
        "widgets": widgets,
        "stream_total_s": round(stream_s, 3),
        "chunk_first_ms": round(first * 1000, 3),
        "chunk_last_ms": round(last * 1000, 3),
        "end_stream_s": round(end_s, 3),
        "rss_mb": round(rss_mb, 1),
    }


def measure_streamed(
    app: QApplication, name: str, text: str, chunk: int
) -> dict[str, float | int | str]:
    """One answer set at once, then streamed in `chunk`-character pieces: wall and CPU."""
    process = psutil.Process()
    host = QWidget()
    host.resize(WIDTH, 600)
    wall, cpu = time.perf_counter(), time.process_time()
    done = MessageWidget("assistant", dark=False, content=text, parent=host)
    done.setFixedWidth(WIDTH)
    _settle(app, done)
    once_wall, once_cpu = time.perf_counter() - wall, time.process_time() - cpu
    done.deleteLater()
    _settle(app, host)
    gc.collect()
    rss0 = process.memory_info().rss
    streaming = MessageWidget("assistant", dark=False, parent=host)
    streaming.setFixedWidth(WIDTH)
    streaming.begin_stream()
    pieces = [text[i : i + chunk] for i in range(0, len(text), chunk)]
    costs: list[float] = []
    wall, cpu = time.perf_counter(), time.process_time()
    group = time.process_time()
    for index, piece in enumerate(pieces, 1):
        streaming.append(piece)
        if index % LAYOUT_EVERY == 0 or index == len(pieces):
            _settle(app, streaming)
            now = time.process_time()
            costs.append((now - group) / LAYOUT_EVERY)
            group = now
    streaming.end_stream()
    _settle(app, streaming)
    stream_wall, stream_cpu = time.perf_counter() - wall, time.process_time() - cpu
    rss_mb = (process.memory_info().rss - rss0) / 1e6
    tenth = max(1, len(costs) // 10)
    streaming.deleteLater()
    host.deleteLater()
    app.processEvents()
    app.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    return {
        "shape": name,
        "chars": len(text),
        "chunk": chunk,
        "once_s": round(once_wall, 3),
        "once_cpu_s": round(once_cpu, 3),
        "stream_s": round(stream_wall, 3),
        "stream_cpu_s": round(stream_cpu, 3),
        "ratio_cpu": round(stream_cpu / max(once_cpu, 1e-3), 2),
        "rss_mb": round(rss_mb, 1),
        "chunk_first_ms": round(sum(costs[:tenth]) / tenth * 1000, 4),
        "chunk_last_ms": round(sum(costs[-tenth:]) / tenth * 1000, 4),
    }


CHAT_BATCH = 16


def measure_chat(app: QApplication, text: str, chunk: int) -> dict[str, float | int | str]:
    """`text` streamed into the real chat window as the engine process sends an answer."""
    import tempfile

    from PySide6.QtCore import QEvent as Event

    with tempfile.TemporaryDirectory(prefix="qmd-render-chat-") as home:
        os.environ["QWEN_MTP_DESKTOP_HOME"] = home
        from qwen_mtp_desktop.core.chat.turns import Turn
        from qwen_mtp_desktop.core.engine import StepChunk
        from qwen_mtp_desktop.core.files.paths import app_paths
        from qwen_mtp_desktop.core.settings.store import SettingsStore
        from qwen_mtp_desktop.ui.chat.turns.controller import Stream
        from qwen_mtp_desktop.ui.main_window import MainWindow

        paths = app_paths().ensure()
        window = MainWindow(paths, SettingsStore(paths.settings_file))
        window.resize(1280, 800)
        window.show()
        try:
            chat = window.chat
            deadline = time.monotonic() + 300
            while not (chat.store_ready and chat._loaded is not None):  # the demo model
                if time.monotonic() > deadline:
                    raise SystemExit("render_cost.py: the demo model did not load in 300 s")
                app.processEvents()
                time.sleep(0.005)
            widget = chat._add_widget("assistant")
            widget.begin_stream()
            # What TurnController.start does without the engine: this turn's settings.
            chat.turns._stream = Stream(1, widget, Turn(chat.model.engine_settings()))
            pieces = [text[i : i + chunk] for i in range(0, len(text), chunk)]
            batches = [
                [
                    StepChunk((n,), "", piece, 0.01 * n, 0)
                    for n, piece in enumerate(pieces[at : at + CHAT_BATCH], at)
                ]
                for at in range(0, len(pieces), CHAT_BATCH)
            ]
            costs: list[float] = []
            wall, cpu = time.perf_counter(), time.process_time()
            for batch in batches:
                began = time.process_time()
                chat.turns._on_chunks(1, batch)
                app.processEvents()
                app.sendPostedEvents(None, Event.Type.DeferredDelete)  # the event loop's job
                costs.append(time.process_time() - began)
            stream_wall, stream_cpu = time.perf_counter() - wall, time.process_time() - cpu
            shown = widget.content
            chat.turns._stream = None
            widget.end_stream()
        finally:
            window.close()  # its worker threads and the engine host
            app.sendPostedEvents(None, Event.Type.DeferredDelete)
    assert shown == text, "the chat did not show the answer it was sent"
    tenth = max(1, len(costs) // 10)
    return {
        "shape": "paragraphs in the chat",
        "chars": len(text),
        "chunk": chunk,
        "batch": CHAT_BATCH,
        "stream_s": round(stream_wall, 3),
        "stream_cpu_s": round(stream_cpu, 3),
        "batch_first_ms": round(sum(costs[:tenth]) / tenth * 1000, 3),
        "batch_last_ms": round(sum(costs[-tenth:]) / tenth * 1000, 3),
    }


def run(size: int, small_chunk: int) -> list[dict[str, float | int | str]]:
    app = QApplication.instance() or QApplication([])
    assert isinstance(app, QApplication)
    results = [measure(app, name, text) for name, text in shapes(size).items()]
    many = {k: v for k, v in shapes(size).items() if k in ("paragraphs", "code_fences")}
    results += [measure_streamed(app, f"{k} streamed", v, small_chunk) for k, v in many.items()]
    results.append(measure_chat(app, many["paragraphs"], small_chunk))
    return results


def main() -> int:
    from _args import at_least

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=at_least(1), default=1_000_000, help="characters per answer")
    parser.add_argument("--smoke", action="store_true", help="100 kB answers (the test suite)")
    parser.add_argument("--json", action="store_true", help="print one JSON list")
    parser.add_argument(
        "--small-chunk", type=at_least(1), default=8, help="streamed many-blocks chunk"
    )
    args = parser.parse_args()
    results = run(100_000 if args.smoke else args.size, args.small_chunk)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    finished = [r for r in results if "chunk" not in r]
    streamed = [r for r in results if "chunk" in r and "batch" not in r]
    in_chat = [r for r in results if "batch" in r]
    header = (
        f"{'shape':16} {'chars':>9} {'render s':>9} {'widgets':>8} {'stream s':>9} "
        f"{'chunk first ms':>15} {'chunk last ms':>14} {'end s':>7} {'rss MB':>7}"
    )
    print(header)
    for r in finished:
        print(
            f"{r['shape']:16} {r['chars']:>9,} {r['render_s']:>9.3f} {r['widgets']:>8} "
            f"{r['stream_total_s']:>9.3f} {r['chunk_first_ms']:>15.3f} "
            f"{r['chunk_last_ms']:>14.3f} {r['end_stream_s']:>7.3f} {r['rss_mb']:>7.1f}"
        )
    for r in streamed:
        print(
            f"{r['shape']} in {r['chunk']}-character chunks: {r['stream_s']:.2f} s "
            f"(CPU {r['stream_cpu_s']:.2f} s) against {r['once_s']:.2f} s set at once "
            f"(CPU {r['once_cpu_s']:.2f} s): {r['ratio_cpu']:.1f}x; memory +{r['rss_mb']:.0f} MB; "
            f"per chunk {r['chunk_first_ms']:.3f} ms first tenth, {r['chunk_last_ms']:.3f} ms last"
        )
    for r in in_chat:
        print(
            f"{r['shape']}, {r['chunk']}-character chunks {r['batch']} to a batch: "
            f"{r['stream_s']:.2f} s (CPU {r['stream_cpu_s']:.2f} s); per batch "
            f"{r['batch_first_ms']:.2f} ms CPU first tenth, {r['batch_last_ms']:.2f} ms last"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
