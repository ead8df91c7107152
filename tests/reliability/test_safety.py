"""Item 6: the app does only what the user asked.

- Model output is rendered as text/Markdown only: raw HTML shows as text, no image or other
  resource is loaded (a local HTTP server sees no request), code-block labels are plain text.
- Links open only after the user confirms, and only http(s).
- trust_remote_code is never on unless the user turns it on, and then preflight warns.
- No network request: the real app (start, model load, chats) and the headless commands run
  under an audit hook that records every Python-level connection attempt.
- File names derived from hub ids stay inside their folder (property test).
- Prompts and answers reach the log file only with debug logging on (a real generation, then
  grep the log).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.models.export import hub
from qwen_mtp_desktop.core.models.export.command import export_command
from qwen_mtp_desktop.core.models.export.options import (
    ExportOptions,
    default_destination,
    parse_source,
)
from qwen_mtp_desktop.core.models.export.preflight.checkpoint import inspect_checkpoint_folder
from qwen_mtp_desktop.core.models.export.preflight.checks import run_preflight
from qwen_mtp_desktop.core.settings.store import Settings, save_settings
from tests.conftest import REPO_ROOT
from tests.reliability import figures
from tests.remote_server import ConnectionCounter

# --- rendering -----------------------------------------------------------------------------


HOSTILE = """Here you go: <b>bold?</b> <script>alert(1)</script>
<img src="http://127.0.0.1:{port}/pixel.png">

