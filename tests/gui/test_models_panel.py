"""The Models panel with real (tiny) IR folders, real worker threads and a real file watcher;
dialogs are replaced through ModelDialogs."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt, QUrl
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QLabel, QWidget
from pytestqt.qtbot import QtBot

import qwen_mtp_desktop
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME, ExportManifest
from qwen_mtp_desktop.core.models.library import VERDICT_LABELS, scan_library
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.ui.models.common import SEVERITY_COLORS, ModelDialogs
from qwen_mtp_desktop.ui.models.finding_words import FINDING_HEADINGS
from qwen_mtp_desktop.ui.models.model_row import DETAIL_ROLE, LOADED_ROLE, LOADED_TEXT
from qwen_mtp_desktop.ui.models.panel import ModelsPanel
from qwen_mtp_desktop.ui.widgets.style import stylesheet
from tests.unit.test_model_folders import make_export

pytestmark = pytest.mark.gui

WAIT = 30_000
LEFT = Qt.MouseButton.LeftButton
GIB = 1024**3


@dataclass
class FakeDialogs:
    """Answers instead of a user; records what the panel asked."""

    folder: Path | None = None
    answer: bool = True
    confirmations: list[str] = field(default_factory=list)
    messages: list[tuple[str, str]] = field(default_factory=list)
    urls: list[QUrl] = field(default_factory=list)

    def dialogs(self) -> ModelDialogs:
        return ModelDialogs(
            choose_folder=lambda _parent, _title, _start: self.folder,
            confirm=self._confirm,
            inform=lambda _parent, title, text: self.messages.append((title, text)),
            open_url=self._open,
        )

    def _confirm(self, _parent: QWidget, _title: str, text: str, _action: str) -> bool:
        self.confirmations.append(text)
        return self.answer

    def _open(self, url: QUrl) -> bool:
        self.urls.append(url)
        return True


@pytest.fixture(autouse=True)
def resources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private resources folder, so the bundled demo model is whatever a test puts there."""
    folder = tmp_path / "resources"
    monkeypatch.setenv("QWEN_MTP_DESKTOP_RESOURCES", str(folder))
    return folder


@pytest.fixture
def fake() -> FakeDialogs:
    return FakeDialogs()


def wait_idle(qtbot: QtBot, panel: ModelsPanel, scans: int = 1) -> None:
    qtbot.waitUntil(lambda: panel.scans_done >= scans and not panel.busy, timeout=WAIT)


PanelFactory = Callable[..., ModelsPanel]


@pytest.fixture
def make_panel(qtbot: QtBot, fake: FakeDialogs) -> Iterator[PanelFactory]:
    panels: list[ModelsPanel] = []

    def make(folders: list[Path] | None = None, **kwargs: Any) -> ModelsPanel:
        paths = app_paths().ensure()
        store = SettingsStore(paths.settings_file)
        store.settings.model_folders = [str(f) for f in folders or []]
        store.save()
        kwargs.setdefault("memory_probe", lambda: (16 * GIB, 32 * GIB))
        panel = ModelsPanel(store, paths, dialogs=fake.dialogs(), debounce_ms=150, **kwargs)
        panels.append(panel)
        qtbot.addWidget(panel)
        panel.resize(1130, 780)
        panel.show()
        wait_idle(qtbot, panel)
        return panel

    yield make
    for panel in panels:
        panel.shutdown()


def entry_paths(panel: ModelsPanel) -> list[Path]:
    return [entry.path for entry in panel.entries]


def shoot(
    qtbot: QtBot, panel: ModelsPanel, widget: QWidget, name: str, screenshot_dir: Path
) -> Path:
    """Save `widget` once the panel is idle and the details page has its final height:
    grab() paints at once, without waiting for pending relayouts (wrapped labels)."""
    wait_idle(qtbot, panel)
    content = panel.details.content
    qtbot.waitUntil(
        lambda: content.height() >= content.heightForWidth(content.width()), timeout=WAIT
    )
    qtbot.wait(100)
    path = screenshot_dir / f"models_{name}.png"
    assert widget.grab().save(str(path))
    return path


@pytest.fixture
def app_style() -> Iterator[None]:
    """The app's own stylesheet, as `make run` applies it, for realistic screenshots."""
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    app.setStyleSheet(stylesheet(False))
    yield
    app.setStyleSheet("")


# --- listing and details -------------------------------------------------------------------


