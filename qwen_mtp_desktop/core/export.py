"""Export a Qwen3.5 checkpoint to an OpenVINO model directory with its MTP head.

The exporter (optimum-intel) runs as a subprocess in its own process group: it imports torch and
transformers, which the app process never does, and a crash or a cancel there cannot take the app
down. Cancelling escalates SIGINT -> SIGTERM -> SIGKILL to the whole group. Output goes to a
staging folder beside the destination (`.NAME.exporting-XXXX`, which also holds the exporter's
TMPDIR) and is moved into place only when the export succeeded and verified; a staging folder
left by a crash is removed by `cleanup_stale_exports()` at the next start.

A job (`ExportJob.run`) is: [download from the hub] -> export -> verify (files, the precision of
every component read from the IR, and MTP greedy output == plain greedy output in a subprocess)
-> manifest (`library.MANIFEST_NAME`) -> move into place. Progress arrives as `ProgressEvent`s
parsed from the subprocess output (see `ProgressParser`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import psutil

from qwen_mtp_desktop import __version__
from qwen_mtp_desktop.core.environment import package_version
from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.fileio import atomic_write_text
from qwen_mtp_desktop.core.ir import WeightInfo
from qwen_mtp_desktop.core.optimum_cli import MARKER, part_name
from qwen_mtp_desktop.core.paths import app_paths
from qwen_mtp_desktop.core.safe_files import FileKind, read_json_file

WeightFormat = Literal["fp32", "fp16", "int8", "int4"]
GroupSizeFallback = Literal["error", "ignore", "adjust"]
MtpWeightFormat = Literal["default", "same", "none", "int8", "int4"]
JobStatus = Literal["succeeded", "failed", "cancelled"]

WEIGHT_FORMATS: tuple[WeightFormat, ...] = ("fp16", "int8", "int4")
MTP_WEIGHT_FORMATS: tuple[MtpWeightFormat, ...] = ("default", "same", "none", "int8", "int4")

#: Files every Qwen3.5 + MTP export must contain (each .xml with its .bin).
REQUIRED_COMPONENTS = (
    "openvino_language_model",
    "openvino_text_embeddings_model",
    "openvino_mtp_model",
    "openvino_tokenizer",
    "openvino_detokenizer",
)
#: The task that exports the VLM together with its MTP head (the text-only path has no MTP).
EXPORT_TASK = "image-text-to-text"
STAGING_INFIX = ".exporting-"
REPLACED_INFIX = ".replaced-"
OWNER_FILE = "owner.json"
#: Packages whose versions go into the manifest.
MANIFEST_PACKAGES = (
    "optimum-intel",
    "optimum",
    "transformers",
    "nncf",
    "torch",
    "openvino",
    "openvino-genai",
    "openvino-tokenizers",
    "huggingface_hub",
)
_STAGING_RE = re.compile(r"^\.(?P<name>.+)\.exporting-(?P<token>[A-Za-z0-9_-]+)$")
_REPLACED_RE = re.compile(r"^\.(?P<name>.+)\.replaced-(?P<token>[A-Za-z0-9_-]+)$")
_HUB_ID_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_HASH_CHUNK = 1 << 20
LOG_TAIL_LINES = 40


class ExportError(UserFacingError):
    """An export failed: message + fix say why and what to do; `log_tail` ends the exporter log."""

    code = "EXPORT_FAILED"

    def __init__(
        self, message: str, fix: str = "", *, code: str | None = None, log_tail: str = ""
    ) -> None:
        super().__init__(message, fix, code=code)
        self.log_tail = log_tail


# --- options and sources -------------------------------------------------------------------


@dataclass(frozen=True)
class ExportOptions:
    weight_format: WeightFormat | None = None
    group_size: int | None = None
    sym: bool = False
    ratio: float | None = None
    group_size_fallback: GroupSizeFallback | None = None
    trust_remote_code: bool = False
    #: How the MTP head is compressed: optimum-intel's choice, like the main model, not at all
    #: (fp16), or INT8 / INT4 regardless of the main model.
    mtp_weight_format: MtpWeightFormat = "default"

    @classmethod
    def recommended(cls, weight_format: WeightFormat = "int4", **changes: Any) -> ExportOptions:
        """The wizard's defaults: INT4 skips what fits no group (the MTP RoPE frequencies)."""
        options = replace(cls(weight_format=weight_format), **changes)
        int4 = weight_format == "int4" or options.mtp_weight_format == "int4"
        if int4 and "group_size_fallback" not in changes:
            options = replace(options, group_size_fallback="ignore")
        return options

    def validate(self) -> None:
        if self.weight_format not in (None, "fp32", "fp16", "int8", "int4"):
            raise ExportError(f"Unknown weight format {self.weight_format!r}.", code="BAD_OPTIONS")
        if self.mtp_weight_format not in MTP_WEIGHT_FORMATS:
            raise ExportError(
                f"Unknown MTP weight format {self.mtp_weight_format!r}.",
                f"Choose one of {', '.join(MTP_WEIGHT_FORMATS)}.",
                code="BAD_OPTIONS",
            )
        if self.group_size is not None and self.group_size != -1 and self.group_size < 1:
            raise ExportError(
                f"Group size must be a positive number (or -1 for per-channel), not "
                f"{self.group_size}.",
                "Use 128, 64, 32 or 16.",
                code="BAD_OPTIONS",
            )
        if self.ratio is not None and not 0 < self.ratio <= 1:
            raise ExportError(
                f"Ratio must be between 0 and 1, not {self.ratio}.",
                "Use 1.0 to compress every layer to INT4, or e.g. 0.8 to keep 20 % in INT8.",
                code="BAD_OPTIONS",
            )

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ExportSource:
    """A checkpoint to export: a local folder or a Hugging Face hub repository."""

    kind: Literal["folder", "hub"]
    value: str
    revision: str | None = None

    @property
    def display(self) -> str:
        if self.kind == "hub" and self.revision:
            return f"{self.value}@{self.revision}"
        return self.value

    @property
    def short_name(self) -> str:
        """A name for the destination folder: repo name, or the checkpoint folder's name."""
        if self.kind == "hub":
            return self.value.rsplit("/", 1)[-1]
        path = Path(self.value)
        # A folder inside the HF cache (models--org--name/snapshots/<hash>) is named after the repo.
        if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
            return path.parent.parent.name.split("--")[-1]
        return path.name or "model"


