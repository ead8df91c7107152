"""Reading untrusted files safely: regular files only, bounded size, bounded JSON nesting.

Model folders come from the internet and settings files can be damaged, so every reader goes
through `read_json_file` / `read_text_file`. They never block (a FIFO or a terminal opened
without O_NONBLOCK waits forever), never allocate more than the file's size limit, and turn
every failure into an `UnsafeFileError` with a specific message and a fix.

The same rules guard what the app writes to a path the user named (`check_output_target`):
a device node, a FIFO or a symbolic link is never replaced by a regular file.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

from qwen_mtp_desktop.core.errors import UserFacingError

#: Deep enough for every real config, tokenizer, manifest and settings file (they nest < 10).
MAX_JSON_DEPTH = 64
#: Digits in one JSON number: a longer one is not a count or a size of anything real.
MAX_NUMBER_CHARS = 40
#: Size limits per kind of file (a Qwen tokenizer.json is about 11 MB).
SMALL_JSON_BYTES = 4 * 1024 * 1024
TOKENIZER_JSON_BYTES = 64 * 1024 * 1024
TEXT_FILE_BYTES = 1024 * 1024

T = TypeVar("T")


class UnsafeFileError(UserFacingError, ValueError):
    """A file is not a regular file, too big, too deep or not what it should hold (a
    ValueError too, so readers that treat bad content as ValueError need no change)."""

    code = "BAD_FILE"


class NotRegularFileError(UnsafeFileError):
    """A FIFO, device, socket or folder where a regular file was expected; `what` names it
    ("a named pipe (FIFO)")."""

    code = "NOT_REGULAR"

    def __init__(self, message: str, fix: str, what: str) -> None:
        super().__init__(message, fix)
        self.what = what


@dataclass(frozen=True)
class FileKind:
    """What a file is to the user, for messages: "the settings file", and how to fix it."""

    what: str
    fix: str


def _kind_name(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def special_file_kind(path: Path) -> str | None:
    """None for a regular file or folder (symlinks followed); else what it is. Never blocks."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return _kind_name(mode)