def test_lists_demo_managed_and_added_folders(
    make_panel: PanelFactory, resources: Path, tmp_path: Path
) -> None:
    demo = make_export(resources / "demo-model" / "openvino")
    managed = make_export(app_paths().models_dir / "exported int4")
    group = tmp_path / "group"
    a = make_export(group / "a")
    b = make_export(group / "sub" / "b", with_mtp=False)
    panel = make_panel([group])
    assert entry_paths(panel) == [demo, managed, a, b]
    rows = [panel.model_list.topLevelItem(i) for i in range(panel.model_list.topLevelItemCount())]
    names = [row.text(0) for row in rows if row is not None]
    details = [row.data(0, DETAIL_ROLE).split(" · ") for row in rows if row is not None]
    assert names[0] == "Demo model"
    assert [d[2] for d in details] == ["MTP head", "MTP head", "MTP head", "no MTP head"]
    assert all(d[0] == "Qwen3.5 dense" and d[1].endswith("KB") for d in details)
    # The demo is the default (nothing configured), so it is selected first.
    assert panel.selected_path == demo
    assert panel.details.default_badge.isVisible()
    assert not panel.details.delete_button.isEnabled()
    assert not panel.details.remove_button.isEnabled()
    items = [panel.folder_list.item(i) for i in range(panel.folder_list.count())]
    assert [item.data(Qt.ItemDataRole.UserRole) for item in items] == [
        str(app_paths().models_dir),
        str(group),
    ]
    assert items[0].text() == "App model folder"
    assert items[1].text().endswith("/group"), "long paths lose their middle, not their end"
    # The summary counts the folders listed, not every folder the watcher holds.
    assert len(panel.watched_folders) > 2
    assert "4 models in 2 library folders" in panel.status_label.text()


def test_the_model_the_chat_loaded_is_marked(
    make_panel: PanelFactory, resources: Path, tmp_path: Path
) -> None:
    demo = make_export(resources / "demo-model" / "openvino")
    other = make_export(tmp_path / "lib" / "Qwen3.5-0.8B-int4")
    panel = make_panel([tmp_path / "lib"])
    rows = {
        Path(item.data(0, Qt.ItemDataRole.UserRole)): item
        for i in range(panel.model_list.topLevelItemCount())
        if (item := panel.model_list.topLevelItem(i)) is not None
    }
    assert not any(item.data(0, LOADED_ROLE) for item in rows.values())
    panel.set_loaded(other)
    rows = {
        Path(item.data(0, Qt.ItemDataRole.UserRole)): item
        for i in range(panel.model_list.topLevelItemCount())
        if (item := panel.model_list.topLevelItem(i)) is not None
    }
    assert rows[other].data(0, LOADED_ROLE) and not rows[demo].data(0, LOADED_ROLE)
    assert LOADED_TEXT in rows[other].toolTip(0)
    panel.select(other)
    assert panel.details.loaded_badge.isVisibleTo(panel)
    panel.select(demo)
    assert not panel.details.loaded_badge.isVisibleTo(panel)
    panel.set_loaded(None)  # ejected
    assert panel.loaded_path is None


def test_a_disabled_delete_is_not_red(
    make_panel: PanelFactory, resources: Path, app_style: None
) -> None:
    demo = make_export(resources / "demo-model" / "openvino")
    panel = make_panel([])
    panel.select(demo)
    button = panel.details.delete_button
    assert not button.isEnabled()  # the demo is part of the app
    image = button.grab().toImage()
    red = QColor(SEVERITY_COLORS["error"])

    def reddish(x: int, y: int) -> bool:
        color = image.pixelColor(x, y)
        return (
            abs(color.red() - red.red()) < 40
            and abs(color.green() - red.green()) < 40
            and abs(color.blue() - red.blue()) < 40
        )

    assert not any(reddish(x, y) for x in range(image.width()) for y in range(image.height()))