def parse_source(text: str, revision: str | None = None) -> ExportSource:
    """A folder if it exists (or looks like a path), else a hub id like `Qwen/Qwen3.5-0.8B`.

    `org/name@rev` selects a hub revision.
    """
    text = text.strip()
    if not text:
        raise ExportError(
            "No source was given.",
            "Enter a Hugging Face model id (e.g. Qwen/Qwen3.5-0.8B) or choose a checkpoint folder.",
            code="NO_SOURCE",
        )
    try:
        path = Path(text).expanduser()
    except RuntimeError:  # "~name/..." for a user that does not exist
        path = Path(text)
    if path.exists() or text.startswith(("/", ".", "~", "\\")) or re.match(r"^[A-Za-z]:", text):
        return ExportSource("folder", str(path.resolve()))
    repo, _, rev = text.partition("@")
    if _HUB_ID_RE.match(repo):
        return ExportSource("hub", repo, revision or rev or None)
    return ExportSource("folder", str(path.resolve()))


def default_destination(
    source: ExportSource, options: ExportOptions, models_dir: Path | None = None
) -> Path:
    """`models_dir / <name>-<format>`, numbered if taken; the model library scans models_dir."""
    root = models_dir if models_dir is not None else app_paths().models_dir
    fmt = options.weight_format or "default"
    base = f"{source.short_name}-{fmt}"
    if options.mtp_weight_format not in ("default", "same"):
        base += f"-mtp-{options.mtp_weight_format}"
    candidate = root / base
    number = 2
    while candidate.exists() and (not candidate.is_dir() or any(candidate.iterdir())):
        candidate = root / f"{base}-{number}"
        number += 1
    return candidate


def export_command(
    source: str, output_dir: Path, options: ExportOptions, *, python: str | None = None
) -> list[str]:
    """The optimum-cli command line for this export, run by the given interpreter."""
    command = [
        python or sys.executable,
        "-m",
        "qwen_mtp_desktop.core.optimum_cli",
        "export",
        "openvino",
        "--model",
        source,
        "--task",
        EXPORT_TASK,
    ]
    if options.weight_format is not None:
        command += ["--weight-format", options.weight_format]
    if options.group_size is not None:
        command += ["--group-size", str(options.group_size)]
    if options.sym:
        command.append("--sym")
    if options.ratio is not None:
        command += ["--ratio", str(options.ratio)]
    if options.group_size_fallback is not None:
        command += ["--group-size-fallback", options.group_size_fallback]
    if options.trust_remote_code:
        command.append("--trust-remote-code")
    if options.mtp_weight_format != "default":
        command += ["--mtp-weight-format", options.mtp_weight_format]
    command.append(str(output_dir))
    return command


def missing_components(model_dir: Path) -> list[str]:
    """Required component files (xml and bin) absent from `model_dir`."""
    missing = []
    for component in REQUIRED_COMPONENTS:
        for suffix in (".xml", ".bin"):
            if not (model_dir / f"{component}{suffix}").is_file():
                missing.append(f"{component}{suffix}")
    return missing


# --- progress ------------------------------------------------------------------------------

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
                label = f"Downloading: {_size(int(done))} of {_size(int(total))}"
                return self._event(
                    "downloading",
                    fraction,
                    label,
                    done_bytes=int(done),
                    total_bytes=int(total),
                )
            return self._event("downloading", None)
        return None


def _size(value: int) -> str:
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if value >= scale:
            return f"{value / scale:.1f} {unit}"
    return f"{value} B"


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


# --- supervised subprocess -----------------------------------------------------------------


@dataclass(frozen=True)
class ProcessStats:
    elapsed_s: float
    rss_bytes: int
    peak_rss_bytes: int


@dataclass
class ProcessOutcome:
    command: list[str]
    exit_status: int | None
    cancelled: bool
    seconds: float
    peak_rss_bytes: int
    tail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exit_status == 0 and not self.cancelled

    @property
    def signal_name(self) -> str | None:
        if self.exit_status is not None and self.exit_status < 0:
            with contextlib.suppress(ValueError):
                return signal.Signals(-self.exit_status).name
            return f"signal {-self.exit_status}"
        return None


