"""Token ids to text while an answer streams: incremental detokenizing (the runtime's
detokenizer, or a byte table read from tokenizer.json that is proven to decode the same), the
thinking/answer split and stop strings.

No OpenVINO here, so all of it is testable with recorded data.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Sequence
from pathlib import Path

from qwen_mtp_desktop.core.files.safe_files import (
    TOKENIZER_JSON_BYTES,
    FileKind,
    read_json_file,
)

TOKENIZER_JSON = FileKind("tokenizer.json", "Re-export the model.")
#: Far above any real vocabulary (Qwen3.5: 248,320 ids).
MAX_VOCAB_SIZE = 4_000_000


class IncrementalDecoder:
    """Turns a stream of token ids into text deltas.

    Byte-level BPE can split one character over several tokens; until its bytes are complete the
    decoded text ends in U+FFFD, so that tail is held back. Once the text ends cleanly the window
    restarts, keeping each step's cost independent of the answer's length.
    """

    def __init__(self, decode: Callable[[list[int]], str]) -> None:
        self._decode = decode
        self._window: list[int] = []
        self._printed = 0  # characters of decode(window) already returned

    def push(self, token_ids: Sequence[int]) -> str:
        if not token_ids:
            return ""
        self._window.extend(token_ids)
        text = self._decode(self._window)
        clean = text.rstrip("\ufffd")
        delta = clean[self._printed :]
        if len(clean) == len(text):
            self._window = []
            self._printed = 0
        else:
            self._printed = len(clean)
        return delta

    def flush(self) -> str:
        """Whatever is held back (a character that never completed shows as U+FFFD)."""
        text = self._decode(self._window)[self._printed :] if self._window else ""
        self._window = []
        self._printed = 0
        return text


def _byte_level_alphabet() -> dict[str, int]:
    """GPT-2 byte-level BPE's reversible map from printable characters back to bytes."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("\u00a1"), ord("\u00ac") + 1),
        *range(ord("\u00ae"), ord("\u00ff") + 1),
    ]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


class ByteLevelVocab:
    """Token id -> bytes for a byte-level BPE tokenizer (Qwen's), read from tokenizer.json.

    Decoding with it is a table lookup in Python, so the engine's per-step text costs about a
    microsecond instead of a detokenizer inference (which costs 10-20 % of decode speed at
    thousands of tokens/s, benchmarks/engine_overhead.py). Special tokens decode to nothing,
    as the runtime's detokenizer does by default; the engine checks the table against the
    runtime's detokenizer when it loads a model and keeps the runtime's when they differ.
    """

    def __init__(self, table: list[bytes]) -> None:
        self._table = table

    @classmethod
    def from_tokenizer_json(cls, path: Path) -> ByteLevelVocab | None:
        """The table, or None when the file is missing or is not a plain byte-level BPE."""
        try:
            data = read_json_file(path, kind=TOKENIZER_JSON, max_bytes=TOKENIZER_JSON_BYTES)
            model = data["model"]
            decoder = data.get("decoder") or {}
            if model.get("type") != "BPE" or decoder.get("type") != "ByteLevel":
                return None
            vocab: dict[str, int] = model["vocab"]
            added = data.get("added_tokens") or []
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        alphabet = _byte_level_alphabet()
        try:
            ids = [*vocab.values(), *(t["id"] for t in added)]
            if not all(type(i) is int and 0 <= i < MAX_VOCAB_SIZE for i in ids):
                return None  # an absurd id would allocate gigabytes; a negative one aliases
            table = [b""] * (max(ids, default=-1) + 1)
            for piece, token_id in vocab.items():
                table[token_id] = bytes(alphabet[ch] for ch in piece)
            for token in added:
                table[int(token["id"])] = b"" if token["special"] else token["content"].encode()
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            return None
        return cls(table)

    def __len__(self) -> int:
        return len(self._table)

    def decode_bytes(self, token_ids: Sequence[int]) -> bytes:
        table = self._table
        size = len(table)
        return b"".join(table[i] if 0 <= i < size else b"" for i in token_ids)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.decode_bytes(token_ids).decode("utf-8", errors="replace")


