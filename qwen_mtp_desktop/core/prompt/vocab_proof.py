"""Proof that the fast byte table decodes every token exactly like the runtime's detokenizer.

The engine streams text through `ByteLevelVocab` (a table read from tokenizer.json) instead
of the runtime's detokenizer. tokenizer.json comes with the model and may disagree with the
detokenizer IR on any id, so a sample proves nothing: every id the model can emit is decoded by
both, in batches, before the table is used.

A token holding part of a UTF-8 character has no text of its own (both sides show U+FFFD),
so such a token is also decoded between single-byte tokens that complete its character: the
runtime's text then pins its exact bytes (UTF-8 is a one-to-one code). The single-byte tokens
are pinned the same way. The verdict is cached per (tokenizer.json, detokenizer IR, runtime
version), so only the first load of a model pays for it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from qwen_mtp_desktop.core.files.fileio import atomic_write_text
from qwen_mtp_desktop.core.files.safe_files import FileKind, read_json_file

log = logging.getLogger(__name__)

#: Sequences per runtime decode call.
BATCH = 8192
PROOF_VERSION = 1

DecodeBatch = Callable[[list[list[int]]], Sequence[str]]


class ByteTable(Protocol):
    """What the proof needs from the table (core.decoding.ByteLevelVocab has it)."""

    def __len__(self) -> int: ...

    def decode_bytes(self, token_ids: Sequence[int]) -> bytes: ...


def single_byte_ids(table: ByteTable) -> dict[int, int]:
    """Byte value -> the first id the table says is exactly that byte."""
    found: dict[int, int] = {}
    for token_id in range(len(table)):
        raw = table.decode_bytes([token_id])
        if len(raw) == 1 and raw[0] not in found:
            found[raw[0]] = token_id
    return found


@dataclass(frozen=True)
class ProofResult:
    ok: bool
    checked_ids: int
    context_checks: int
    seconds: float
    #: The first ids that decode differently (at most 10), for the log.
    mismatches: tuple[int, ...] = ()
    cached: bool = False


def _lead_for(continuations: int) -> int | None:
    """A lead byte that makes `continuations` continuation bytes one whole character."""
    return {1: 0xC2, 2: 0xE1, 3: 0xF1}.get(continuations)


def _expected_length(lead: int) -> int:
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _completion(raw: bytes) -> tuple[bytes, bytes] | None:
    """(prefix, suffix) bytes that make `raw` valid UTF-8 as a whole, or None if none can."""
    leading = len(raw) - len(raw.lstrip(bytes(range(0x80, 0xC0))))
    prefix = b""
    if leading:
        lead = _lead_for(leading)
        if lead is None:
            return None
        prefix = bytes([lead])
    body = prefix + raw
    suffix = b""
    # The last lead byte: is its character cut short at the end?
    for back in range(1, min(4, len(body)) + 1):
        byte = body[-back]
        if byte >= 0xC0:
            need = _expected_length(byte) - back
            if need > 0:
                second = {0xE0: 0xA0, 0xF0: 0x90}.get(byte, 0x80) if back == 1 else 0x80
                suffix = bytes([second] + [0x80] * (need - 1))
            break
        if byte < 0x80:
            break
    try:
        (body + suffix).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return prefix, suffix


def prove(table: ByteTable, decode_batch: DecodeBatch, emit_limit: int = 0) -> ProofResult:
    """Compare every id below max(table size, emit_limit) alone, and every partial-character
    token inside a completing context; `decode_batch` is the runtime's detokenizer."""
    started = time.perf_counter()
    size = len(table)
    byte_ids = single_byte_ids(table)
    total = max(size, emit_limit)
    sequences: list[list[int]] = [[i] for i in range(total)]
    raws = [table.decode_bytes([i]) for i in range(size)]
    expected = [raw.decode("utf-8", "replace") for raw in raws] + [""] * (total - size)
    contexts = 0
    for token_id, raw in enumerate(raws):
        if "\ufffd" not in expected[token_id]:
            continue  # whole characters: compared alone (a real U+FFFD is compared alone too)
        completion = _completion(raw)
        if completion is None:
            continue
        prefix, suffix = completion
        if not all(b in byte_ids for b in prefix + suffix):
            continue
        ids = [byte_ids[b] for b in prefix] + [token_id] + [byte_ids[b] for b in suffix]
        sequences.append(ids)
        expected.append((prefix + raw + suffix).decode("utf-8"))
        contexts += 1
    mismatches: list[int] = []
    for start in range(0, len(sequences), BATCH):
        batch = sequences[start : start + BATCH]
        got = decode_batch(batch)
        for offset, text in enumerate(got):
            if text != expected[start + offset]:
                sequence = batch[offset]
                mismatches.append(
                    sequence[0] if len(sequence) == 1 else sequence[len(sequence) // 2]
                )
                if len(mismatches) >= 10:
                    break
        if len(got) != len(batch) or len(mismatches) >= 10:
            mismatches = mismatches or [batch[0][0]]
            break
    return ProofResult(
        ok=not mismatches,
        checked_ids=total,
        context_checks=contexts,
        seconds=time.perf_counter() - started,
        mismatches=tuple(mismatches),
    )


def _fingerprint(model_dir: Path, runtime_version: str) -> str:
    digest = hashlib.sha256(f"{PROOF_VERSION}|{runtime_version}".encode())
    for name in ("tokenizer.json", "openvino_detokenizer.xml", "openvino_detokenizer.bin"):
        digest.update(name.encode())
        try:
            with (model_dir / name).open("rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError:
            digest.update(b"<missing>")
    return digest.hexdigest()


def cached_prove(
    model_dir: Path,
    cache_dir: Path | None,
    runtime_version: str,
    run: Callable[[], ProofResult],
) -> ProofResult:
    """`run()`'s verdict, remembered under `cache_dir` by the files' fingerprint."""
    if cache_dir is None:
        return run()
    started = time.perf_counter()
    key = _fingerprint(model_dir, runtime_version)
    record = cache_dir / "vocab-proofs" / f"{key}.json"
    try:
        data = read_json_file(record, kind=FileKind("vocabulary proof", ""))
        if isinstance(data, dict) and isinstance(data.get("ok"), bool):
            return ProofResult(
                ok=data["ok"],
                checked_ids=int(data.get("checked_ids", 0)),
                context_checks=int(data.get("context_checks", 0)),
                seconds=time.perf_counter() - started,
                cached=True,
            )
    except (OSError, ValueError, TypeError):
        pass
    result = run()
    try:
        atomic_write_text(
            record,
            json.dumps(
                {
                    "ok": result.ok,
                    "checked_ids": result.checked_ids,
                    "context_checks": result.context_checks,
                    "seconds": round(result.seconds, 3),
                }
            ),
        )
    except OSError:
        log.warning("could not cache the vocabulary proof in %s", record.parent)
    return result
