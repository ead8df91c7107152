"""The model library: which folders it scans, which models it lists, and what the user may do to
them (add a folder, remove a model from the list, delete it from disk, make it the default).

Qt-free glue over `core.models.folders`, shared by the Models panel and the `models` CLI command.

The library is the app's managed folder (`AppPaths.models_dir`, where exports land), the folders
in `Settings.model_folders` (each may be one model or hold many), and the bundled demo model.
"Remove from library" never touches files: a model that is itself a configured folder is
dropped from `model_folders`; a model found inside a folder is hidden instead, in
`Settings.ui_state[HIDDEN_KEY]` (a JSON list of paths), until its folder is added again.

Functions that touch the file system (`scan_library`, `deletion_problem`, `delete_model_dir`,
`folder_signature`, and core.files.fileio's `folder_bytes`) may be slow on network drives: the UI
runs them off the GUI thread. Functions that change `Settings` only change the object; the
caller saves it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import stat
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from qwen_mtp_desktop.core.files.fileio import folder_bytes
from qwen_mtp_desktop.core.files.paths import AppPaths, app_paths, demo_model_dir, resources_dir
from qwen_mtp_desktop.core.models.folders.discovery import discover_models
from qwen_mtp_desktop.core.models.folders.inspection import report_memory
from qwen_mtp_desktop.core.models.folders.manifest import read_manifest
from qwen_mtp_desktop.core.models.folders.memory import memory_diagnostics
from qwen_mtp_desktop.core.models.folders.report import (
    Diagnostic,
    KvPrecision,
    ModelReport,
    Severity,
    Verdict,
)
from qwen_mtp_desktop.core.remote.endpoints import endpoint_id
from qwen_mtp_desktop.core.settings.store import UI_HIDDEN_MODELS, Settings
from qwen_mtp_desktop.core.units import format_bytes

#: `Settings.ui_state` key holding the JSON list of model folders removed from the library
#: (validated when the settings are read).
HIDDEN_KEY = UI_HIDDEN_MODELS
#: How deep discovery looks under each library folder.
SCAN_DEPTH = 3
#: Upper bound on folders handed to a file-system watcher (inotify watches are a finite resource).
WATCH_LIMIT = 512
#: Context lengths offered by the memory estimate, in tokens.
CONTEXT_CHOICES = (2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
#: Diagnostics that depend on the context length (recomputed by `reestimate`).
MEMORY_CODES = frozenset({"TOO_LARGE_FOR_MEMORY", "MEMORY_TIGHT"})

Origin = Literal["demo", "managed", "folder"]
FolderOrigin = Literal["managed", "folder"]

SEVERITY_RANK: dict[str, int] = {"error": 3, "warning": 2, "info": 1}
VERDICT_LABELS: dict[Verdict, str] = {
    "fits": "Fits",
    "tight": "Tight",
    "does_not_fit": "Does not fit",
    "unknown": "Unknown",
}


class LibraryError(Exception):
    """An action the library refuses or could not finish; the message is for the user."""


@dataclass(frozen=True)
class LibraryFolder:
    """One folder the library scans."""

    path: Path
    origin: FolderOrigin
    exists: bool

    def to_json_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "origin": self.origin, "exists": self.exists}


@dataclass(frozen=True)
class LibraryEntry:
    """One model in the library: where it is, what to call it, and why it is listed."""

    path: Path
    name: str
    origin: Origin
    #: The library folder it was found under; None for the demo model.
    root: Path | None

    @property
    def is_demo(self) -> bool:
        return self.origin == "demo"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "name": self.name,
            "origin": self.origin,
            "root": str(self.root) if self.root is not None else None,
        }


# --- which model the app opens ------------------------------------------------------------

DEMO_MODEL_NAME = "Demo model"
DEMO_MODEL_NOTE = (
    "A tiny model built and trained by this project so the app works offline. It only counts "
    "and repeats phrases. For real answers, get a Qwen3.5 model: download a ready one, or "
    "export a checkpoint (Find a model)."
)


def _is_bundled_demo(model_dir: Path) -> bool:
    try:
        return model_dir.resolve() == demo_model_dir().resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop on Python 3.11
        return False


#: The build record's entries that say which weights a folder holds.
_IDENTITY_FILES = ("openvino_language_model.bin", "openvino_mtp_model.bin")


@functools.lru_cache(maxsize=256)
def _weights_identity(folder: str) -> tuple[str, ...] | None:
    """The sums the folder's build record (the export manifest) gives its weights; None when
    it has none. Read once per folder and kept: a small bounded file, never the weights."""
    return _read_weights_identity(folder)


def _read_weights_identity(folder: str) -> tuple[str, ...] | None:
    try:
        manifest = read_manifest(Path(folder))
    except (OSError, ValueError):
        return None
    if manifest is None:
        return None
    sums = tuple(str(manifest.files.get(name, "")) for name in _IDENTITY_FILES)
    return sums if all(sums) else None


def model_key(model_dir: Path) -> str:
    """What names a model for what the app keeps about it (its default chat settings): the
    sums its build record (the export manifest) gives its weights, so a folder moved or renamed
    is still itself; without one, its folder with its weights' size, so another model put in
    its place is not taken for it; a remote server's model, the server's id. Reads the manifest
    and a stat: off the GUI thread."""
    remote = endpoint_id(model_dir)
    if remote is not None:
        return f"remote:{remote}"
    sums = _read_weights_identity(str(resolved(model_dir)))  # as it is now, not as kept
    if sums is not None:
        return "weights:" + hashlib.sha256("\n".join(sums).encode()).hexdigest()[:32]
    try:
        size = (Path(model_dir) / f"{_IDENTITY_FILES[0]}").stat().st_size
    except OSError:
        size = -1
    return f"folder:{resolved(model_dir)}:{size}"


def is_demo_model(model_dir: Path) -> bool:
    """The bundled demo, or a copy of it under any name (issue 44: a renamed copy got general
    example chips and was sent earlier turns): the same weights, by its build record."""
    if _is_bundled_demo(model_dir):
        return True
    if endpoint_id(model_dir) is not None:  # a remote server's model: no folder to read
        return False
    demo = _weights_identity(str(demo_model_dir()))
    return demo is not None and _weights_identity(str(model_dir)) == demo


def selected_model(settings: Settings) -> Path:
    """The model to open: the user's default if it still exists, else the bundled demo."""
    if settings.default_model:
        chosen = Path(settings.default_model)
        if chosen.is_dir():
            return chosen
    return demo_model_dir()