def vocab_agrees(
    vocab: ByteLevelVocab,
    decode: Callable[[list[int]], str],
    sequences: Sequence[Sequence[int]],
    *,
    probes: int = 1500,
) -> bool:
    """Whether `vocab` decodes like `decode` (the runtime's detokenizer): on the given token
    sequences, and on `probes` single tokens spread over the vocabulary whose bytes are whole
    UTF-8 characters (a token holding part of a character has no text of its own to compare)."""
    size = len(vocab)
    step = max(1, size // probes)
    for token_id in range(0, size, step):
        raw = vocab.decode_bytes([token_id])
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if decode([token_id]) != text:
            return False
    return all(decode(list(ids)) == vocab.decode(ids) for ids in sequences)


class ByteStreamDecoder:
    """`IncrementalDecoder`'s contract on a `ByteLevelVocab`: text deltas, with a character
    split over tokens held back until its bytes are complete."""

    def __init__(self, vocab: ByteLevelVocab) -> None:
        self._vocab = vocab
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_ids: Sequence[int]) -> str:
        if not token_ids:
            return ""
        text: str = self._utf8.decode(self._vocab.decode_bytes(token_ids))
        return text

    def flush(self) -> str:
        text: str = self._utf8.decode(b"", final=True)
        return text


class ThinkingSplitter:
    """Routes token ids to the reasoning or the answer section.

    Qwen3.5 thinks between `<think>` and `</think>`; when thinking is on, the prompt already ends
    with `<think>`, so generation starts inside the reasoning section. The markers themselves are
    dropped from both sections.
    """

    def __init__(
        self, think_start_id: int | None, think_end_id: int | None, thinking: bool
    ) -> None:
        self._start = think_start_id
        self._end = think_end_id
        self.in_reasoning = thinking and think_end_id is not None
        self.reasoning_tokens = 0
        self.answer_tokens = 0

    def split(self, token_ids: Sequence[int]) -> tuple[list[int], list[int]]:
        reasoning: list[int] = []
        answer: list[int] = []
        for token in token_ids:
            if token == self._start and self._start is not None:
                self.in_reasoning = True
                self.reasoning_tokens += 1
            elif token == self._end and self._end is not None and self.in_reasoning:
                self.in_reasoning = False
                self.reasoning_tokens += 1
            elif self.in_reasoning:
                reasoning.append(token)
                self.reasoning_tokens += 1
            else:
                answer.append(token)
                self.answer_tokens += 1
        return reasoning, answer


class StopStringFilter:
    """Streams token ids so that the text ends before the first stop string: ids whose text
    may begin a stop string are held back until it is clear, and the ones that form it are
    dropped (openvino-genai's `include_stop_str_in_output = False`). With no stop strings it
    passes everything through without decoding."""

    #: Emitted ids decoded before the held ones, so a character split over tokens reads right.
    CONTEXT = 8

    def __init__(self, decode: Callable[[Sequence[int]], str], stop_strings: Sequence[str]):
        self._decode = decode
        self._stops = tuple(s for s in stop_strings if s)
        self._held: list[int] = []
        self._context: list[int] = []

    def push(self, ids: Sequence[int]) -> tuple[list[int], bool]:
        """(ids safe to show now, whether a stop string ended the text)."""
        if not self._stops:
            return list(ids), False
        self._held.extend(ids)
        context = self._context[-self.CONTEXT :]
        base = len(self._decode(context))
        full = self._decode(context + self._held)
        hits = [i for i in (full.find(s) for s in self._stops) if i >= 0]
        if hits:
            return self._release(context, base, min(hits)), True
        limit = len(full)
        for stop in self._stops:
            for length in range(min(len(stop) - 1, len(full)), 0, -1):
                if full.endswith(stop[:length]):
                    limit = min(limit, len(full) - length)
                    break
        return self._release(context, base, limit), False

    def flush(self) -> list[int]:
        """The held ids, at the end of a generation that met no stop string."""
        held, self._held = self._held, []
        return held

    def _release(self, context: list[int], base: int, limit: int) -> list[int]:
        """Emit the longest run of held ids whose text ends at or before `limit`."""
        keep = 0
        for count in range(1, len(self._held) + 1):
            if len(self._decode(context + self._held[:count])) > limit:
                break
            keep = count
        if limit <= base:
            keep = 0
        released, self._held = self._held[:keep], self._held[keep:]
        self._context.extend(released)
        return released