def tree_rss(pid: int) -> int:
    """Resident memory of a process and all its descendants (0 if it is gone)."""
    try:
        process = psutil.Process(pid)
        members = [process, *process.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for member in members:
        with contextlib.suppress(psutil.Error):
            total += member.memory_info().rss
    return total


def _split_lines(buffer: bytes) -> tuple[list[bytes], bytes]:
    """Split on \\n and \\r (tqdm redraws with \\r); returns (complete lines, remainder)."""
    parts = re.split(rb"\r\n|\r|\n", buffer)
    return parts[:-1], parts[-1]


class SupervisedProcess:
    """Runs one command in its own process group, streaming its output line by line.

    `run()` blocks; every callback is called on the calling thread. Setting `cancel` escalates
    SIGINT -> SIGTERM -> SIGKILL to the whole group, `grace` seconds apart; when the command
    ends, whatever is left in its group is killed, so nothing outlives the job.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        on_line: Callable[[str], None] | None = None,
        on_stats: Callable[[ProcessStats], None] | None = None,
        cancel: threading.Event | None = None,
        grace: tuple[float, float] = (5.0, 5.0),
        sample_interval: float = 0.5,
        tail_lines: int = LOG_TAIL_LINES,
    ) -> None:
        self.command = list(command)
        self.env = env
        self.cwd = cwd
        self.on_line = on_line
        self.on_stats = on_stats
        self.cancel = cancel or threading.Event()
        self.grace = grace
        self.sample_interval = sample_interval
        self.tail: deque[str] = deque(maxlen=tail_lines)
        self.pid: int | None = None

    def run(self) -> ProcessOutcome:
        started = time.monotonic()
        process = subprocess.Popen(
            self.command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,  # its own process group: signals reach every child
        )
        self.pid = process.pid
        assert process.stdout is not None
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(
            target=self._read, args=(process.stdout, lines), name="export-log", daemon=True
        )
        reader.start()
        peak = 0
        last_sample = 0.0
        escalation: list[tuple[float, int]] = []
        cancelled = False
        eof = False
        exited_at: float | None = None
        try:
            while not eof or process.poll() is None:
                if not eof and process.poll() is not None:
                    # A grandchild may still hold the pipe open: give it 2 s, then kill it.
                    exited_at = exited_at or time.monotonic()
                    if time.monotonic() - exited_at > 2.0:
                        self._signal_group(process.pid, signal.SIGKILL)
                    if time.monotonic() - exited_at > 5.0:
                        break
                if self.cancel.is_set() and not cancelled:
                    cancelled = True
                    now = time.monotonic()
                    escalation = [
                        (now, signal.SIGINT),
                        (now + self.grace[0], signal.SIGTERM),
                        (now + self.grace[0] + self.grace[1], signal.SIGKILL),
                    ]
                while escalation and time.monotonic() >= escalation[0][0]:
                    _, sig = escalation.pop(0)
                    self._signal_group(process.pid, sig)
                try:
                    line = lines.get(timeout=0.1)
                except queue.Empty:
                    line = ""
                if line is None:
                    eof = True
                elif line and self.on_line is not None:
                    self.on_line(line)
                now = time.monotonic()
                if now - last_sample >= self.sample_interval:
                    last_sample = now
                    rss = tree_rss(process.pid) if process.poll() is None else 0
                    peak = max(peak, rss)
                    if self.on_stats is not None:
                        self.on_stats(ProcessStats(now - started, rss, peak))
                if eof and process.poll() is None:
                    time.sleep(0.05)
        finally:
            if process.poll() is None:  # our caller raised: leave nothing running
                self._signal_group(process.pid, signal.SIGKILL)
            process.wait()
            # Children that outlived the leader (e.g. a worker that ignored SIGINT) die too.
            self._signal_group(process.pid, signal.SIGKILL)
            reader.join(timeout=5)
            process.stdout.close()
        return ProcessOutcome(
            self.command,
            process.returncode,
            cancelled,
            time.monotonic() - started,
            peak,
            list(self.tail),
        )

    def _read(self, stream: Any, lines: queue.Queue[str | None]) -> None:
        buffer = b""
        fd = stream.fileno()
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                complete, buffer = _split_lines(buffer + chunk)
                for raw in complete:
                    self._push(raw, lines)
            if buffer:
                self._push(buffer, lines)
        except OSError:
            pass
        finally:
            lines.put(None)

    def _push(self, raw: bytes, lines: queue.Queue[str | None]) -> None:
        text = raw.decode("utf-8", errors="replace").rstrip()
        if text:
            self.tail.append(text)
            lines.put(text)

    @staticmethod
    def _signal_group(pgid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


# --- staging folders -----------------------------------------------------------------------


def staging_registry_dir() -> Path:
    return app_paths().cache_dir / "export-staging"


def _process_identity() -> dict[str, Any]:
    me = psutil.Process()
    return {"pid": me.pid, "create_time": me.create_time()}


def _owner_alive(owner: dict[str, Any]) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    try:
        process = psutil.Process(pid)
        created = owner.get("create_time")
        return not isinstance(created, int | float) or abs(process.create_time() - created) < 1
    except psutil.Error:
        return False


def _read_owner(folder: Path) -> dict[str, Any]:
    try:
        raw = read_json_file(folder / OWNER_FILE, kind=FileKind(OWNER_FILE, ""))
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


@dataclass
class Staging:
    """`.NAME.exporting-TOKEN/` beside the destination: `model/` = the export, `tmp/` = TMPDIR."""

    root: Path
    destination: Path
    registry_entry: Path | None = None

    @property
    def model_dir(self) -> Path:
        return self.root / "model"

    @property
    def tmp_dir(self) -> Path:
        return self.root / "tmp"

    @classmethod
    def create(cls, destination: Path) -> Staging:
        token = secrets.token_hex(4)
        root = destination.parent / f".{destination.name}{STAGING_INFIX}{token}"
        root.mkdir(parents=True)
        (root / "tmp").mkdir()
        owner = {**_process_identity(), "destination": str(destination)}
        (root / OWNER_FILE).write_text(json.dumps(owner), encoding="utf-8")
        entry = staging_registry_dir() / f"{token}.json"
        try:
            atomic_write_text(entry, json.dumps({**owner, "staging": str(root)}))
        except OSError:  # the registry only helps cleanup of custom destinations
            return cls(root, destination, None)
        return cls(root, destination, entry)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        if self.registry_entry is not None:
            with contextlib.suppress(OSError):
                self.registry_entry.unlink()


def cleanup_stale_exports(roots: Iterable[Path] = ()) -> list[Path]:
    """Remove staging folders left by exports whose process is gone; call at app start.

    Looks in `roots` (default: the models folder) and in the registry of staging folders made
    for custom destinations. A folder renamed aside to be replaced is renamed back if its new
    version never arrived. Returns what was removed or restored.
    """
    handled: list[Path] = []
    parents = {Path(r) for r in roots} or {app_paths().models_dir}
    registry = staging_registry_dir()
    if registry.is_dir():
        for entry in sorted(registry.glob("*.json")):
            try:
                raw = read_json_file(entry, kind=FileKind(entry.name, ""))
            except (OSError, ValueError):
                raw = {}
            if isinstance(raw, dict) and _owner_alive(raw):
                continue
            staging = Path(str(raw.get("staging", ""))) if isinstance(raw, dict) else None
            if staging is not None and _STAGING_RE.match(staging.name):
                parents.add(staging.parent)
            with contextlib.suppress(OSError):
                entry.unlink()
    for parent in sorted(parents):
        try:
            children = list(parent.iterdir())
        except OSError:
            continue
        for child in children:
            if not child.is_dir():
                continue
            if _STAGING_RE.match(child.name):
                if _owner_alive(_read_owner(child)):
                    continue
                shutil.rmtree(child, ignore_errors=True)
                handled.append(child)
            elif match := _REPLACED_RE.match(child.name):
                original = parent / match.group("name")
                if original.exists():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        child.rename(original)
                handled.append(child)
    return handled


def _move_into_place(source: Path, destination: Path, *, overwrite: bool) -> None:
    """Rename the finished export to `destination`; an old folder goes only after that."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    aside: Path | None = None
    if destination.exists():
        if destination.is_dir() and not any(destination.iterdir()):
            destination.rmdir()
        elif overwrite:
            from qwen_mtp_desktop.core.export_guard import replace_problem

            problem = replace_problem(destination)  # checked again: only an export goes
            if problem is not None:
                raise ExportError(problem, "Choose a new folder name.", code="DESTINATION_EXISTS")
            aside = destination.parent / (
                f".{destination.name}{REPLACED_INFIX}{secrets.token_hex(4)}"
            )
            destination.rename(aside)
        else:
            raise ExportError(
                f"{destination} already exists and is not empty.",
                "Choose another destination or allow replacing it.",
                code="DESTINATION_EXISTS",
            )
    try:
        source.rename(destination)
    except OSError:
        if aside is not None:  # put the old model back
            aside.rename(destination)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


# --- verification --------------------------------------------------------------------------


@dataclass(frozen=True)
class VerifyItem:
    key: str
    status: Literal["pass", "warn", "fail"]
    message: str
    fix: str = ""

    def to_json_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class Verification:
    items: list[VerifyItem] = field(default_factory=list)
    precisions: dict[str, str] = field(default_factory=dict)
    generation: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not any(item.status == "fail" for item in self.items)

    @property
    def files_ok(self) -> bool:
        """False for failures that make the folder unusable (missing or unreadable IR).

        A wrong precision or an MTP/plain mismatch keeps the model but fails verification.
        """
        return not any(item.status == "fail" and item.key in ("files", "ir") for item in self.items)

    def summary(self) -> str:
        failed = [item.message for item in self.items if item.status == "fail"]
        return failed[0] if failed else "All checks passed."

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "items": [item.to_json_dict() for item in self.items],
            "precisions": dict(self.precisions),
            "generation": self.generation,
        }