def open_regular_file(path: Path, *, kind: FileKind) -> BinaryIO:
    """`path` opened for reading when it is a regular file (links followed). A FIFO, device,
    socket or folder is refused with NotRegularFileError without blocking: the open never
    waits for a writer. FileNotFoundError passes through; other failures are UnsafeFileError."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        try:
            mode = Path(path).stat().st_mode  # a socket refuses open(): name it as what it is
        except OSError:
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(
                f"{kind.what} ({path}) is {_kind_name(mode)}, not a regular file; it was not read.",
                kind.fix,
                _kind_name(mode),
            ) from exc
        raise UnsafeFileError(
            f"{kind.what} ({path}) cannot be opened ({exc.strerror or exc}).", kind.fix
        ) from exc
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = _kind_name(mode)
        raise NotRegularFileError(
            f"{kind.what} ({path}) is {what}, not a regular file; it was not read.",
            kind.fix,
            what,
        )
    return os.fdopen(fd, "rb")


def read_bytes_file(path: Path, *, max_bytes: int, kind: FileKind) -> bytes:
    """The file's bytes. FileNotFoundError passes through (callers treat absence themselves);
    NotRegularFileError for a FIFO, device, socket or folder; UnsafeFileError otherwise."""
    with open_regular_file(path, kind=kind) as handle:
        try:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise UnsafeFileError(
                    f"{kind.what} ({path}) is {size:,} bytes, more than the "
                    f"{max_bytes:,} such a file can reasonably hold; it was not read.",
                    kind.fix,
                )
            # Never past the limit, whatever the file does meanwhile (it may grow).
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise UnsafeFileError(
                f"{kind.what} ({path}) cannot be read ({exc.strerror or exc}).", kind.fix
            ) from exc
    if len(data) > max_bytes:
        raise UnsafeFileError(
            f"{kind.what} ({path}) grew past {max_bytes:,} bytes while being read.", kind.fix
        )
    return data


def read_text_file(path: Path, *, max_bytes: int = TEXT_FILE_BYTES, kind: FileKind) -> str:
    data = read_bytes_file(path, max_bytes=max_bytes, kind=kind)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UnsafeFileError(
            f"{kind.what} ({path}) is not UTF-8 text (byte {exc.start}).", kind.fix
        ) from exc


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[{]}"))


#: Up to this many brackets the depth is counted in Python: numpy's import (0.2-0.3 s) would
#: otherwise delay the window, which reads the small settings file first (issue 28).
SMALL_BRACKET_COUNT = 4096


def json_nesting_depth(text: str) -> int:
    """The deepest [ / { nesting in JSON text, ignoring brackets inside strings. Linear time
    in C (regex, translate, numpy), so it runs before the recursive parser sees the text."""
    brackets = _JSON_STRING.sub("", text).encode("utf-8", "replace").translate(None, _NOT_BRACKETS)
    if len(brackets) <= SMALL_BRACKET_COUNT:
        deepest = level = 0
        for bracket in brackets:
            level += 1 if bracket in b"[{" else -1
            deepest = max(deepest, level)
        return deepest
    import numpy as np

    steps = np.frombuffer(brackets.translate(_BRACKET_STEPS), dtype=np.int8)
    deepest = level = 0
    for start in range(0, len(steps), 1 << 20):  # chunked: bounded temporary memory
        running = np.cumsum(steps[start : start + (1 << 20)], dtype=np.int64) + level
        deepest = max(deepest, int(running.max()))
        level = int(running[-1])
    return deepest


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_NUMBER_CHARS:
        raise ValueError(f"a number with {len(text)} digits")
    return int(text)


def _finite_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS * 2:
        raise ValueError(f"a number written with {len(text)} characters")
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:20]} is out of range")
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def json_value_count(text: str) -> int:
    """About how many values JSON text holds (at least as many as it really does): the
    commas and opening brackets outside strings, plus one. Linear time in C, so a text of
    millions of tiny values ("[[],[],...]", each a Python object of 50+ bytes once parsed)
    is refused before the parser builds them."""
    skeleton = _JSON_STRING.sub("", text)
    return skeleton.count(",") + skeleton.count("[") + skeleton.count("{") + 1


def parse_json_text(
    text: str, *, max_depth: int = MAX_JSON_DEPTH, max_values: int | None = None
) -> Any:
    """json.loads with bounded nesting, bounded numbers and no NaN/Infinity (and, given
    `max_values`, a bounded number of values). ValueError if not."""
    deepest = json_nesting_depth(text)
    if deepest > max_depth:
        raise ValueError(f"nested {deepest} levels deep (at most {max_depth} are accepted)")
    if max_values is not None:
        values = json_value_count(text)
        if values > max_values:
            raise ValueError(f"about {values:,} values (at most {max_values:,} are accepted)")
    return json.loads(
        text, parse_int=_bounded_int, parse_float=_finite_float, parse_constant=_no_constant
    )


def read_json_file(
    path: Path,
    *,
    kind: FileKind,
    max_bytes: int = SMALL_JSON_BYTES,
    max_depth: int = MAX_JSON_DEPTH,
) -> Any:
    """The decoded JSON value. FileNotFoundError when absent; UnsafeFileError otherwise."""
    text = read_text_file(path, max_bytes=max_bytes, kind=kind)
    try:
        return parse_json_text(text, max_depth=max_depth)
    except (ValueError, RecursionError) as exc:
        raise UnsafeFileError(f"{kind.what} ({path}) is not valid JSON ({exc}).", kind.fix) from exc


def read_json_object(
    path: Path, *, kind: FileKind, max_bytes: int = SMALL_JSON_BYTES
) -> dict[str, Any]:
    value = read_json_file(path, kind=kind, max_bytes=max_bytes)
    if not isinstance(value, dict):
        raise UnsafeFileError(
            f"{kind.what} ({path}) holds a JSON {type(value).__name__}, not an object.", kind.fix
        )
    return value


# --- validated values -----------------------------------------------------------------------


def int_in_range(value: object, low: int, high: int) -> int | None:
    """`value` if it is a whole number (not a bool) within [low, high], else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        return None
    return value


def number_in_range(value: object, low: float, high: float) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and low <= number <= high else None


def checked_fields(
    raw: Mapping[str, Any], validators: Mapping[str, Callable[[Any], T | None]]
) -> tuple[dict[str, T], list[str]]:
    """The fields of `raw` that pass their validator, and the names of those that do not."""
    good: dict[str, T] = {}
    bad: list[str] = []
    for name, validate in validators.items():
        if name not in raw:
            continue
        value = validate(raw[name])
        if value is None and raw[name] is not None:
            bad.append(name)
        elif value is not None:
            good[name] = value
    return good, bad


# --- folders and output targets ----------------------------------------------------------------


def special_entries(folder: Path, *, limit: int = 10_000) -> list[tuple[str, str]]:
    """(name, what) for every entry of `folder` that is neither a regular file nor a folder
    after following links: FIFOs, devices, sockets, dangling links. A native reader handed
    such a file blocks or reads forever, so model folders are checked before loading."""
    found: list[tuple[str, str]] = []
    with os.scandir(folder) as entries:
        for count, entry in enumerate(entries):
            if count >= limit:
                break
            try:
                mode = entry.stat(follow_symlinks=True).st_mode
            except OSError:
                if entry.is_symlink():
                    found.append((entry.name, "a broken symbolic link"))
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                found.append((entry.name, _kind_name(mode)))
    return found


def resolve_inside(path: Path, roots: Sequence[Path]) -> Path:
    """The real path behind `path` (links followed) when it lies inside one of `roots` (real
    paths); UnsafeFileError otherwise: LINK_OUTSIDE for a link that leads out of them (a file
    copied from a downloaded folder must not carry the user's private files with it),
    NOT_REGULAR for a dangling or looping link."""
    try:
        real = Path(os.path.realpath(path, strict=True))
    except (OSError, RuntimeError) as exc:
        raise UnsafeFileError(
            f"{path} is a broken or looping symbolic link.",
            "Replace it with the file it should be, or remove it.",
            code="NOT_REGULAR",
        ) from exc
    for root in roots:
        try:
            real.relative_to(root)
        except ValueError:
            continue
        return real
    raise UnsafeFileError(
        f"{path.name} is a symbolic link to {real}, outside the model folder.",
        "If the file belongs to the model, copy it into the model folder in place of the "
        "link; otherwise remove the link.",
        code="LINK_OUTSIDE",
    )


def check_output_target(path: Path, *, what: str = "the output file") -> None:
    """Refuse to write `path` unless it is absent or a regular file (not through a link).

    Writing replaces the file atomically (a rename), which would swap a device node, a FIFO
    or a symbolic link for a regular file; as root that could be /dev/null."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UnsafeFileError(
            f"{what} {path} cannot be checked ({exc.strerror or exc}).", "Choose another path."
        ) from exc
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFileError(
            f"{what} {path} is a symbolic link; it was not replaced.",
            "Name the real file, or a new file.",
            code="NOT_REGULAR",
        )
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFileError(
            f"{what} {path} is {_kind_name(info.st_mode)}; only a regular file can be written.",
            "Name a new file or an existing regular file.",
            code="NOT_REGULAR",
        )


def model_folder_problem(folder: Path) -> tuple[str, str] | None:
    """(code, message) for the first file of a model folder the native runtime must not be
    handed: a special file (it would block or read forever), or a JSON side file (config,
    generation config, processor and tokenizer configs, read natively) that is too big, too
    deep or not JSON. None when the folder is fine. tokenizer.json is not read natively."""
    special = special_entries(folder)
    if special:
        name, what = special[0]
        return "NOT_REGULAR", f"{folder.name}/{name} is {what}, not a regular file"
    for path in sorted(folder.glob("*.json")):
        if path.name == "tokenizer.json":
            continue
        try:
            read_json_file(path, kind=FileKind(f"{folder.name}/{path.name}", ""))
        except UnsafeFileError as exc:
            return "IR_CORRUPT", exc.message.rstrip(".")
        except OSError:
            continue
    return None