def test_selection_shows_details(make_panel: PanelFactory, tmp_path: Path) -> None:
    model = make_export(tmp_path / "lib" / "Qwen int4")
    broken = make_export(tmp_path / "lib" / "no tokenizer", tokenizer=False)
    panel = make_panel([tmp_path / "lib"])
    assert panel.select(model)
    details = panel.details
    report = panel.report(model)
    assert report is not None
    assert details.title_label.text() == "Qwen int4"
    assert details.path_label.text() == str(model)
    assert details.overview.values["Kind"].text().startswith("Qwen3.5 dense")
    table = details.component_table
    assert table.rowCount() == len(report.components)
    first = [item.text() if (item := table.item(0, c)) else "" for c in range(4)]
    assert first[0] == "Language model" and first[1] == "chat"
    assert first[2].endswith("KB") and first[3] == "INT4 asym g16 (100 %)"
    size = table.item(0, 2)
    assert size is not None and ".xml:" in size.toolTip() and ".bin:" in size.toolTip()
    assert details.mtp_form.values["Present"].text().startswith("yes")
    assert details.mtp_form.values["Compressed like the model"].text() == "yes (both INT4)"
    assert [row.code for row in details.diagnostic_rows] == []
    assert details.open_button.isEnabled() and details.validate_button.isEnabled()

    assert panel.select(broken)
    assert details.title_label.text() == "no tokenizer"
    codes = [row.code for row in details.diagnostic_rows]
    assert codes[0] == "TOKENIZER_MISSING"
    row = details.diagnostic_rows[0]
    assert row.fix_label is not None and row.fix_label.text().startswith("Fix: Re-export")
    assert not details.open_button.isEnabled(), "a model with errors cannot be opened"
    assert not details.default_button.isEnabled()


def test_memory_verdict_matches_the_report(
    make_panel: PanelFactory, qtbot: QtBot, tmp_path: Path
) -> None:
    model = make_export(tmp_path / "lib" / "m")
    available = [16 * GIB]
    panel = make_panel([tmp_path / "lib"], memory_probe=lambda: (available[0], 32 * GIB))
    panel.select(model)
    details = panel.details

    def shown_matches() -> None:
        report = panel.report(model)
        assert report is not None and report.memory is not None
        assert details.verdict_label.text() == VERDICT_LABELS[report.memory.verdict]
        assert details.context_length == report.memory.context_length
        tip = details.memory_need_label.toolTip()
        for term in report.memory.terms:
            assert term.formula in tip

    shown_matches()
    assert details.verdict_label.text() == "Fits"
    # The estimate follows the context length without re-reading the folder.
    report = panel.report(model)
    assert report is not None and report.memory is not None
    small = report.memory.total_bytes
    details.context_combo.setCurrentIndex(details.context_combo.findData(262144))
    report = panel.report(model)
    assert report is not None and report.memory is not None
    assert report.memory.context_length == 262144 and report.memory.total_bytes > small
    shown_matches()

    # Little free RAM: the verdict, the badge and the diagnostics say so.
    available[0] = report.memory.total_bytes * 100 // 85
    panel.rescan()
    wait_idle(qtbot, panel, scans=2)
    shown_matches()
    assert details.verdict_label.text() == "Tight"
    assert "MEMORY_TIGHT" in [row.code for row in details.diagnostic_rows]
    available[0] = 1_000_000
    panel.rescan()
    wait_idle(qtbot, panel, scans=3)
    shown_matches()
    assert details.verdict_label.text() == "Does not fit"


# --- actions -------------------------------------------------------------------------------


def test_add_folder_by_slot_and_by_dialog(
    make_panel: PanelFactory, fake: FakeDialogs, qtbot: QtBot, tmp_path: Path
) -> None:
    panel = make_panel()
    assert entry_paths(panel) == []
    assert "No models yet" in panel.details.empty_label.text()
    first = make_export(tmp_path / "first" / "m1")
    assert panel.add_folder(tmp_path / "first")
    qtbot.waitUntil(lambda: entry_paths(panel) == [first], timeout=WAIT)
    stored = SettingsStore(app_paths().settings_file).settings
    assert stored.model_folders == [str(tmp_path / "first")]

    second = make_export(tmp_path / "second")  # a folder that is itself a model
    fake.folder = second
    qtbot.mouseClick(panel.add_folder_button, LEFT)
    qtbot.waitUntil(lambda: entry_paths(panel) == [first, second], timeout=WAIT)

    assert not panel.add_folder(tmp_path / "missing")
    assert fake.messages and "not a folder" in fake.messages[-1][1]