def display_name(model_dir: Path) -> str:
    # A renamed copy keeps its own name: two "Demo model" rows could not be told apart.
    return DEMO_MODEL_NAME if _is_bundled_demo(model_dir) else model_dir.name


# --- paths ---------------------------------------------------------------------------------


def resolved(path: Path) -> Path:
    """`path` made absolute with links followed, or just absolute when that fails.

    Python 3.11's `Path.resolve` raises RuntimeError on a symlink loop, not OSError.
    """
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError):
        return Path(path).expanduser().absolute()


def same_path(a: Path, b: Path) -> bool:
    return resolved(a) == resolved(b)


def is_demo(path: Path) -> bool:
    return same_path(path, demo_model_dir())


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


# --- folders and entries -------------------------------------------------------------------


def library_folders(settings: Settings, paths: AppPaths | None = None) -> list[LibraryFolder]:
    """The managed folder, then the user's folders in the order added (duplicates dropped)."""
    paths = paths or app_paths().with_models_dir(settings.models_dir)
    out: list[LibraryFolder] = []
    seen: set[Path] = set()
    candidates: list[tuple[Path, FolderOrigin]] = [(paths.models_dir, "managed")]
    candidates += [(Path(text).expanduser(), "folder") for text in settings.model_folders if text]
    for path, origin in candidates:
        key = resolved(path)
        if key in seen:
            continue
        seen.add(key)
        try:
            exists = path.is_dir()
        except OSError:
            exists = False
        out.append(LibraryFolder(path, origin, exists))
    return out


def hidden_models(settings: Settings) -> list[str]:
    raw = settings.ui_state.get(HIDDEN_KEY)
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return []
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []


def _set_hidden(settings: Settings, items: Sequence[str]) -> None:
    if items:
        settings.ui_state[HIDDEN_KEY] = json.dumps(sorted(set(items)))
    else:
        settings.ui_state.pop(HIDDEN_KEY, None)