def _expected_precision(fmt: str | None) -> str:
    return {"int4": "INT4", "int8": "INT8", "fp16": "FP16", "fp32": "FP32"}.get(fmt or "", "FP32")


def expected_mtp_format(options: ExportOptions) -> str:
    main = options.weight_format or "fp32"
    choice = options.mtp_weight_format
    if choice in ("default", "same"):
        return main  # optimum-intel 2.2 gives the MTP head the main model's config
    if choice == "none":
        return "fp16"
    return choice


#: The precision asked for must hold at least this share of a component's weights: INT4 exports
#: keep vocabulary-sized tables (and, with ratio < 1, some layers) in INT8.
MIN_PRECISION_SHARE = 0.25


def precision_share(weights: Sequence[WeightInfo], precision: str) -> float:
    total = sum(w.parameters for w in weights)
    if not total:
        return 0.0
    return sum(w.parameters for w in weights if w.precision == precision) / total


def verify_precisions(model_dir: Path, options: ExportOptions) -> Verification:
    """Files present and each component stored in the precision that was asked for."""
    from qwen_mtp_desktop.core.ir import IrError, read_ir

    result = Verification()
    missing = missing_components(model_dir)
    if missing:
        result.items.append(
            VerifyItem(
                "files",
                "fail",
                f"The export is incomplete: {', '.join(missing)} missing.",
                "An MTP head is only exported for Qwen3.5 checkpoints with mtp.* weights.",
            )
        )
        return result
    result.items.append(VerifyItem("files", "pass", "openvino_mtp_model.xml/.bin and all parts."))
    checks = (
        ("language_model", "openvino_language_model", _expected_precision(options.weight_format)),
        ("mtp", "openvino_mtp_model", _expected_precision(expected_mtp_format(options))),
    )
    for key, stem, expected in checks:
        try:
            info = read_ir(model_dir / f"{stem}.xml")
        except IrError as exc:
            result.items.append(VerifyItem("ir", "fail", f"{stem}.xml {exc.reason}."))
            continue
        result.precisions[key] = info.precision_summary
        label = PART_LABELS.get(key, key)
        share = precision_share(info.weights, expected)
        if share < MIN_PRECISION_SHARE:
            result.items.append(
                VerifyItem(
                    f"precision:{key}",
                    "fail",
                    f"The {label} is stored as {info.precision_summary or 'nothing readable'}, "
                    f"but {expected} was asked for.",
                    "Check the group size (it must divide the layer sizes) and re-export; if it "
                    "happens again, report it with the export log.",
                )
            )
        else:
            result.items.append(
                VerifyItem(
                    f"precision:{key}",
                    "pass",
                    f"{label[:1].upper()}{label[1:]}: {info.precision_summary}.",
                )
            )
        if key == "mtp":
            rope = [
                w
                for w in info.weights
                if ("rotary_emb" in w.name or "inv_freq" in w.name) and w.symmetric is not None
            ]
            if rope:
                result.items.append(
                    VerifyItem(
                        "mtp_rope",
                        "warn",
                        f"The MTP head's RoPE frequencies are stored as {rope[0].label}, which "
                        "distorts positions at long context and can lower acceptance.",
                        "Choose MTP compression INT8 or INT4 (they keep RoPE in full "
                        "precision), or main format INT4 with group-size fallback 'ignore'.",
                    )
                )
    return result


