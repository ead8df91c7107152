"""What `generate` sends and prints, for a local model and with `--remote` alike: the prompt as
messages, the answer streamed to stdout as it comes, the reasoning to stderr, then one JSON
object (`--json`) or a summary line.

Text from a model or a server is untrusted. On a terminal an escape sequence in it could set
the window title, clear the screen or plant a hyperlink (OSC 8) that shows one address and
opens another, and a bidi control could reorder what is shown. So when a stream is a
terminal, control characters (C0 but tab and newline, DEL, C1) and bidi controls are written
as visible `\\uXXXX` escapes and carriage returns are dropped. When it is a pipe or a file the
text is written verbatim: a script reads the model's exact output (`--json` escapes every
control character itself).
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import AnswerStream, EngineError, Message

#: Bidi controls: marks, embeddings, overrides and isolates (they reorder what is shown).
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
_SHOWN_AS_ESCAPES: dict[int, str | None] = {
    code: f"\\u{code:04x}"
    for code in (*range(0x20), 0x7F, *range(0x80, 0xA0), *_BIDI)
    if code not in (0x09, 0x0A)
}
_SHOWN_AS_ESCAPES[0x0D] = None  # a carriage return could write over what was shown: dropped


def prompt_messages(prompt: str, system: str | None) -> list[Message]:
    """The conversation `generate` asks about: the system prompt, if one was given, then the
    prompt."""
    messages = [Message("system", system)] if system else []
    messages.append(Message("user", prompt))
    return messages


def terminal_safe(text: str) -> str:
    """`text` as it may reach a terminal: no control sequence, no bidi control."""
    return text.translate(_SHOWN_AS_ESCAPES)


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):  # replaced or closed streams
        return False


class _Output:
    """A stream that gets the answer's text: made safe when it is a terminal, flushed."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._terminal = is_terminal(stream)
        self.wrote = False

    def write(self, text: str) -> None:
        self._stream.write(terminal_safe(text) if self._terminal else text)
        self._stream.flush()
        self.wrote = True


def stream_answer(answer: AnswerStream, *, quiet: bool = False) -> None:
    """Print `answer` as it streams (text to stdout, reasoning to stderr; nothing when `quiet`,
    as for --json). Ctrl+C stops the answer at once and propagates (KeyboardInterrupt); so does
    an EngineError, after ending the line the partial answer is on (the text stays on screen)."""
    out = _Output(sys.stdout)
    err = _Output(sys.stderr)
    try:
        with _ctrl_c_cancels(answer) as interrupted:
            for chunk in answer:
                if quiet:
                    continue
                if chunk.reasoning:
                    err.write(chunk.reasoning)
                if chunk.answer:
                    out.write(chunk.answer)
        if interrupted.is_set():  # the answer ended because Ctrl+C cancelled it
            raise KeyboardInterrupt
    except KeyboardInterrupt:  # that, or a second Ctrl+C for an answer that did not end
        if out.wrote:
            print()
        raise
    except EngineError:
        if out.wrote or err.wrote:
            print()  # the reason goes below the partial answer
        raise


@contextlib.contextmanager
def _ctrl_c_cancels(answer: AnswerStream) -> Iterator[threading.Event]:
    """While the answer streams, Ctrl+C cancels it as Stop does, and the answer ends the usual
    way; the event says it happened. Python's own handler raises KeyboardInterrupt wherever the
    main thread is, a lock's `with` or a terminal write included (a command once went silent
    for 10 s after Ctrl+C; where it stood is not known). The cancel runs on its own thread: a
    handler that takes a lock the interrupted code holds would wait for itself. A second
    Ctrl+C raises KeyboardInterrupt, for an answer that does not end."""
    interrupted = threading.Event()
    if (
        threading.current_thread() is not threading.main_thread()  # only it may set handlers
        or signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # started to ignore it (nohup, &)
    ):
        yield interrupted
        return

    def on_ctrl_c(_signum: int, _frame: object) -> None:
        interrupted.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Thread(target=answer.cancel, name="ctrl-c", daemon=True).start()

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield interrupted
    finally:
        # None: the handler was not set from Python; Python's own is what it was then
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


def print_result(
    answer: AnswerStream,
    stats: GenerationStats,
    *,
    as_json: bool,
    summary: str,
    head: dict[str, Any] | None = None,
    tail: dict[str, Any] | None = None,
) -> None:
    """After the answer: one JSON object (`head`, the text, reasoning and stats, `tail`), or
    the end of the answer's line and `summary` on stderr."""
    if as_json:
        payload: dict[str, Any] = {
            **(head or {}),
            "text": answer.answer,
            "reasoning": answer.reasoning,
            "stats": stats.to_json_dict(),
            **(tail or {}),
        }
        print(json.dumps(payload, indent=2))
        return
    print()
    print(summary, file=sys.stderr)