def _unique_names(entries: list[LibraryEntry]) -> list[LibraryEntry]:
    """Name models after their folder; when two share a name, add the parent folder's."""
    counts: dict[str, int] = {}
    for entry in entries:
        counts[entry.name] = counts.get(entry.name, 0) + 1
    return [
        replace(entry, name=f"{entry.name} ({entry.path.parent.name})")
        if counts[entry.name] > 1 and not entry.is_demo
        else entry
        for entry in entries
    ]


def scan_library(
    settings: Settings,
    paths: AppPaths | None = None,
    *,
    include_demo: bool = True,
    max_depth: int = SCAN_DEPTH,
) -> list[LibraryEntry]:
    """Every model in the library: the demo first (when bundled), then each folder's models.

    A model reached twice (through two folders or a link) is listed once; hidden models are left
    out. Missing or unreadable folders are passed over.
    """
    hidden = {resolved(Path(text)) for text in hidden_models(settings)}
    entries: list[LibraryEntry] = []
    seen: set[Path] = set()
    demo = demo_model_dir()
    if include_demo and demo.is_dir():
        entries.append(LibraryEntry(demo, DEMO_MODEL_NAME, "demo", None))
        seen.add(resolved(demo))
    for folder in library_folders(settings, paths):
        if not folder.exists:
            continue
        for model in discover_models([folder.path], max_depth=max_depth):
            key = resolved(model)
            if key in seen or key in hidden:
                continue
            seen.add(key)
            entries.append(
                LibraryEntry(model, model.name or str(model), folder.origin, folder.path)
            )
    return _unique_names(entries)


def watch_targets(
    folders: Iterable[LibraryFolder],
    entries: Iterable[LibraryEntry],
    *,
    depth: int = 2,
    limit: int = WATCH_LIMIT,
) -> list[Path]:
    """Folders to watch for changes: each library folder, its subfolders `depth` levels down
    (a model copied into a subfolder shows up), and every model folder (a damaged or completed
    copy is re-inspected). Hidden folders are skipped; at most `limit` paths."""
    out: list[Path] = []
    seen: set[Path] = set()

    def add(path: Path) -> bool:
        key = resolved(path)
        if key not in seen:
            seen.add(key)
            out.append(path)
        return len(out) < limit

    def walk(folder: Path, level: int) -> bool:
        if not add(folder):
            return False
        if level >= depth:
            return True
        try:
            with os.scandir(folder) as listing:
                children = sorted(
                    (Path(e.path) for e in listing if not e.name.startswith(".") and _is_dir(e)),
                    key=lambda p: p.name,
                )
        except OSError:
            return True
        return all(walk(child, level + 1) for child in children)

    for entry in entries:
        if not add(entry.path):
            return out
    for folder in folders:
        if folder.exists and not walk(folder.path, 0):
            break
    return out


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


# --- settings changes ----------------------------------------------------------------------


def add_folder(settings: Settings, folder: Path) -> bool:
    """Add `folder` to the library (and show again the models hidden under it).

    False when it was already there. LibraryError when it is not a folder.
    """
    folder = Path(folder).expanduser()
    folder = folder.absolute()
    try:
        is_folder = folder.is_dir()
    except OSError:
        is_folder = False
    if not is_folder:
        raise LibraryError(f"{folder} is not a folder.")
    key = resolved(folder)
    hidden = hidden_models(settings)
    kept = [text for text in hidden if not _inside(resolved(Path(text)), key)]
    changed = len(kept) != len(hidden)
    _set_hidden(settings, kept)
    if any(resolved(Path(text)) == key for text in settings.model_folders) or key == resolved(
        app_paths().models_dir
    ):
        return changed
    settings.model_folders.append(str(folder))
    return True


def in_library(settings: Settings, model_dir: Path, paths: AppPaths | None = None) -> bool:
    """Whether a scan reaches `model_dir`: it lies inside a library folder, at most SCAN_DEPTH
    folders down (hidden or not)."""
    key = resolved(model_dir)
    for folder in library_folders(settings, paths):
        root = resolved(folder.path)
        if _inside(key, root) and len(key.relative_to(root).parts) <= SCAN_DEPTH:
            return True
    return False


def adopt_model(settings: Settings, model_dir: Path, paths: AppPaths | None = None) -> bool:
    """Make sure the library lists `model_dir` (e.g. an export written outside the managed
    folder): add it as a folder of its own when no library folder reaches it, and show it
    again when hidden. True when the settings changed (the caller saves them)."""
    key = resolved(model_dir)
    hidden = hidden_models(settings)
    kept = [text for text in hidden if resolved(Path(text)) != key]
    _set_hidden(settings, kept)
    if in_library(settings, model_dir, paths):
        return len(kept) != len(hidden)
    return add_folder(settings, model_dir) or len(kept) != len(hidden)