def test_remove_from_library_keeps_files(
    make_panel: PanelFactory, qtbot: QtBot, tmp_path: Path
) -> None:
    a = make_export(tmp_path / "lib" / "a")
    b = make_export(tmp_path / "lib" / "b")
    panel = make_panel([tmp_path / "lib"])
    panel.select(a)
    panel.set_default_selected()
    qtbot.mouseClick(panel.details.remove_button, LEFT)
    qtbot.waitUntil(lambda: entry_paths(panel) == [b], timeout=WAIT)
    assert a.is_dir() and (a / "openvino_language_model.bin").is_file()
    stored = SettingsStore(app_paths().settings_file).settings
    assert stored.default_model is None
    assert [e.path for e in scan_library(stored)] == [b], "the CLI sees the same library"
    assert "files are still in" in panel.status_label.text()

    # Removing the library folder itself.
    panel.folder_list.setCurrentRow(1)
    assert panel.remove_folder_button.isEnabled()
    qtbot.mouseClick(panel.remove_folder_button, LEFT)
    qtbot.waitUntil(lambda: entry_paths(panel) == [], timeout=WAIT)
    assert b.is_dir()


def test_delete_from_disk(
    make_panel: PanelFactory, fake: FakeDialogs, qtbot: QtBot, tmp_path: Path, resources: Path
) -> None:
    demo = make_export(resources / "demo-model" / "openvino")
    keep = make_export(tmp_path / "lib" / "keep")
    doomed = make_export(tmp_path / "lib" / "doomed")
    panel = make_panel([tmp_path / "lib"])
    deleted: list[Path] = []
    panel.model_deleted.connect(deleted.append)

    panel.select(doomed)
    fake.answer = False
    panel.delete_selected()
    qtbot.waitUntil(lambda: len(fake.confirmations) == 1, timeout=WAIT)
    assert doomed.is_dir(), "cancelled: nothing happens"
    assert "doomed" in fake.confirmations[0] and str(doomed) in fake.confirmations[0]
    assert " KB)" in fake.confirmations[0], "the dialog names the size"

    fake.answer = True
    qtbot.mouseClick(panel.details.delete_button, LEFT)
    qtbot.waitUntil(lambda: deleted == [doomed], timeout=WAIT)
    wait_idle(qtbot, panel)
    qtbot.waitUntil(lambda: entry_paths(panel) == [demo, keep], timeout=WAIT)
    assert not doomed.exists() and keep.is_dir()
    assert sorted(p.name for p in (tmp_path / "lib").iterdir()) == ["keep"]

    # The demo model is refused, even when asked directly.
    panel.select(demo)
    panel.delete_selected()
    assert fake.messages[-1][0] == "Cannot delete" and demo.is_dir()

    # Something that stopped being a model folder since the scan is refused too.
    panel.select(keep)
    for item in keep.iterdir():
        if item.name.startswith("openvino_language_model"):
            item.unlink()
    (keep / "config.json").unlink()
    panel.delete_selected()
    qtbot.waitUntil(lambda: "does not look like a model" in fake.messages[-1][1], timeout=WAIT)
    assert keep.is_dir()


def _manifest(folder: Path, files: dict[str, str]) -> None:
    manifest = ExportManifest(source="Qwen/Qwen3.5-0.8B", revision="main", files=files)
    (folder / MANIFEST_NAME).write_text(json.dumps(manifest.to_json_dict()))


