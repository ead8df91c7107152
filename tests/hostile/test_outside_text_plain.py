"""Text from outside the app is shown as text, never as HTML (issue 45 item 4).

MCP tool names such as `<h1>PWNED</h1>`, `<a href=...>` and `<img src="/etc/passwd">` passed
the printable check and showed as a heading, a link and an attempted local image in the MCP
dialog; a server's stderr in a connection error went to the same label, and a tool call's
tooltip showed the model's arguments the same way. Hypothesis draws HTML-looking text
(tags, entities, links, images, tables, whitespace and line breaks) and feeds it where each
kind of outside text arrives: a server's tool list and its errors, a tool always allowed, a
server's command line (its tooltip), a tool call's name and arguments (its row's tooltip and
the permission question), and the chat's problem line that quotes tool errors. Properties:
every label showing it is PlainText (its text exactly what arrived), and every tooltip
renders to exactly the text that arrived (no element was interpreted)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from PySide6 import QtGui
from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QLabel
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.chat.tools import ToolRound, TracedCall
from qwen_mtp_desktop.core.settings.store import SettingsStore
from qwen_mtp_desktop.core.tools.mcp.client import McpError, ToolInfo
from qwen_mtp_desktop.core.tools.mcp.config import McpServer
from qwen_mtp_desktop.ui.chat.transcript.tool_calls_view import ToolCallsView
from qwen_mtp_desktop.ui.chat.turns.live_figures import LiveFigures
from qwen_mtp_desktop.ui.dialogs.mcp_servers import McpServersDialog
from qwen_mtp_desktop.ui.widgets.plain_text import plain_tooltip
from qwen_mtp_desktop.workers.mcp_tools import McpTools

pytestmark = [pytest.mark.gui]

PWNED = '<h1>PWNED</h1><img src="/etc/passwd"><a href="x">y</a>'
_PIECES = [
    PWNED, "<b>bold</b>", "<i>", "</p>", "<br>", "<table><tr><td>cell</td></tr></table>",
    "&lt;", "&amp;", "&#x41;", "&nbsp;", "<!-- comment -->", "<qt>", "<html><body>", "<",
    ">", '"', "'", "  two  spaces", "\n", "\t", "line\nbreak", "<style>*{color:red}</style>",
    '<img src="file:///etc/passwd">', '<a href="javascript:alert(1)">click</a>', "中文",
    "😀", "\u202e", "tool_name", " ",
]  # fmt: skip
hostile_text = st.lists(st.sampled_from(_PIECES) | st.text(max_size=6), min_size=1, max_size=6).map(
    "".join
)


def rendered(tooltip: str) -> str:
    """What Qt shows for a tooltip: rich text when it looks like it, else as typed."""
    if not QtGui.Qt.mightBeRichText(tooltip):
        return tooltip
    document = QTextDocument()
    document.setHtml(tooltip)
    # toRawText: nbsp kept as typed (toPlainText makes it a space); paragraphs as U+2029.
    return document.toRawText().replace("\u2029", "\n")


def same_text(shown: str, sent: str) -> bool:
    """Whether a tooltip shows `sent` as typed (a rich-text paragraph drops a trailing line
    break, which shows nothing anyway)."""
    return shown.rstrip("\n") == sent.rstrip("\n")


def assert_plain(label: QLabel, text: str) -> None:
    assert label.textFormat() == Qt.TextFormat.PlainText, label.objectName()
    assert text in label.text()


@pytest.fixture(scope="module")
def tools() -> Iterator[McpTools]:
    made = McpTools()
    yield made
    made.shutdown()


_shown = {"texts": 0}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=hostile_text)
@example(text=PWNED)
def test_mcp_dialog_shows_server_text_as_text(
    qtbot: QtBot, tools: McpTools, tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    _shown["texts"] += 1
    folder = tmp_path_factory.mktemp("mcp")
    dialog = McpServersDialog(SettingsStore(folder / "settings.json"), tools)
    qtbot.addWidget(dialog)
    # (A NUL cannot be an argument of a program: the config refuses it, tested elsewhere.)
    args = tuple(part for part in text.replace("\0", "").split() if part) or ("x",)
    server = McpServer("srv", command="python", args=args)
    dialog.add_imported([server])
    # The server's command line, in its list tooltip.
    tip = dialog.server_list.item(0).toolTip()
    assert same_text(rendered(tip), server.summary)
    # Its tool list: names and descriptions as the server gave them (list items are plain
    # text; the tooltip shows the description as typed).
    dialog._testing = 41
    dialog._on_listed(41, [ToolInfo("srv", text, text, {})])
    (item,) = [dialog.tools_list.item(row) for row in range(dialog.tools_list.count())]
    assert item.text().startswith(text)
    about = text or "No description."
    # (A rich-text paragraph drops a leading line break too.)
    shown = rendered(item.toolTip()).lstrip("\n")
    assert same_text(shown, f"{text}\n\n{about}".lstrip("\n"))
    # A connection error quoting the server's stderr.
    dialog._testing = 42
    dialog._on_listed(42, McpError(f"The server exited: {text}"))
    assert_plain(dialog.status, text)
    assert dialog.allowed_label.textFormat() == Qt.TextFormat.PlainText
    dialog.close()


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=hostile_text, arguments=hostile_text)
@example(name=PWNED, arguments=PWNED)
def test_a_tool_call_shows_the_model_s_text_as_text(
    qtbot: QtBot, name: str, arguments: str
) -> None:
    view = ToolCallsView()
    qtbot.addWidget(view)
    call = TracedCall("c1", name, "srv", name, arguments, status="asking")
    view.show_rounds([ToolRound("", (call,))])
    (row,) = view.rows
    assert same_text(rendered(row.toggle.toolTip()), f"{name}: {arguments[:300]}")
    assert view.question.textFormat() == Qt.TextFormat.PlainText
    assert repr(name) in view.question.text()
    figures = LiveFigures()
    figures.show_problem(f"Could not use the tool: {arguments}.", "warning")
    assert_plain(figures.label, arguments)


def test_the_reported_text_is_literal_everywhere(
    qtbot: QtBot, tools: McpTools, tmp_path: Path
) -> None:
    """The report's text, named: a label's format is PlainText, a tooltip shows it whole."""
    assert rendered(plain_tooltip(PWNED)) == PWNED
    assert rendered(plain_tooltip("a\n  b")) == "a\n  b"  # line breaks and spaces kept
    assert plain_tooltip("") == ""
    view = ToolCallsView()
    qtbot.addWidget(view)
    view.show_rounds([ToolRound("", (TracedCall("c", PWNED, "s", PWNED, PWNED, "ok"),))])
    assert rendered(view.rows[0].toggle.toolTip()) == f"{PWNED}: {PWNED}"


def test_record() -> None:
    print(f"outside texts shown: {_shown}")