def remove_folder(settings: Settings, folder: Path) -> bool:
    """Stop scanning a user folder; the files stay. False when it was not in the settings."""
    key = resolved(folder)
    kept = [text for text in settings.model_folders if resolved(Path(text)) != key]
    removed = len(kept) != len(settings.model_folders)
    settings.model_folders[:] = kept
    return removed


def remove_from_library(settings: Settings, model_dir: Path) -> Literal["folder", "hidden"]:
    """Take a model off the list, keeping its files.

    "folder": it was a configured folder and was dropped from `model_folders`; "hidden": it
    was found inside a folder and is hidden from now on. Clears the default if it pointed here.
    """
    if is_demo(model_dir):
        raise LibraryError("The demo model is part of the app and stays in the library.")
    forget_default(settings, model_dir)
    if remove_folder(settings, model_dir):
        return "folder"
    _set_hidden(settings, [*hidden_models(settings), str(resolved(model_dir))])
    return "hidden"


def forget_model(settings: Settings, model_dir: Path) -> None:
    """Drop every reference the settings hold to a model that was deleted from disk."""
    forget_default(settings, model_dir)
    remove_folder(settings, model_dir)
    key = resolved(model_dir)
    _set_hidden(settings, [t for t in hidden_models(settings) if resolved(Path(t)) != key])


def set_default_model(settings: Settings, model_dir: Path) -> None:
    """Open `model_dir` at start from now on (the demo model is stored as None, the default)."""
    settings.default_model = None if is_demo(model_dir) else str(resolved(model_dir))


def forget_default(settings: Settings, model_dir: Path) -> None:
    if settings.default_model and same_path(Path(settings.default_model), model_dir):
        settings.default_model = None


def is_default(settings: Settings, model_dir: Path) -> bool:
    if settings.default_model:
        return same_path(Path(settings.default_model), model_dir)
    return is_demo(model_dir)


# --- deleting ------------------------------------------------------------------------------


def _protected(paths: AppPaths) -> list[Path]:
    home = Path.home()
    anchors = {resolved(Path(p.anchor)) for p in (home, paths.data_dir) if p.anchor}
    return [
        *anchors,
        *(
            resolved(p)
            for p in (
                home,
                paths.data_dir,
                paths.models_dir,
                paths.config_dir,
                paths.cache_dir,
                paths.log_dir,
            )
        ),
    ]


def deletion_problem(model_dir: Path, paths: AppPaths | None = None) -> str | None:
    """Why `model_dir` must not be deleted, or None when it is a model folder that may go.

    Refused: the demo model and anything in the app's resources; a link (its target would go,
    or only the link, neither of which the user asked for); a file; the home folder, a drive
    root, the app's own folders or any folder containing them; a folder that does not look
    like a model; a model folder that holds other model folders.
    """
    paths = paths or app_paths()
    folder = Path(model_dir).expanduser().absolute()
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return f"{folder} does not exist."
    except OSError as exc:
        return f"{folder} cannot be read ({exc.strerror or exc})."
    if stat.S_ISLNK(info.st_mode):
        return f"{folder} is a link, not a folder; delete the folder it points to instead."
    if not stat.S_ISDIR(info.st_mode):
        return f"{folder} is a file, not a model folder."
    real = resolved(folder)
    if real == resolved(demo_model_dir()) or _inside(real, resolved(resources_dir())):
        return "The demo model is part of the app and cannot be deleted."
    for guarded in _protected(paths):
        if _inside(guarded, real):
            return f"{folder} is (or contains) one of your or the app's own folders."
    if discover_models([folder], max_depth=0) != [folder]:
        return (
            f"{folder} does not look like a model folder (no openvino_language_model.xml, "
            "openvino_model.xml or config.json with an IR), so it is not deleted."
        )
    try:
        with os.scandir(folder) as listing:
            children = [Path(e.path) for e in listing if _is_dir(e)]
    except OSError as exc:
        return f"{folder} cannot be read ({exc.strerror or exc})."
    nested = discover_models(children, max_depth=SCAN_DEPTH)
    if nested:
        return (
            f"{folder} holds other model folders ({nested[0].name}"
            + (f" and {len(nested) - 1} more" if len(nested) > 1 else "")
            + "); delete those one at a time."
        )
    return None