def test_verify_integrity(make_panel: PanelFactory, qtbot: QtBot, tmp_path: Path) -> None:
    model = make_export(tmp_path / "lib" / "m")
    (model / "big.bin").write_bytes(b"\x01" * (24 * 1024 * 1024))  # progress over many chunks
    names = ["openvino_language_model.bin", "openvino_mtp_model.bin", "big.bin"]
    _manifest(model, {n: hashlib.sha256((model / n).read_bytes()).hexdigest() for n in names})
    panel = make_panel([tmp_path / "lib"])
    panel.select(model)
    details = panel.details
    assert "SHA-256 sums for 3 files" in details.integrity_label.text()
    progress: list[tuple[int, int]] = []
    original = details.set_verify_progress

    def record(done: int, total: int) -> None:
        progress.append((done, total))
        original(done, total)

    details.set_verify_progress = record  # type: ignore[method-assign]

    with qtbot.waitSignal(panel.verify_finished, timeout=WAIT):
        qtbot.mouseClick(details.verify_button, LEFT)
        assert not details.verify_button.isEnabled()
    assert [row.code for row in details.integrity_rows] == ["CHECKSUMS_OK"]
    # A pass reads as one: the green tick stays in the list, no internal code on screen.
    (passed,) = details.integrity_rows
    texts = [label.text() for label in passed.findChildren(QLabel)]
    assert "Files intact" in texts and not any("CHECKSUMS_OK" in text for text in texts)
    assert "CHECKSUMS_OK" in passed.toolTip()  # for a bug report
    assert panel._status_of(model) == "ok"
    # In words, not a raw code.
    assert panel.status_label.text() == (
        f"Integrity check of {model.name}: All 3 files match the export record."
    )
    assert progress and progress[-1][0] == progress[-1][1] > 24 * 1024 * 1024
    assert [d for d, _t in progress] == sorted(d for d, _t in progress)
    assert not details.verify_row.isVisible() and details.verify_button.isEnabled()
    assert panel.model_list.topLevelItem(0) is not None

    # Wrong sums: an error, and the list's status icon turns to error.
    _manifest(model, {n: "0" * 64 for n in names[:1]} | {names[1]: "f" * 64})
    wait_idle(qtbot, panel)
    qtbot.waitUntil(lambda: panel.report(model) is not None, timeout=WAIT)
    panel.select(model)
    with qtbot.waitSignal(panel.verify_finished, timeout=WAIT):
        panel.verify_selected()
    codes = [row.code for row in details.integrity_rows]
    assert codes == ["CHECKSUM_MISMATCH", "CHECKSUM_MISMATCH"]
    headings = [row.heading_label.text() for row in details.integrity_rows]
    assert headings == ["File changed or damaged"] * 2
    assert panel._status_of(model) == "error"
    assert "Problems found" in panel.status_label.text()

    # Cancel: the check stops at the next chunk.
    _manifest(model, {"big.bin": "0" * 64})
    wait_idle(qtbot, panel)
    qtbot.waitUntil(lambda: panel.report(model) is not None, timeout=WAIT)
    panel.select(model)
    # Hold the verify thread so the cancel lands before hashing starts, whatever the timing.
    gate = threading.Event()
    panel._verify_runner.submit(lambda: gate.wait(10))
    with qtbot.waitSignal(panel.verify_finished, timeout=WAIT):
        panel.verify_selected()
        panel.cancel_verify()
        gate.set()
    assert [row.code for row in details.integrity_rows] == ["CHECKSUMS_CANCELLED"]
    assert details.integrity_rows[0].heading_label.text() == "Check stopped"


def _in_view(details: Any, widget: QWidget) -> bool:
    """Whether `widget` is on screen in the details pane as scrolled now (not below the fold)."""
    viewport = details.scroll_area.viewport()
    top_left = widget.mapTo(viewport, widget.rect().topLeft())
    bottom = top_left.y() + widget.height()
    return widget.isVisible() and top_left.y() >= 0 and bottom <= viewport.height()


@pytest.mark.parametrize("size", [(1024, 700), (1600, 1000)])
def test_verify_shows_its_progress_and_result_under_its_button(
    make_panel: PanelFactory,
    qtbot: QtBot,
    tmp_path: Path,
    size: tuple[int, int],
    app_style: None,
) -> None:
    """Issue 44, minor 18: the check's outcome was only in the small status line (and the
    Integrity section, far below the fold); it now shows under Verify integrity, in view."""
    model = make_export(tmp_path / "lib" / "m")
    names = ["openvino_language_model.bin", "openvino_mtp_model.bin"]
    _manifest(model, {n: hashlib.sha256((model / n).read_bytes()).hexdigest() for n in names})
    panel = make_panel([tmp_path / "lib"])
    panel.resize(*size)
    panel.select(model)
    details = panel.details
    shots = Path("/tmp/shots")
    shots.mkdir(exist_ok=True)
    gate = threading.Event()
    panel._verify_runner.submit(lambda: gate.wait(10))  # hold it to see the progress
    with qtbot.waitSignal(panel.verify_finished, timeout=WAIT):
        qtbot.mouseClick(details.verify_button, LEFT)
        qtbot.waitUntil(lambda: _in_view(details, details.verify_row), timeout=WAIT)
        assert not details.verify_result.isVisible()
        gate.set()
    qtbot.waitUntil(lambda: _in_view(details, details.verify_result), timeout=WAIT)
    assert not details.verify_row.isVisible()
    assert details.verify_result_label.text() == (
        "Integrity check: All 2 files match the export record."
    )
    shoot(qtbot, panel, panel, f"verify_ok_{size[0]}", shots)

    # A damaged file: the line says so, in view, with the error icon.
    _manifest(model, {names[0]: "0" * 64, names[1]: "f" * 64})
    wait_idle(qtbot, panel)
    qtbot.waitUntil(lambda: panel.report(model) is not None, timeout=WAIT)
    panel.select(model)
    with qtbot.waitSignal(panel.verify_finished, timeout=WAIT):
        panel.verify_selected()
    qtbot.waitUntil(lambda: _in_view(details, details.verify_result), timeout=WAIT)
    text = details.verify_result_label.text()
    assert text.startswith("Integrity check: Problems found: openvino_language_model.bin")
    shoot(qtbot, panel, panel, f"verify_mismatch_{size[0]}", shots)
    # Another model's page does not carry this one's result.
    other = make_export(tmp_path / "lib" / "n")
    wait_idle(qtbot, panel)
    qtbot.waitUntil(lambda: other in entry_paths(panel), timeout=WAIT)
    panel.select(other)
    qtbot.waitUntil(lambda: not details.verify_result.isVisible(), timeout=WAIT)