GENERATION_PROMPT = "Count from 1 to 40, separated by spaces."


def check_generation(
    model_dir: Path, *, max_new_tokens: int = 32, num_assistant_tokens: int = 2
) -> dict[str, Any]:
    """Greedy MTP output vs greedy plain output, f32 numerics, in this process.

    Returns {"equal", "tokens", "mtp_tokens", "baseline_tokens", "first_difference",
    "acceptance_rate", ...}. Run it in a subprocess (`python -m qwen_mtp_desktop.core.export
    check-generation DIR`) so a native crash or the memory it takes stays out of the app.
    """
    from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message

    messages = [Message("user", GENERATION_PROMPT)]
    settings = GenerationSettings(
        max_new_tokens=max_new_tokens, num_assistant_tokens=num_assistant_tokens
    )
    runs: dict[str, dict[str, Any]] = {}
    engine = Engine()
    try:
        for mode in ("baseline", "mtp"):
            loaded = engine.load(model_dir, LoadOptions(mtp=mode == "mtp", exact_numerics=True))
            if loaded.mode != mode:
                raise ExportError(
                    "The exported model did not load with its MTP head.",
                    "Re-export; the MTP IR may be damaged.",
                    code="MTP_NOT_LOADED",
                )
            generation = engine.generate(messages, settings)
            tokens: list[int] = []
            for chunk in generation:
                tokens.extend(chunk.token_ids)
            stats = generation.stats
            runs[mode] = {
                "tokens": tokens,
                "text": generation.answer,
                "acceptance_rate": stats.acceptance_rate if stats else None,
                "load_s": loaded.load_s,
            }
            engine.unload()
    finally:
        engine.unload()
    base, mtp = runs["baseline"]["tokens"], runs["mtp"]["tokens"]
    first = next((i for i, (a, b) in enumerate(zip(base, mtp, strict=False)) if a != b), None)
    if first is None and len(base) != len(mtp):
        first = min(len(base), len(mtp))
    return {
        "equal": base == mtp,
        "tokens": len(base),
        "baseline_tokens": base,
        "mtp_tokens": mtp,
        "first_difference": first,
        "num_assistant_tokens": num_assistant_tokens,
        "acceptance_rate": runs["mtp"]["acceptance_rate"],
        "baseline_text": runs["baseline"]["text"],
        "mtp_text": runs["mtp"]["text"],
    }


def generation_check_command(model_dir: Path, *, python: str | None = None) -> list[str]:
    return [python or sys.executable, "-m", "qwen_mtp_desktop.core.export", "check-generation",
            str(model_dir)]  # fmt: skip


def generation_item(result: dict[str, Any]) -> VerifyItem:
    if result.get("error"):
        return VerifyItem(
            "generation",
            "fail",
            f"The exported model could not be run with its MTP head: {result['error']}",
            "Check it in the Models panel; if its files are fine, report this with the log.",
        )
    n = result.get("num_assistant_tokens")
    if result.get("equal"):
        rate = result.get("acceptance_rate")
        accepted = f", {rate:.0%} of drafts accepted" if isinstance(rate, float) else ""
        return VerifyItem(
            "generation",
            "pass",
            f"Loads with its MTP head; greedy MTP output (n={n}) equals plain decoding over "
            f"{result.get('tokens')} tokens{accepted}.",
        )
    first = result.get("first_difference")
    base = result.get("baseline_tokens") or []
    mtp = result.get("mtp_tokens") or []
    at = ""
    if isinstance(first, int):
        b = base[first] if first < len(base) else "end"
        m = mtp[first] if first < len(mtp) else "end"
        at = f" at token {first} (plain {b}, MTP {m})"
    return VerifyItem(
        "generation",
        "fail",
        f"Greedy MTP output differs from plain decoding{at}.",
        "Run the Benchmark panel's correctness check; a difference at a near-tie logit is "
        "numerical, an early and repeated one points at a faulty MTP head.",
    )


# --- manifest ------------------------------------------------------------------------------