![tracker](http://127.0.0.1:{port}/tracker.png)

![local file](file://{secret})

<iframe src="http://127.0.0.1:{port}/frame"></iframe>

[click me](javascript:alert(1)) and <http://127.0.0.1:{port}/auto>

```<b>lang</b>
<i>code</i>
```
"""


@pytest.mark.gui
def test_model_output_is_text_and_markdown_only(qtbot: QtBot, tmp_path: Path) -> None:
    from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget
    from qwen_mtp_desktop.ui.chat.transcript.text_views import AutoHeightText, CodeBlock

    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    listener = ConnectionCounter()
    try:
        text = HOSTILE.format(port=listener.port, secret=secret)
        # Rendered whole (a stored answer) and streamed in small pieces (a live one).
        whole = MessageWidget("assistant", dark=False, content=text)
        streamed = MessageWidget("assistant", dark=False)
        for widget in (whole, streamed):
            qtbot.addWidget(widget)
            widget.resize(700, 600)
            widget.show()
        streamed.begin_stream()
        for start in range(0, len(text), 7):
            streamed.append(text[start : start + 7])
        qtbot.wait(200)
        streamed.end_stream()
        qtbot.wait(300)
        for widget in (whole, streamed):
            views = widget.findChildren(AutoHeightText)
            shown = "\n".join(view.toPlainText() for view in views)
            assert "<b>bold?</b>" in shown and "<script>" in shown  # shown as text
            for view in views:
                document = view.document()
                # Raw HTML never became elements; Markdown images stay unloaded placeholders.
                assert "<script" not in document.toHtml() and "<iframe" not in document.toHtml()
                for url in (
                    f"http://127.0.0.1:{listener.port}/tracker.png",
                    f"file://{secret}",
                    str(secret),
                    "data:image/png;base64,iVBORw0KGgo=",
                ):
                    resource = document.resource(
                        QTextDocument.ResourceType.ImageResource, QUrl(url)
                    )
                    assert not resource, f"{url} was loaded: {resource!r}"[:200]
                assert not view.openLinks() and not view.openExternalLinks()
            (block,) = widget.findChildren(CodeBlock)
            assert block.language_label.text() == "<b>lang</b>"
            assert block.language_label.textFormat().name == "PlainText"
        QApplication.processEvents()
        assert listener.connections == 0, "rendering fetched a remote resource"
    finally:
        listener.close()


@pytest.mark.gui
@pytest.mark.parametrize(
    ("url", "asked", "opened_if_yes"),
    [
        ("https://example.org/page", True, True),
        ("http://example.org/page", True, True),
        ("javascript:alert(1)", False, False),
        ("file:///etc/passwd", False, False),
        ("data:text/html,<script>alert(1)</script>", False, False),
        ("ftp://example.org/x", False, False),
        ("qwen-mtp-desktop://settings", False, False),
    ],
)
def test_links_open_only_after_confirmation_and_only_http(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, url: str, asked: bool, opened_if_yes: bool
) -> None:
    from qwen_mtp_desktop.ui.chat import panel as chat_panel
    from qwen_mtp_desktop.ui.chat.transcript import links
    from qwen_mtp_desktop.ui.chat.transcript.message import MessageWidget

    questions: list[str] = []
    infos: list[str] = []
    opened: list[str] = []
    answers = [QMessageBox.StandardButton.No, QMessageBox.StandardButton.Yes]
    # The dialogs and the browser call, where the chat's link handler (ui.chat.transcript.links)
    # uses them.
    monkeypatch.setattr(
        links.QMessageBox,
        "question",
        lambda _parent, _title, text, *a, **k: (questions.append(text), answers.pop(0))[1],
    )
    monkeypatch.setattr(
        links.QMessageBox, "information", lambda _p, _t, text, *a, **k: infos.append(text)
    )
    monkeypatch.setattr(
        links.QDesktopServices, "openUrl", lambda target: opened.append(target.toString())
    )
    host = QWidget()
    qtbot.addWidget(host)
    widget = MessageWidget("assistant", dark=False, content=f"[link]({url})")
    qtbot.addWidget(widget)
    # The chat panel's own handler, wired the way the chat panel wires every message widget.
    widget.link_requested.connect(lambda target: chat_panel.ChatPanel._open_link(host, target))
    from qwen_mtp_desktop.ui.chat.transcript.text_views import AutoHeightText

    (text_view,) = [v for v in widget.findChildren(AutoHeightText) if "link" in v.toPlainText()]
    for _ in range(2):  # first the user says No, then Yes
        text_view.anchorClicked.emit(QUrl(url))
    if asked:
        assert len(questions) == 2 and url.split(":")[0] in questions[0]
        assert opened == [QUrl(url).toString()]  # only after "Yes"
    else:
        assert questions == [] and opened == []
        assert len(infos) == 2


def test_trust_remote_code_is_never_on_by_default(tmp_path: Path) -> None:
    from qwen_mtp_desktop.core.models.export.options import WEIGHT_FORMATS

    for fmt in WEIGHT_FORMATS:
        for options in (ExportOptions(weight_format=fmt), ExportOptions.recommended(fmt)):
            assert options.trust_remote_code is False
            command = export_command("/ckpt", tmp_path / "out", options)
            assert "--trust-remote-code" not in command, command
    explicit = export_command(
        "/ckpt", tmp_path / "out", ExportOptions(weight_format="fp16", trust_remote_code=True)
    )
    assert "--trust-remote-code" in explicit
    # Turned on by the user, it is never silent: preflight warns about it.
    checkpoint = REPO_ROOT / "resources" / "demo-model" / "checkpoint"
    report = run_preflight(
        inspect_checkpoint_folder(checkpoint),
        ExportOptions(weight_format="fp16", trust_remote_code=True),
        tmp_path / "out",
    )
    item = report.item("trust_remote_code")
    assert item is not None and item.status == "warn"


@pytest.mark.gui
def test_export_panel_never_turns_trust_remote_code_on(qtbot: QtBot, demo_model: Path) -> None:
    from qwen_mtp_desktop.ui.export.panel import ExportPanel
    from qwen_mtp_desktop.workers.tasks import TaskRunner

    manifest = json.loads((demo_model / "qwen_mtp_export.json").read_text())
    manifest["options"]["trust_remote_code"] = True  # an export record that says "on"
    copy = app_paths().ensure().models_dir / "reexport"
    import shutil

    shutil.copytree(demo_model, copy)
    (copy / "qwen_mtp_export.json").write_text(json.dumps(manifest))
    runner = TaskRunner("io")
    panel = ExportPanel(runner, app_paths().models_dir, cleanup_at_start=False)
    qtbot.addWidget(panel)
    assert not panel.trust_check.isChecked()
    panel.prefill_from_model(copy)  # "Re-export" from the Models panel
    assert not panel.trust_check.isChecked()
    panel.shutdown()
    runner.shutdown()


# --- network -------------------------------------------------------------------------------

AUDITED_CLI = """
import json, sys
sys.argv = ["qwen-mtp-desktop"]
sys.path.insert(0, {repo!r})
from tests.reliability.app_child import audit_network
audit_network({report!r})
from qwen_mtp_desktop.cli import main
code = main({args!r})
sys.stdout.flush()
raise SystemExit(code)
"""


@pytest.mark.subprocess
def test_no_network_request_the_user_did_not_start(tmp_path: Path, demo_model: Path) -> None:
    home = app_paths().ensure()
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONPATH": str(REPO_ROOT),
        "QWEN_MTP_DESKTOP_HOME": str(home.data_dir.parent),
    }
    # Online mode on purpose: nothing may rely on HF_HUB_OFFLINE to stay quiet.
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    reports: dict[str, list[str]] = {}
    app_report = tmp_path / "app.json"
    result = subprocess.run(
        [sys.executable, "-m", "tests.reliability.app_child", "--turns", "3",
         "--new-chat", "--audit-network", str(app_report)],
        capture_output=True, text=True, timeout=180, env=env, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    reports["app: start, load, 3 chat turns"] = json.loads(app_report.read_text())
    commands = {
        "doctor": ["doctor", "--json"],
        "models inspect": ["models", "inspect", str(demo_model), "--json"],
        "models list": ["models", "list", "--json"],
        "generate": ["generate", str(demo_model), "Count from 1 to 5.", "--json"],
        "validate": ["validate", str(demo_model), "--prompts", "demo", "--json"],
    }
    for name, args in commands.items():
        report = tmp_path / f"{name.replace(' ', '-')}.json"
        code = AUDITED_CLI.format(repo=str(REPO_ROOT), report=str(report), args=args)
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=180,
            env=env, cwd=REPO_ROOT,
        )  # fmt: skip
        assert "Traceback" not in result.stderr, (name, result.stderr[-2000:])
        reports[name] = json.loads(report.read_text())
    figures.record(
        "safety",
        network_audit_flows=sorted(reports),
        network_attempts=sum(len(v) for v in reports.values()),
    )
    assert {k: v for k, v in reports.items() if v} == {}


# --- hub ids -> file names -----------------------------------------------------------------

_PIECES = st.sampled_from(
    ["..", ".", "/", "\\", "~", "org", "name", "Qwen3.5-0.8B", "a_b", "x.y", "-", "%2e%2e",
     "\x00", " ", "C:", "models--", "refs", "snapshots", "@main", "@../..", "é", "中文"]
)  # fmt: skip
hub_texts = st.lists(_PIECES, min_size=1, max_size=8).map("".join) | st.text(max_size=40)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(text=hub_texts)
def test_names_from_hub_ids_stay_inside_their_folder(text: str) -> None:
    root = Path("/models-root")
    cache = Path("/hf-cache")
    try:
        source = parse_source(text)
    except (ValueError, OSError) as exc:  # e.g. NUL in a path
        assert not isinstance(exc, RecursionError)
        return
    except Exception as exc:  # UserFacingError (empty input) is fine
        from qwen_mtp_desktop.core.errors import UserFacingError

        assert isinstance(exc, UserFacingError), exc
        return
    if source.kind != "hub":
        return
    destination = default_destination(source, ExportOptions(weight_format="int4"), root)
    assert destination.parent == root, destination
    assert destination.name not in ("", ".", "..") and "/" not in destination.name
    folder = hub.repo_folder(source.value, cache)
    assert folder.parent == cache and folder.name.startswith("models--"), folder


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(revision=hub_texts, repo=st.sampled_from(["org/name", "Qwen/Qwen3.5-0.8B"]))
def test_hub_revisions_never_lead_out_of_the_cache(
    tmp_path_factory: pytest.TempPathFactory, repo: str, revision: str
) -> None:
    cache = tmp_path_factory.getbasetemp() / "hf-cache"
    outside = tmp_path_factory.getbasetemp() / "outside-commit"
    folder = hub.repo_folder(repo, cache)
    (folder / "refs").mkdir(parents=True, exist_ok=True)
    (folder / "snapshots").mkdir(exist_ok=True)
    outside.mkdir(exist_ok=True)
    # A file outside the cache whose content points further out.
    (cache.parent / "evil-ref").write_text("../../../outside-commit")
    try:
        found = hub.cached_snapshot(repo, revision, cache)
    except (ValueError, OSError):
        return
    if found is not None:
        snapshot = found[0].resolve()
        assert snapshot.is_relative_to(cache.resolve()), (revision, snapshot)


def test_hub_revision_traversal_is_refused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    folder = hub.repo_folder("org/name", cache)
    (folder / "refs").mkdir(parents=True)
    (folder / "snapshots").mkdir()
    (tmp_path / "evil").write_text("../../../../outside")
    (tmp_path / "outside").mkdir()
    assert hub.cached_snapshot("org/name", "../../../evil", cache) is None
    commit = "a" * 40
    (folder / "snapshots" / commit).mkdir()
    (folder / "refs" / "main").write_text(commit)
    assert hub.cached_snapshot("org/name", None, cache) == (folder / "snapshots" / commit, commit)


# --- logs ----------------------------------------------------------------------------------


def _chat_and_read_log(debug: bool, tmp_path: Path) -> tuple[str, list[str], list[str]]:
    home = tmp_path / ("debug" if debug else "quiet")
    save_settings(home / "config" / "settings.json", Settings(debug_logging=debug))
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": "offscreen",
        "PYTHONPATH": str(REPO_ROOT),
        "QWEN_MTP_DESKTOP_HOME": str(home),
    }
    result = subprocess.run(
        [sys.executable, "-m", "tests.reliability.app_child", "--turns", "2", "--new-chat"],
        capture_output=True, text=True, timeout=180, env=env, cwd=REPO_ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    events = [json.loads(line) for line in result.stdout.splitlines()]
    prompts = [e["prompt"] for e in events if e["event"] == "send"]
    answers: dict[int, str] = {}
    for e in events:
        if e["event"] == "chunk":
            answers[e["turn"]] = answers.get(e["turn"], "") + e["text"]
    logs = "".join(
        p.read_text(encoding="utf-8", errors="replace") for p in (home / "logs").glob("app.log*")
    )
    return logs + result.stderr, prompts, [a for a in answers.values() if a.strip()]


@pytest.mark.subprocess
def test_prompts_and_answers_reach_the_log_only_with_debug_logging(tmp_path: Path) -> None:
    from qwen_mtp_desktop.core.files.paths import HOME_ENV

    assert HOME_ENV == "QWEN_MTP_DESKTOP_HOME"
    quiet, prompts, answers = _chat_and_read_log(False, tmp_path)
    assert prompts and answers
    assert "loaded" in quiet  # the log is written, just without conversations
    for text in prompts + answers:
        assert text not in quiet, f"conversation text in the log: {text[:60]!r}"
    loud, prompts, answers = _chat_and_read_log(True, tmp_path)
    for text in prompts + answers:
        assert text in loud, f"debug logging did not record {text[:60]!r}"
    figures.record(
        "safety",
        log_check="prompts/answers absent from app.log by default; present with debug logging",
    )