def test_every_finding_code_has_words() -> None:
    """Each code the inspector, the checksum check and the loader can report has a heading in
    finding_words (the one place): a new code without one would show a bare severity word."""
    package = Path(qwen_mtp_desktop.__file__).parent
    sources = [*(package / "core" / "models" / "folders").rglob("*.py")]
    sources += [*(package / "ui" / "models").rglob("*.py")]
    # A finding's code: the first argument of Diagnostic(...), or a `code = "A" if ... else "B"`.
    found = re.compile(r'Diagnostic\(\s*"([A-Z0-9_]+)"|\bcode = ("[A-Z0-9_]+".*)')
    codes: set[str] = set()
    for path in sources:
        for literal, chosen in found.findall(path.read_text(encoding="utf-8")):
            codes |= {literal} if literal else set(re.findall(r'"([A-Z0-9_]{4,})"', chosen))
    assert {"CHECKSUMS_OK", "CHECKSUM_MISMATCH", "MTP_MISSING", "IR_CORRUPT"} <= codes
    missing = sorted(codes - FINDING_HEADINGS.keys())
    assert not missing, f"no words for {missing} in ui/models/finding_words.py"
    for code, heading in FINDING_HEADINGS.items():
        assert heading and code not in heading and not heading.isupper()


def test_signals_reveal_and_default(
    make_panel: PanelFactory, fake: FakeDialogs, qtbot: QtBot, tmp_path: Path
) -> None:
    model = make_export(tmp_path / "lib" / "m")
    panel = make_panel([tmp_path / "lib"])
    panel.select(model)
    d = panel.details
    for button, signal in (
        (d.open_button, panel.open_in_chat),
        (d.validate_button, panel.validate_requested),
        (d.reexport_button, panel.reexport_requested),
        (d.default_button, panel.default_model_changed),
    ):
        with qtbot.waitSignal(signal, timeout=2000) as blocker:
            qtbot.mouseClick(button, LEFT)
        assert blocker.args == [model]
    assert SettingsStore(app_paths().settings_file).settings.default_model == str(model.resolve())
    assert d.default_badge.isVisible() and not d.default_button.isEnabled()
    item = panel.model_list.topLevelItem(0)
    assert item is not None and item.font(0).bold()
    qtbot.mouseClick(d.reveal_button, LEFT)
    assert fake.urls == [QUrl.fromLocalFile(str(model))]


def test_models_changed_lists_usable_models(
    make_panel: PanelFactory, qtbot: QtBot, tmp_path: Path
) -> None:
    good = make_export(tmp_path / "lib" / "good")
    make_export(tmp_path / "lib" / "bad", tokenizer=False)
    panel = make_panel()
    usable: list[list[Path]] = []
    panel.models_changed.connect(usable.append)
    panel.add_folder(tmp_path / "lib")
    wait_idle(qtbot, panel, scans=2)
    assert usable[-1] == [good]


def test_watcher_picks_up_a_copied_model(
    make_panel: PanelFactory, qtbot: QtBot, tmp_path: Path
) -> None:
    source = make_export(tmp_path / "elsewhere" / "m")
    watched = tmp_path / "watched"
    (watched / "group").mkdir(parents=True)
    panel = make_panel([watched])
    assert entry_paths(panel) == []
    assert str(watched) in panel.watched_folders
    shutil.copytree(source, watched / "group" / "copied model")
    qtbot.waitUntil(
        lambda: entry_paths(panel) == [watched / "group" / "copied model"], timeout=WAIT
    )
    wait_idle(qtbot, panel)
    copied = watched / "group" / "copied model"
    report = panel.report(copied)
    assert report is not None and report.codes() == []

    # Damage inside a watched model folder is noticed too.
    (copied / "openvino_tokenizer.xml").unlink()
    qtbot.waitUntil(
        lambda: (r := panel.report(copied)) is not None and "TOKENIZER_MISSING" in r.codes(),
        timeout=WAIT,
    )
    assert panel._status_of(copied) == "error"