def delete_model_dir(model_dir: Path, paths: AppPaths | None = None) -> int:
    """Delete a model folder after `deletion_problem` found nothing; return the bytes freed.

    The folder is first renamed to a hidden sibling, so it leaves the library at once and a
    deletion that fails half-way never leaves a half model under the original name.
    """
    problem = deletion_problem(model_dir, paths)
    if problem is not None:
        raise LibraryError(problem)
    folder = Path(model_dir).expanduser().absolute()
    size = folder_bytes(folder)
    doomed = folder.with_name(f".{folder.name}.deleting-{uuid.uuid4().hex[:8]}")
    try:
        folder.rename(doomed)
    except OSError as exc:
        raise LibraryError(f"{folder} could not be deleted ({exc.strerror or exc}).") from exc
    errors: list[str] = []
    shutil.rmtree(doomed, onerror=lambda _fn, path, exc: errors.append(f"{path}: {exc[1]}"))
    if errors:
        raise LibraryError(
            f"Some files could not be deleted ({errors[0]}); what is left is in {doomed}."
        )
    return size


def folder_signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """(name, size, mtime) of each entry: when it is unchanged, so is the inspection report."""
    out: list[tuple[str, int, int]] = []
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                try:
                    info = entry.stat()
                except OSError:
                    out.append((entry.name, -1, -1))
                    continue
                out.append((entry.name, info.st_size, info.st_mtime_ns))
    except OSError:
        return ()
    return tuple(sorted(out))


# --- reports -------------------------------------------------------------------------------


def worst_severity(diagnostics: Iterable[Diagnostic]) -> Severity | None:
    worst: Severity | None = None
    for diagnostic in diagnostics:
        if worst is None or SEVERITY_RANK[diagnostic.severity] > SEVERITY_RANK[worst]:
            worst = diagnostic.severity
    return worst


def reestimate(
    report: ModelReport,
    context_length: int,
    kv_precision: KvPrecision,
    *,
    available_bytes: int | None,
    total_ram_bytes: int | None,
) -> ModelReport:
    """A copy of `report` with the memory estimate (and its diagnostics) for another context
    length or KV precision: pure arithmetic, no file is read."""
    if report.memory is None:
        return report
    memory = report_memory(
        report,
        context_length=context_length,
        kv_precision=kv_precision,
        available_bytes=available_bytes,
    )
    kept = [d for d in report.diagnostics if d.code not in MEMORY_CODES]
    # The same wording inspect_model uses, so the panel and the CLI say the same thing.
    extra = memory_diagnostics(memory, total_ram_bytes)
    return replace(report, memory=memory, diagnostics=[*kept, *extra])


def picker_text(report: ModelReport) -> str:
    """A model at a glance, for the chat's model picker: 'Qwen3.5 dense · 1.8 MB · FP16 · MTP'
    (size on disk, the language model's weight precision, whether MTP can run)."""
    parts = [kind_text(report), format_bytes(report.total_bytes)]
    if report.mtp.main_precision:
        parts.append(report.mtp.main_precision)
    parts.append("MTP" if report.mtp_usable else "no MTP")
    return " · ".join(parts)


def kind_text(report: ModelReport) -> str:
    """'Qwen3.5 dense', 'Qwen3.5 MoE, 64 experts', 'other (llama)', ..."""
    text = report.kind_label
    geometry = report.geometry
    if report.kind == "qwen3_5_moe" and geometry is not None and geometry.num_experts:
        text += f", {geometry.num_experts} experts"
    return text


def parts_text(report: ModelReport) -> str:
    """Which parts the export has: text model, MTP head, vision encoder."""
    if report.layout == "none":
        return "no model files"
    parts = ["text"]
    if report.mtp.present:
        parts.append("MTP head")
    vision = [c for c in report.components if c.use == "image"]
    if vision and all(c.present for c in vision):
        parts.append("vision encoder")
    elif any(c.present for c in vision):
        parts.append("vision encoder (incomplete)")
    layout = "image-text-to-text export" if report.layout == "vlm" else "text-only export"
    return f"{', '.join(parts)} · {layout}"
