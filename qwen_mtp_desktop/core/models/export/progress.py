"""Progress from the exporter's output: stages, tqdm/rich percentages, markers, pip lines."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from qwen_mtp_desktop.core.models.export.optimum_cli import MARKER, part_name
from qwen_mtp_desktop.core.models.export.options import ExportOptions
from qwen_mtp_desktop.core.units import format_bytes

Stage = Literal[
    "queued",
    "downloading",
    "loading",
    "converting",
    "tokenizer",
    "compressing",
    "saving",
    "verifying",
    "finishing",
]


STAGE_LABELS: dict[str, str] = {
    "queued": "Waiting for the previous export",
    "downloading": "Downloading from the Hugging Face hub",
    "loading": "Loading the exporter and the checkpoint",
    "converting": "Converting",
    "tokenizer": "Converting the tokenizer",
    "compressing": "Compressing weights",
    "saving": "Saving",
    "verifying": "Verifying the export",
    "finishing": "Writing the export record",
}


PART_LABELS: dict[str, str] = {
    "language_model": "language model",
    "text_embeddings": "text embeddings",
    "vision_embeddings": "vision encoder",
    "vision_embeddings_merger": "vision merger",
    "vision_embeddings_pos": "vision positions",
    "mtp": "MTP head",
}


#: The parts optimum-intel 2.2 converts (and compresses) for a Qwen3.5 VLM.
PART_ORDER = tuple(PART_LABELS)


#: Share of the bar per stage (normalised over the stages a job has).
STAGE_WEIGHTS: dict[str, float] = {
    "downloading": 20,
    "loading": 15,
    "converting": 40,
    "tokenizer": 5,
    "compressing": 20,
    "saving": 3,
    "verifying": 15,
    "finishing": 2,
}


_TQDM_RE = re.compile(r"^(?P<label>[^:|]{1,60}):\s+(?P<pct>\d{1,3})%\|")


_RICH_RE = re.compile(r"^(?P<label>[A-Za-z][\w ()-]{2,60}?)\s+━*\s*(?P<pct>\d{1,3})%")


@dataclass(frozen=True)
class ProgressEvent:
    stage: str
    #: What the user reads: "Converting the MTP head", "Compressing weights: language model".
    label: str
    #: Progress within the stage, 0..1, when known.
    fraction: float | None = None
    #: Progress of the whole job, 0..1 (never goes back).
    overall: float = 0.0
    part: str | None = None
    #: Download: bytes done / total.
    done_bytes: int | None = None
    total_bytes: int | None = None


def stage_plan(options: ExportOptions, *, download: bool, verify: bool = True) -> list[str]:
    """The stages a job goes through, in order."""
    stages = ["downloading"] if download else []
    stages += ["loading", "converting", "tokenizer"]
    mtp = options.mtp_weight_format
    if options.weight_format in ("int4", "int8") or mtp in ("int4", "int8"):
        stages.append("compressing")
    stages.append("saving")
    if verify:
        stages.append("verifying")
    stages.append("finishing")
    return stages


def expected_compressions(options: ExportOptions) -> int:
    """How many submodels nncf will compress (for the compression share of the bar)."""
    main = options.weight_format in ("int4", "int8")
    mtp = options.mtp_weight_format
    if main:
        return len(PART_ORDER) - (1 if mtp == "none" else 0)
    return 1 if mtp in ("int4", "int8") else 0


class ProgressParser:
    """Turns exporter output lines into `ProgressEvent`s.

    The markers printed by our entry points (`[qmtp] {...}`) carry the stage; raw tqdm / rich
    lines (transformers' "Loading weights: 45%|", nncf's "Applying Weight Compression ━━ 60%")
    refine the fraction within it, so progress still moves if a marker hook went missing.
    """

    def __init__(self, stages: Sequence[str], compressions: int = len(PART_ORDER)) -> None:
        self.stages = list(stages)
        total = sum(STAGE_WEIGHTS.get(s, 1) for s in self.stages) or 1.0
        self._start: dict[str, float] = {}
        acc = 0.0
        for stage in self.stages:
            self._start[stage] = acc / total
            acc += STAGE_WEIGHTS.get(stage, 1)
        self._share = {s: STAGE_WEIGHTS.get(s, 1) / total for s in self.stages}
        self.compressions = max(compressions, 1)
        self.stage = "loading"
        self.part: str | None = None
        self.overall = 0.0
        self._compress_index = -1
        self._convert_index = -1

    def _event(
        self,
        stage: str,
        fraction: float | None,
        label: str | None = None,
        **extra: Any,
    ) -> ProgressEvent:
        self.stage = stage
        start = self._start.get(stage)
        if start is not None:
            within = fraction if fraction is not None else 0.0
            if stage == "converting":
                index = max(self._convert_index, 0)
                within = (index + (fraction or 0.0)) / len(PART_ORDER)
            elif stage == "compressing":
                index = max(self._compress_index, 0)
                within = (index + (fraction or 0.0)) / self.compressions
            self.overall = max(self.overall, start + self._share[stage] * min(within, 1.0))
        text = label or self.label(stage, self.part)
        return ProgressEvent(stage, text, fraction, self.overall, self.part, **extra)

    @staticmethod
    def label(stage: str, part: str | None) -> str:
        base = STAGE_LABELS.get(stage, stage.capitalize())
        if part is None:
            return base
        shown = PART_LABELS.get(part, part.replace("_", " "))
        if stage == "converting":
            return f"Converting the {shown}"
        return f"{base}: {shown}"

    def enter(self, stage: str, part: str | None = None) -> ProgressEvent:
        """A stage the job itself starts (download, verify, finish)."""
        self.part = part
        return self._event(stage, 0.0)

    def finish(self) -> ProgressEvent:
        self.overall = 1.0
        return ProgressEvent("finishing", "Done", 1.0, 1.0)

    def feed(self, line: str) -> ProgressEvent | None:
        line = line.strip()
        if not line:
            return None
        if line.startswith(MARKER):
            try:
                payload = json.loads(line[len(MARKER) :])
            except json.JSONDecodeError:
                return None
            return self._marker(payload) if isinstance(payload, dict) else None
        match = _TQDM_RE.match(line)
        if match and match.group("label").strip().lower().startswith("loading weights"):
            return self._event("loading", int(match.group("pct")) / 100)
        match = _RICH_RE.match(line)
        if match and "compression" in match.group("label").lower():
            return self._event("compressing", int(match.group("pct")) / 100)
        return None

    def _marker(self, payload: dict[str, Any]) -> ProgressEvent | None:
        event = payload.get("event")
        if event == "stage":
            stage = str(payload.get("stage", ""))
            raw_part = payload.get("part")
            part = part_name(str(raw_part)) if raw_part else None
            if stage == "converting":
                self._convert_index += 1  # optimum's order varies; count parts as they come
            if stage == "compressing" and part is not None:
                self._compress_index += 1
            if stage == "saving" and self.stage == "verifying":
                return None
            self.part = part
            return self._event(stage, 0.0)
        if event == "progress":
            fraction = payload.get("fraction")
            value = float(fraction) if isinstance(fraction, int | float) else None
            stage = "compressing" if self.stage in ("compressing", "saving") else self.stage
            if stage == "compressing" and self._compress_index < 0:
                self._compress_index = 0
            return self._event(stage, value)
        if event == "download":
            done, total = payload.get("done"), payload.get("total")
            if isinstance(done, int | float) and isinstance(total, int | float) and total > 0:
                fraction = min(float(done) / float(total), 1.0)
                label = f"Downloading: {format_bytes(int(done))} of {format_bytes(int(total))}"
                return self._event(
                    "downloading",
                    fraction,
                    label,
                    done_bytes=int(done),
                    total_bytes=int(total),
                )
            return self._event("downloading", None)
        return None


def read_markers(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Every `[qmtp]` JSON payload among `lines`."""
    found = []
    for line in lines:
        line = line.strip()
        if line.startswith(MARKER):
            with contextlib.suppress(json.JSONDecodeError):
                payload = json.loads(line[len(MARKER) :])
                if isinstance(payload, dict):
                    found.append(payload)
    return found