def sha256_file(path: Path, cancel: threading.Event | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            if cancel is not None and cancel.is_set():
                raise ExportCancelledError()
            digest.update(chunk)
    return digest.hexdigest()


def manifest_versions() -> dict[str, str]:
    versions = {"qwen-mtp-desktop": __version__, "python": sys.version.split()[0]}
    for name in MANIFEST_PACKAGES:
        version = package_version(name)
        if version:
            versions[name] = version
    return versions


def write_manifest(
    model_dir: Path,
    *,
    source: str,
    revision: str | None,
    options: ExportOptions,
    duration_s: float,
    peak_rss_bytes: int,
    extra: dict[str, Any] | None = None,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """Write `library.MANIFEST_NAME` with checksums of every file; returns what was written."""
    from qwen_mtp_desktop.core.library import MANIFEST_NAME, ExportManifest

    files = {}
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        name = path.relative_to(model_dir).as_posix()
        if name != MANIFEST_NAME:
            files[name] = sha256_file(path, cancel)
    manifest = ExportManifest(
        source=source,
        revision=revision,
        options=options.to_json_dict(),
        versions=manifest_versions(),
        files=files,
        duration_s=round(duration_s, 2),
        peak_rss_bytes=peak_rss_bytes,
    )
    data = manifest.to_json_dict()
    data.update({"schema_version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    data.update(extra or {})
    atomic_write_text(model_dir / MANIFEST_NAME, json.dumps(data, indent=2) + "\n")
    return data


# --- the job -------------------------------------------------------------------------------


class ExportCancelledError(Exception):
    """Raised inside a job when the user cancelled."""


@dataclass(frozen=True)
class ExportRequest:
    source: ExportSource
    destination: Path
    options: ExportOptions
    #: Replace a non-empty destination (the wizard asks first; the CLI needs --force).
    overwrite: bool = False
    #: Load the result and compare MTP with plain greedy output.
    verify_generation: bool = True


@dataclass
class ExportOutcome:
    request: ExportRequest
    status: JobStatus
    output_dir: Path | None
    seconds: float
    peak_rss_bytes: int
    error: ExportError | None = None
    verification: Verification | None = None
    manifest: dict[str, Any] | None = None
    log_tail: str = ""
    revision: str | None = None
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"

    def reason(self) -> str:
        """One line: why it failed, or a short success note."""
        if self.status == "cancelled":
            return "export cancelled; nothing was kept"
        if self.error is not None:
            return str(self.error)
        if self.verification is not None and not self.verification.ok:
            return f"exported to {self.output_dir}, but verification failed: " + (
                self.verification.summary()
            )
        return f"exported to {self.output_dir}"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "output_dir": str(self.output_dir) if self.output_dir else None,
            "source": self.request.source.display,
            "revision": self.revision,
            "options": self.request.options.to_json_dict(),
            "seconds": round(self.seconds, 2),
            "peak_rss_bytes": self.peak_rss_bytes,
            "stage_seconds": {k: round(v, 2) for k, v in self.stage_seconds.items()},
            "error": (
                {"code": self.error.code, "message": self.error.message, "fix": self.error.fix}
                if self.error
                else None
            ),
            "verification": self.verification.to_json_dict() if self.verification else None,
            "log_tail": self.log_tail,
        }


def explain_failure(outcome: ProcessOutcome, what: str = "exporter") -> ExportError:
    """A specific message for the ways the exporter is known to fail, else the exit status."""
    tail = "\n".join(line for line in outcome.tail if not line.startswith(MARKER))
    lowered = tail.lower()
    if "no mtp ('mtp.*') weights" in lowered or ("mtp.*" in lowered and "runtimeerror" in lowered):
        return ExportError(
            "The checkpoint has no MTP weights (mtp.* tensors), so no MTP head can be exported.",
            "Use the original checkpoint from its publisher.",
            code="NO_MTP_WEIGHTS",
            log_tail=tail,
        )
    if "mtp_num_hidden_layers" in lowered:
        return ExportError(
            "The exporter supports exactly one MTP layer (mtp_num_hidden_layers = 1).",
            "Use a checkpoint with one MTP layer.",
            code="MTP_LAYERS",
            log_tail=tail,
        )
    if "invalidgroupsizeerror" in lowered or ("group size" in lowered and "error" in lowered):
        return ExportError(
            "INT4 compression failed: a layer does not fit the group size.",
            "Set the group-size fallback to 'ignore' or 'adjust', or choose another group size.",
            code="GROUP_SIZE",
            log_tail=tail,
        )
    if "no space left on device" in lowered:
        return ExportError(
            "The disk filled up during the export.",
            "Free some space or choose a destination on another disk, then export again.",
            code="DISK_FULL",
            log_tail=tail,
        )
    if outcome.exit_status == -signal.SIGKILL and not outcome.cancelled:
        return ExportError(
            f"The {what} was killed (exit by SIGKILL), most likely because the computer ran "
            "out of memory.",
            "Close other applications and export again, or export on a computer with more RAM.",
            code="KILLED",
            log_tail=tail,
        )
    if outcome.signal_name:
        detail = f"was stopped by {outcome.signal_name}"
    else:
        detail = f"failed (exit status {outcome.exit_status})"
    last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
    return ExportError(
        f"The {what} {detail}" + (f": {last[:300]}" if last else "."),
        "See the log below for details.",
        code="EXPORTER_FAILED",
        log_tail=tail,
    )


class ExportJob:
    """One export, start to finish, on the calling thread (no Qt; workers run it on a QThread).

    Callbacks (all on the calling thread): `on_line(str)` for each log line,
    `on_event(ProgressEvent)` for stage and progress changes, `on_stats(ProcessStats)` about
    twice a second. `cancel()` may be called from any thread.
    """

    def __init__(
        self,
        request: ExportRequest,
        *,
        on_line: Callable[[str], None] | None = None,
        on_event: Callable[[ProgressEvent], None] | None = None,
        on_stats: Callable[[ProcessStats], None] | None = None,
        python: str | None = None,
        grace: tuple[float, float] = (5.0, 5.0),
        env: dict[str, str] | None = None,
    ) -> None:
        self.request = request
        self.on_line = on_line
        self.on_event = on_event
        self.on_stats = on_stats
        self.python = python or sys.executable
        self.grace = grace
        self.extra_env = env or {}
        self.cancel_event = threading.Event()
        self.parser = ProgressParser(
            stage_plan(
                request.options,
                download=request.source.kind == "hub",
                verify=True,
            ),
            expected_compressions(request.options),
        )
        self._started = 0.0
        self._peak = 0
        self._stage_started: dict[str, float] = {}
        self._log: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._last_event: ProgressEvent | None = None
        self._tqdm_shown: dict[str, tuple[float, int]] = {}

    def cancel(self) -> None:
        self.cancel_event.set()

    # callbacks -------------------------------------------------------------------------------
    def _line(self, line: str) -> None:
        event = self.parser.feed(line)
        if not line.startswith(MARKER) and self._show_line(line):
            self._log.append(line)
            if self.on_line is not None:
                self.on_line(line)
        if event is not None:
            self._emit(event)

    def _show_line(self, line: str) -> bool:
        """tqdm redraws a bar dozens of times a second: keep one frame every 2 s, and 100 %."""
        match = _TQDM_RE.match(line)
        if match is None:
            return True
        key, percent, now = match.group("label"), int(match.group("pct")), time.monotonic()
        last = self._tqdm_shown.get(key)
        if percent >= 100:
            if last is not None and last[1] >= 100:
                return False
        elif last is not None and now - last[0] < 2.0:
            return False
        self._tqdm_shown[key] = (now, percent)
        return True

    def _emit(self, event: ProgressEvent) -> None:
        self._stage_started.setdefault(event.stage, time.monotonic())
        last = self._last_event
        if (
            last is not None
            and (last.stage, last.label) == (event.stage, event.label)
            and abs((event.fraction or 0.0) - (last.fraction or 0.0)) < 0.01
            and event.overall - last.overall < 0.005
        ):
            return  # a tqdm redraw that changes nothing visible
        self._last_event = event
        if self.on_event is not None:
            self.on_event(event)

    def _stats(self, stats: ProcessStats) -> None:
        self._peak = max(self._peak, stats.peak_rss_bytes)
        if self.on_stats is not None:
            elapsed = time.monotonic() - self._started
            self.on_stats(ProcessStats(elapsed, stats.rss_bytes, self._peak))

    def _check_cancel(self) -> None:
        if self.cancel_event.is_set():
            raise ExportCancelledError()

    def _run_process(self, command: list[str], env: dict[str, str]) -> ProcessOutcome:
        process = SupervisedProcess(
            command,
            env=env,
            on_line=self._line,
            on_stats=self._stats,
            cancel=self.cancel_event,
            grace=self.grace,
        )
        outcome = process.run()
        self._peak = max(self._peak, outcome.peak_rss_bytes)
        if outcome.cancelled:
            raise ExportCancelledError()
        return outcome

    def _env(self, staging: Staging, *, offline: bool) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            PYTHONUNBUFFERED="1",
            TMPDIR=str(staging.tmp_dir),  # scratch files die with the staging folder
            TOKENIZERS_PARALLELISM="false",
        )
        if offline:
            env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
        env.update(self.extra_env)
        return env

    # the job ---------------------------------------------------------------------------------
    def run(self) -> ExportOutcome:
        request = self.request
        self._started = time.monotonic()
        staging: Staging | None = None
        revision = request.source.revision
        verification: Verification | None = None
        try:
            request.options.validate()
            destination = request.destination.expanduser().absolute()
            self._check_destination(destination)
            staging = Staging.create(destination)
            source_path = request.source.value
            if request.source.kind == "hub":
                source_path, revision = self._download(staging)
            elif Path(source_path).parent.name == "snapshots":  # a folder inside an HF cache
                revision = revision or Path(source_path).name
            self._check_cancel()
            command = export_command(
                source_path, staging.model_dir, request.options, python=self.python
            )
            self._emit(self.parser.enter("loading"))
            outcome = self._run_process(command, self._env(staging, offline=True))
            if not outcome.ok:
                raise explain_failure(outcome)
            self._check_cancel()
            self._emit(self.parser.enter("verifying"))
            verification = verify_precisions(staging.model_dir, request.options)
            if not verification.files_ok:
                failed = next(i for i in verification.items if i.status == "fail")
                raise ExportError(
                    failed.message, failed.fix, code="VERIFY_FAILED", log_tail=self._tail()
                )
            if request.verify_generation:
                verification.generation = self._check_generation(staging)
                verification.items.append(generation_item(verification.generation))
            self._check_cancel()
            self._emit(self.parser.enter("finishing"))
            shutil.rmtree(staging.tmp_dir, ignore_errors=True)
            seconds = time.monotonic() - self._started
            manifest = write_manifest(
                staging.model_dir,
                source=request.source.value,
                revision=revision,
                options=request.options,
                duration_s=seconds,
                peak_rss_bytes=self._peak,
                extra={"verification": verification.to_json_dict()},
                cancel=self.cancel_event,
            )
            self._check_cancel()
            _move_into_place(staging.model_dir, destination, overwrite=request.overwrite)
            self._emit(self.parser.finish())
            return ExportOutcome(
                request,
                "succeeded",
                destination,
                time.monotonic() - self._started,
                self._peak,
                verification=verification,
                manifest=manifest,
                log_tail=self._tail(),
                revision=revision,
                stage_seconds=self._stage_durations(),
            )
        except ExportCancelledError:
            return ExportOutcome(
                request,
                "cancelled",
                None,
                time.monotonic() - self._started,
                self._peak,
                log_tail=self._tail(),
                stage_seconds=self._stage_durations(),
            )
        except ExportError as exc:
            if not exc.log_tail:
                exc.log_tail = self._tail()
            return ExportOutcome(
                request,
                "failed",
                None,
                time.monotonic() - self._started,
                self._peak,
                error=exc,
                verification=verification,
                log_tail=exc.log_tail,
                revision=revision,
                stage_seconds=self._stage_durations(),
            )
        except OSError as exc:
            error = ExportError(
                f"The export could not write its files: {exc.strerror or exc} "
                f"({exc.filename or request.destination}).",
                "Check the destination's permissions and free space.",
                code="IO_ERROR",
                log_tail=self._tail(),
            )
            return ExportOutcome(
                request,
                "failed",
                None,
                time.monotonic() - self._started,
                self._peak,
                error=error,
                log_tail=error.log_tail,
                stage_seconds=self._stage_durations(),
            )
        finally:
            if staging is not None:
                staging.remove()

    def _tail(self) -> str:
        return "\n".join(self._log)

    def _stage_durations(self) -> dict[str, float]:
        ordered = sorted(self._stage_started.items(), key=lambda item: item[1])
        end = time.monotonic()
        durations = {}
        for index, (stage, started) in enumerate(ordered):
            stop = ordered[index + 1][1] if index + 1 < len(ordered) else end
            durations[stage] = stop - started
        return durations

    def _check_destination(self, destination: Path) -> None:
        from qwen_mtp_desktop.core.preflight import check_destination

        source = self.request.source
        item = check_destination(
            destination,
            overwrite=self.request.overwrite,
            source=Path(source.value) if source.kind == "folder" else None,
        )
        if item.status == "fail":
            raise ExportError(item.message, item.fix, code="BAD_DESTINATION")

    def _download(self, staging: Staging) -> tuple[str, str | None]:
        from qwen_mtp_desktop.core.hub import download_command

        source = self.request.source
        self._emit(self.parser.enter("downloading"))
        command = download_command(source.value, source.revision, python=self.python)
        # The download is the one step allowed online (unless HF_HUB_OFFLINE is set).
        outcome = self._run_process(command, self._env(staging, offline=False))
        if not outcome.ok:
            raise self._download_error(outcome)
        snapshots = [m for m in read_markers(outcome.tail) if m.get("event") == "snapshot"]
        if not snapshots:
            raise ExportError(
                "The download finished without reporting where the files are.",
                "Try again; see the log for details.",
                code="DOWNLOAD_FAILED",
                log_tail="\n".join(outcome.tail),
            )
        last = snapshots[-1]
        return str(last["path"]), (str(last["revision"]) if last.get("revision") else None)

    @staticmethod
    def _download_error(outcome: ProcessOutcome) -> ExportError:
        errors = [m for m in read_markers(outcome.tail) if m.get("event") == "error"]
        tail = "\n".join(line for line in outcome.tail if not line.startswith(MARKER))
        if errors:
            return ExportError(
                str(errors[-1].get("message", "The download failed.")),
                str(errors[-1].get("fix", "")),
                code=str(errors[-1].get("code", "DOWNLOAD_FAILED")),
                log_tail=tail,
            )
        return explain_failure(outcome, "download")

    def _check_generation(self, staging: Staging) -> dict[str, Any]:
        command = generation_check_command(staging.model_dir, python=self.python)
        outcome = self._run_process(command, self._env(staging, offline=True))
        results = [m for m in read_markers(outcome.tail) if m.get("event") == "generation"]
        if not outcome.ok or not results:
            errors = [m for m in read_markers(outcome.tail) if m.get("event") == "error"]
            message = (
                str(errors[-1].get("message"))
                if errors
                else explain_failure(outcome, "verification").message
            )
            return {"equal": False, "error": message, "first_difference": None}
        result = results[-1].get("result")
        return result if isinstance(result, dict) else {"equal": False}


def run_export(
    source: str,
    output_dir: Path,
    options: ExportOptions,
    *,
    on_line: Callable[[str], None] | None = None,
    overwrite: bool = False,
    verify_generation: bool = False,
) -> ExportOutcome:
    """Export `source` (folder or hub id) to `output_dir`; raise ExportError on failure.

    A shorthand for `ExportJob(...).run()` that raises instead of returning a failed outcome.
    """
    request = ExportRequest(
        parse_source(source),
        Path(output_dir),
        options,
        overwrite=overwrite,
        verify_generation=verify_generation,
    )
    outcome = ExportJob(request, on_line=on_line).run()
    if outcome.error is not None:
        raise outcome.error
    if outcome.status == "cancelled":
        raise ExportError("The export was cancelled.", code="CANCELLED")
    return outcome


# --- toolkit installation ------------------------------------------------------------------


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


# --- subprocess entry point ----------------------------------------------------------------


def _main(argv: Sequence[str] | None = None) -> int:
    import argparse

    from qwen_mtp_desktop.core.optimum_cli import die_with_parent, emit
    from qwen_mtp_desktop.core.privacy import block_telemetry

    block_telemetry()
    if argv is None:
        die_with_parent()
    parser = argparse.ArgumentParser(prog="python -m qwen_mtp_desktop.core.export")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check-generation", help="MTP vs plain greedy output")
    check.add_argument("model_dir", type=Path)
    check.add_argument("--max-new-tokens", type=int, default=32)
    check.add_argument("--num-assistant-tokens", type=int, default=2)
    args = parser.parse_args(argv)
    emit("stage", stage="verifying", part="mtp")
    try:
        result = check_generation(
            args.model_dir,
            max_new_tokens=args.max_new_tokens,
            num_assistant_tokens=args.num_assistant_tokens,
        )
    except UserFacingError as exc:
        emit("error", message=exc.message, fix=exc.fix, code=exc.code)
        return 1
    emit("generation", result=result)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