# --- damaged real exports and screenshots --------------------------------------------------


@pytest.mark.export
@pytest.mark.export
def test_damaged_exports_never_crash_the_panel(
    make_panel: PanelFactory, qtbot: QtBot, tmp_path: Path, screenshot_dir: Path, app_style: None
) -> None:
    from tests.integration.test_models_cli import DAMAGE, damaged_library, dense_int4

    library = tmp_path / "library"
    damaged = damaged_library(library, dense_int4())
    panel = make_panel([library])
    expected = {damaged[name] for name in DAMAGE}
    assert set(entry_paths(panel)) == expected, "empty / unrelated folders are not models"
    for name, (code, usable) in DAMAGE.items():
        assert panel.select(damaged[name])
        report = panel.report(damaged[name])
        assert report is not None and report.usable_for_chat is usable, name
        shown = [row.code for row in panel.details.diagnostic_rows]
        assert shown == sorted(
            report.codes(), key=lambda c: ["error", "warning", "info"].index(_severity(report, c))
        )
        if code:
            assert code in shown, name
        assert panel.details.open_button.isEnabled() is usable
    panel.select(damaged["garbage xml"])
    shoot(qtbot, panel, panel, "damaged", screenshot_dir)
    shoot(qtbot, panel, panel.details.content, "damaged_details", screenshot_dir)
    panel.select(damaged["missing mtp"])
    shoot(qtbot, panel, panel.details.content, "missing_mtp_details", screenshot_dir)


def _severity(report: Any, code: str) -> str:
    return str(next(d.severity for d in report.diagnostics if d.code == code))


@pytest.mark.export
@pytest.mark.export
def test_screenshots_of_real_exports(
    make_panel: PanelFactory,
    qtbot: QtBot,
    tmp_path: Path,
    resources: Path,
    screenshot_dir: Path,
    app_style: None,
) -> None:
    from tests.integration.test_models_cli import dense_int4
    from tests.models import cached_checkpoint, cached_export

    shutil.copytree(dense_int4(), resources / "demo-model" / "openvino")
    library = tmp_path / "My models"
    shutil.copytree(dense_int4(), library / "Qwen3.5 tiny int4")
    moe = library / "Qwen3.5 MoE tiny fp16"
    shutil.copytree(cached_export(cached_checkpoint(moe=True), "fp16"), moe)
    broken = library / "Qwen3.5 tiny (interrupted copy)"
    shutil.copytree(dense_int4(), broken)
    (broken / "openvino_tokenizer.xml").unlink()
    panel = make_panel([library])
    panel.select(moe)
    shoot(qtbot, panel, panel, "overview", screenshot_dir)
    panel.details.arithmetic_button.setChecked(True)
    panel.details.context_combo.setCurrentIndex(panel.details.context_combo.findData(32768))
    shoot(qtbot, panel, panel.details.content, "details_memory", screenshot_dir)
    report = panel.report(moe)
    assert report is not None and report.memory is not None
    assert panel.details.verdict_label.text() == VERDICT_LABELS[report.memory.verdict]

    manifest_files = {
        name: hashlib.sha256((moe / name).read_bytes()).hexdigest()
        for name in ("openvino_language_model.bin", "openvino_mtp_model.bin")
    }
    manifest_files["openvino_mtp_model.bin"] = "0" * 64
    _manifest(moe, manifest_files)
    wait_idle(qtbot, panel)
    qtbot.waitUntil(lambda: panel.report(moe) is not None, timeout=WAIT)
    panel.select(moe)
    with qtbot.waitSignal(panel.verify_finished, timeout=WAIT):
        panel.verify_selected()
    panel.details.scroll_area.verticalScrollBar().setValue(
        panel.details.scroll_area.verticalScrollBar().maximum()
    )
    shoot(qtbot, panel, panel, "verify_mismatch", screenshot_dir)
    panel.select(broken)
    shoot(qtbot, panel, panel, "broken", screenshot_dir)
