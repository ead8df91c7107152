"""The exporter's output: which lines the user sees, and the whole of it kept in a file.

The exporter (optimum-intel on torch and transformers) prints lines that say nothing to a user
and look alarming: Python warnings (TracerWarning and friends), torch's CUDA probing on a
machine without a GPU, deprecation notes of the libraries. The wizard hides them (a checkbox
shows them again); the log file under the logs folder keeps every line, for a bug report.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from qwen_mtp_desktop.core.models.export.progress import python_warning_lines

#: Known lines that are noise for a user, each with where it comes from.
NOISE_PATTERNS: tuple[re.Pattern[str], ...] = tuple(
    re.compile(pattern)
    for pattern in (
        # glog-style lines of torch's C++ side ("W1202 06:33:39.327000 6248 file.py:183] ...").
        r"^[WIE]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ",
        # torch probing for CUDA, NNPACK, GPUs on a machine that has none.
        r"\bCUDA\b|\bcuda\b|\bNNPACK\b|\bnvidia\b|\bNVIDIA\b|\bcuDNN\b",
        # transformers' deprecation and configuration notes.
        r"^`torch_dtype` is deprecated",
        r"^`loss_type=None` was set in the config",
        r"^You tried to access the `AttentionInterface`",
        # Qwen3.5's linear attention without the optional flash-linear-attention kernels.
        r"^The fast path is not available because one of the required librar",
        # optimum-intel's guess about an already converted model.
        r"^Could not infer whether the model was already converted",
    )
)
#: Export logs kept in the logs folder (the oldest are removed).
KEPT_LOGS = 20


def is_noise(line: str) -> bool:
    return any(pattern.search(line) for pattern in NOISE_PATTERNS)


def hidden_lines(lines: Sequence[str], *, after_hidden: bool = False) -> list[bool]:
    """For each line, whether the wizard hides it: a Python warning (with the source line
    printed under it) or known library noise. `after_hidden`: the line before `lines` was a
    warning's header (its indented source line follows)."""
    warnings = python_warning_lines(lines, after_warning=after_hidden)
    return [warning or is_noise(line) for line, warning in zip(lines, warnings, strict=True)]


def continues_warning(lines: Sequence[str], *, after_hidden: bool = False) -> bool:
    """Whether the line after `lines` may still belong to a Python warning."""
    flags = python_warning_lines(lines, after_warning=after_hidden)
    return bool(flags) and flags[-1]


class ExportLog:
    """The whole exporter output of one export, written as it comes, in
    `folder/<time>-<name>.log`; the oldest logs beyond KEPT_LOGS are removed."""

    def __init__(self, folder: Path, name: str) -> None:
        self.path: Path | None = None
        self._file: TextIO | None = None
        safe = re.sub(r"[^\w.-]+", "_", name)[:60] or "export"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for old in sorted(folder.glob("*.log"))[: -(KEPT_LOGS - 1) or None]:
                old.unlink(missing_ok=True)
            path = folder / f"{time.strftime('%Y%m%d-%H%M%S')}-{safe}.log"
            self._file = path.open("a", encoding="utf-8", errors="replace")
            self.path = path
        except OSError:  # a log that cannot be written must never stop an export
            self._file = None

    def write(self, line: str) -> None:
        if self._file is None:
            return
        try:
            self._file.write(line + "\n")
            self._file.flush()
        except OSError:
            self.close()

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
