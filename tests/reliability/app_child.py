"""The real app, driven by a script, for tests that kill it or measure it from outside.

Run as `python -m tests.reliability.app_child MODE [options]` with QWEN_MTP_DESKTOP_HOME set.
It boots like `app.run_gui` does (block telemetry, settings, logging, `MainWindow` with its
chat panel, engine process and store runner), offscreen, and then types prompts into the chat
panel's composer one after another. It reports on stdout, one JSON object a line:

    {"event": "ready", "startup_s": ...}
    {"event": "send", "turn": k, "prompt": "..."}
    {"event": "chunk", "turn": k, "conversation": id, "text": "..."}   (each engine batch)
    {"event": "finished", "turn": k}
    {"event": "done", ...}                                            (after --turns turns)

`--step-delay S` delays each decoding step as the engine process takes it by S seconds
(tests.reliability.paced_host), so the tiny demo model (hundreds of tokens a second) streams at
a real model's pace and the chat's periodic store flushes happen mid-answer. Everything else is
the app's own code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

PROMPTS = (
    "Count from 1 to 20.",
    "Repeat 'good morning' three times.",
    "Count from 1 to 15.",
    "Repeat 'thank you' three times.",
)


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


NETWORK_EVENTS = (
    "socket.connect",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.sendto",
    "urllib.Request",
    "http.client.connect",
)


def audit_network(report: str) -> None:
    """Record every network attempt made from Python code in this process (an audit hook
    cannot be removed, which is why this runs in a child process)."""
    import atexit

    attempts: list[str] = []

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event not in NETWORK_EVENTS:
            return
        if event == "socket.connect" and isinstance(args[1], str | bytes):
            return  # a Unix-domain socket on this machine
        attempts.append(f"{event} {args[1:]!r}"[:300])

    sys.addaudithook(hook)
    atexit.register(lambda: Path(report).write_text(json.dumps(attempts), encoding="utf-8"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=0, help="stop after N turns (0: forever)")
    parser.add_argument("--step-delay", type=float, default=0.0)
    parser.add_argument("--max-new-tokens", type=int, default=0)
    parser.add_argument("--new-chat", action="store_true", help="start a new chat first")
    parser.add_argument("--audit-network", help="write network attempts to this JSON file")
    args = parser.parse_args()
    started = time.monotonic()
    if args.audit_network:
        audit_network(args.audit_network)

    from qwen_mtp_desktop.core.system.privacy import block_telemetry

    block_telemetry()
    from qwen_mtp_desktop.core.files.paths import app_paths
    from qwen_mtp_desktop.core.settings.store import SettingsStore
    from qwen_mtp_desktop.core.system.logs import setup_logging

    paths = app_paths().ensure()
    settings = SettingsStore(paths.settings_file)
    setup_logging(paths.log_file, debug=settings.settings.debug_logging)

    if args.step_delay > 0:
        # The engine runs in its own process: start it as the paced test host.
        from qwen_mtp_desktop.core.hosting import process as host_process
        from tests.reliability import paced_host

        host_process.host_command = lambda: paced_host.command(args.step_delay)

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from qwen_mtp_desktop.ui.main_window import MainWindow

    app = QApplication(sys.argv[:1])
    window = MainWindow(paths, settings)
    window.show()
    chat = window.chat
    state = {"turn": 0, "phase": "boot", "waiting_since": 0.0}
    streamed: dict[int, list[str]] = {}

    def on_chunks(_request: int, chunks: list[Any]) -> None:
        text = "".join(chunk.answer for chunk in chunks)
        turn = state["turn"]
        streamed.setdefault(turn, []).append(text)
        conversation = chat.conversation.id if chat.conversation is not None else None
        emit("chunk", turn=turn, conversation=conversation, text=text)

    def on_finished(_request: int, stats: Any) -> None:
        emit("finished", turn=state["turn"], reason=stats.finish_reason)

    window.engine_process.chunks.connect(on_chunks)
    window.engine_process.finished.connect(on_finished)

    def idle() -> bool:
        return (
            chat.store_ready
            and chat._loaded is not None
            and not chat.generating
            and window.store_runner.pending == 0
        )

    def tick() -> None:
        if not idle():
            return
        if state["phase"] == "boot":
            if args.new_chat:
                chat.new_chat()
            if args.max_new_tokens:
                chat.settings_panel.max_tokens_spin.setValue(args.max_new_tokens)
            state["phase"] = "chat"
            emit(
                "ready", startup_s=time.monotonic() - started, engine_pid=window.engine_process.pid
            )
            return
        if args.turns and state["turn"] >= args.turns:
            timer.stop()
            emit("done", turns=state["turn"])
            window.close()
            app.quit()
            return
        state["turn"] += 1
        prompt = PROMPTS[(state["turn"] - 1) % len(PROMPTS)]
        emit("send", turn=state["turn"], prompt=prompt)
        chat.composer.set_text(prompt)
        chat.composer.send_button.click()  # what the user does

    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(tick)
    timer.start()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