def pip_stage(line: str) -> str | None:
    """A short label for pip's progress lines (the install log shows every line anyway)."""
    for prefix, label in (
        ("Collecting ", "Resolving"),
        ("Downloading ", "Downloading"),
        ("Installing collected packages", "Installing"),
        ("Successfully installed", "Installed"),
    ):
        if line.startswith(prefix):
            what = line[len(prefix) :].split()[0] if label in ("Resolving", "Downloading") else ""
            return f"{label} {what}".strip()
    return None


# Python's warnings module prints "file.py:12: TracerWarning: message" and then the source
# line, indented; libraries log "WARNING:nncf:…". Useful to a developer, noise to most users.
_WARNING_HEADER = re.compile(r"\b[A-Z]\w*Warning: |^\s*warnings\.warn\(|^WARNING[:\s]")


def python_warning_lines(lines: Sequence[str], *, after_warning: bool = False) -> list[bool]:
    """For each exporter log line, whether it belongs to a Python warning (its header, or the
    indented source line printed under it). `after_warning`: the line before `lines` did."""
    flags: list[bool] = []
    previous = after_warning
    for line in lines:
        if _WARNING_HEADER.search(line):
            flag = True
        else:
            flag = previous and line[:1] in (" ", "\t") and bool(line.strip())
        flags.append(flag)
        previous = flag
    return flags
