"""MCP tools in the chat's turns: the loop an answer runs when the model calls tools.

The chat's turn controller (ui.chat.turns.controller, its `TurnTools`) calls four hooks: `plan`
(before a turn starts: offer the enabled servers' tools, and force a call when "Use a tool" is
chosen),
`take_over` (an engine answer finished: if it calls tools, this module continues the turn and
the controller does not finish it), `annotate` (the finished answer's stats record gets its tool
calls) and `stop` (Stop while a tool waits or runs).

A round: the answer's calls are read (core.chat.tools.read_calls: a local model's text parsed by
core.tools.calls, a remote server's own `tool_calls`, which the remote client sends the chat's
tools to and reads back), shown in the answer (folded rows,
ui.chat.transcript.tool_calls_view), each asked for (Allow once / Always allow this tool / Deny)
unless its server always allows it, run one after another on the MCP client's thread
(workers.mcp_tools,
with the app's time limit), then the engine answers again with the calls and their results
appended; at most MAX_ROUNDS rounds. The text of a round before its calls stays in the answer;
the call markup never shows and is never stored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, QTimer
from PySide6.QtWidgets import QScrollArea

from qwen_mtp_desktop.core.chat.store.records import ChatSettings
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.chat.tools import (
    MAX_ROUNDS,
    CallStatus,
    ToolCatalog,
    ToolRound,
    TracedCall,
    read_calls,
    round_messages,
    trace_record,
)
from qwen_mtp_desktop.core.chat.turns import Turn
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import GenerationSettings, Message
from qwen_mtp_desktop.core.tools.calls import Calls, Malformed, new_call_id
from qwen_mtp_desktop.core.tools.mcp.client import McpError, ToolInfo, ToolResult
from qwen_mtp_desktop.core.tools.mcp.config import DEFAULT_TIMEOUT_S, McpServer
from qwen_mtp_desktop.ui.chat.conversations.open_chat import ConversationController
from qwen_mtp_desktop.ui.chat.header import ChatHeader
from qwen_mtp_desktop.ui.chat.options.panel import ChatSettingsPanel
from qwen_mtp_desktop.ui.chat.options.tools import ToolOptions
from qwen_mtp_desktop.ui.chat.transcript.tool_calls_view import view_of
from qwen_mtp_desktop.ui.chat.transcript.view import Transcript
from qwen_mtp_desktop.ui.chat.turns.controller import Stream, TurnController
from qwen_mtp_desktop.ui.chat.turns.live_figures import LiveFigures
from qwen_mtp_desktop.workers.mcp_tools import McpTools
from qwen_mtp_desktop.workers.model_router import ModelRouter, is_remote

log = logging.getLogger(__name__)


class TurnHost(Protocol):
    """What this module uses of the chat panel's view (ChatPanel offers it; a Protocol keeps
    the import one way)."""

    settings_panel: ChatSettingsPanel
    header: ChatHeader
    transcript: Transcript
    figures: LiveFigures

    def show_problem(self, text: str, severity: str = "error") -> None: ...

    def current_model_dir(self) -> Path: ...


@dataclass
class ToolRun:
    """One answer's tool loop: what the model read first, the tools, the rounds so far."""

    history: list[Message]
    catalog: ToolCatalog
    settings: GenerationSettings
    servers: dict[str, McpServer]
    rounds: list[ToolRound] = field(default_factory=list)
    #: Where this round's text starts in the answer's widget.
    offset: int = 0
    #: The request running now: a tool call (its MCP request id) or none.
    tool_request: int | None = None
    last_stats: GenerationStats | None = None
    stream: Stream | None = None

    @property
    def calls(self) -> list[TracedCall]:
        return list(self.rounds[-1].calls) if self.rounds else []

    def set_call(self, index: int, call: TracedCall) -> None:
        calls = self.calls
        calls[index] = call
        self.rounds[-1] = replace(self.rounds[-1], calls=tuple(calls))


class ToolTurns(QObject):
    """The MCP tools of one chat panel (see the module docstring)."""

    def __init__(
        self,
        panel: TurnHost,
        chats: ConversationController,
        router: ModelRouter,
        turns: TurnController,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._panel = panel
        self._chats = chats
        self._router = router
        self._turns = turns
        self._mcp: McpTools | None = None
        #: The app's servers, "Always allow" saved (server, tool: only that entry changes, on
        #: the latest settings) and the time limit: set by attach().
        self.servers: Callable[[], list[McpServer]] = list
        self.allow_tool: Callable[[str, str], None] = lambda _server, _tool: None
        self.timeout_s: Callable[[], float] = lambda: DEFAULT_TIMEOUT_S
        #: Tools listed per server (or why not), and list requests in flight.
        self._listed: dict[str, list[ToolInfo] | McpError] = {}
        self._listing: dict[int, str] = {}
        #: Lists asked before the servers changed: their answers are only settled.
        self._dropped: set[int] = set()
        self._run: ToolRun | None = None
        self.options = ToolOptions()
        self.options.enabled_changed.connect(self._on_enabled_changed)
        panel.settings_panel.tool_section.addWidget(self.options)
        panel.settings_panel.settings_shown.connect(lambda _settings: self.refresh())
        panel.header.tools_button.clicked.connect(self.open_options)

    def attach(
        self,
        mcp: McpTools,
        servers: Callable[[], list[McpServer]],
        allow_tool: Callable[[str, str], None],
        timeout_s: Callable[[], float],
    ) -> None:
        self._mcp = mcp
        self.servers, self.allow_tool, self.timeout_s = servers, allow_tool, timeout_s
        mcp.listed.connect(self._on_listed)
        mcp.called.connect(self._on_called)
        self.servers_changed()

    @property
    def running(self) -> ToolRun | None:
        return self._run

    # --- options ---------------------------------------------------------------------------

    def _chat_settings(self) -> ChatSettings:
        return self._panel.settings_panel.settings

    def _enabled(self) -> list[McpServer]:
        wanted = self._chat_settings().mcp_servers
        return [server for server in self.servers() if server.name in wanted]

    _shown_renames = ""

    def servers_changed(self) -> None:
        """The app's server list changed: list every server's tools again. Lists asked before
        are dropped: their server may have been changed or restarted since (two quick saves in
        the MCP dialog left the first list's error standing, and the chat without tools)."""
        self._listed.clear()
        self._dropped.update(self._listing)
        self._listing.clear()
        self.refresh()

    def refresh(self) -> None:
        """Show this chat's servers and tools; list the enabled ones not listed yet."""
        if self._mcp is not None:
            asked = set(self._listing.values())
            for server in self._enabled():
                if server.name not in self._listed and server.name not in asked:
                    self._listing[self._mcp.list_tools(server)] = server.name
        states = {}
        for server in self.servers():
            found = self._listed.get(server.name)
            if isinstance(found, McpError):
                states[server.name] = f"not available: {found.message}"
            elif found is not None:
                states[server.name] = f"{len(found)} tool{'s' if len(found) != 1 else ''}"
            elif server.name in self._listing.values():
                states[server.name] = "starting…"
        self.options.show_servers(self.servers(), self._chat_settings().mcp_servers, states)
        self._panel.header.show_tools([server.name for server in self._enabled()])
        catalog = self.catalog()
        self.options.show_functions(sorted(catalog.functions))
        # Two servers' tools that would share a name are renamed, never dropped: say so once.
        renames = "; ".join(catalog.problems)
        if renames and renames != self._shown_renames:
            self._panel.show_problem(f"Tools renamed to keep them apart: {renames}.", "warning")
        self._shown_renames = renames

    def open_options(self) -> None:
        """The header's "Tools: N": Chat options, scrolled to this chat's tools."""
        self._panel.header.settings_toggle.setChecked(True)
        scroll = self.options.parentWidget()
        while scroll is not None and not isinstance(scroll, QScrollArea):
            scroll = scroll.parentWidget()
        if scroll is not None:
            area = scroll
            QTimer.singleShot(0, lambda: area.ensureWidgetVisible(self.options))

    def catalog(self) -> ToolCatalog:
        infos: list[ToolInfo] = []
        for server in self._enabled():
            found = self._listed.get(server.name)
            if isinstance(found, list):
                infos.extend(found)
        return ToolCatalog.of(infos)

    def _on_enabled_changed(self, enabled: tuple[str, ...]) -> None:
        settings = replace(self._chat_settings(), mcp_servers=enabled)
        self._panel.settings_panel.change(settings)
        self.refresh()

    def _on_listed(self, request_id: int, result: object) -> None:
        name = self._listing.pop(request_id, None)
        if request_id in self._dropped and self._mcp is not None:
            self._dropped.discard(request_id)
            self._mcp.settle(request_id)
        if name is None or self._mcp is None:
            return
        self._mcp.settle(request_id)
        if isinstance(result, McpError):
            self._listed[name] = result
            self._panel.show_problem(result.message, "warning")
        elif isinstance(result, list):
            self._listed[name] = [info for info in result if isinstance(info, ToolInfo)]
        self.refresh()

    @property
    def ready(self) -> bool:
        """Every enabled server has answered (with its tools or an error)."""
        return all(server.name in self._listed for server in self._enabled())

    # --- the turn's hooks --------------------------------------------------------------------

    def plan(self, turn: Turn, history: list[Message]) -> Turn:
        """Offer the enabled servers' tools to this turn (and force the chosen one)."""
        self._run = None
        catalog = self.catalog()
        if not catalog.tools:
            return turn
        settings = replace(turn.settings, tools_json=catalog.tools_json)
        servers = {server.name: server for server in self._enabled()}
        self._run = ToolRun(list(history), catalog, settings, servers)
        forced = self.options.forced
        if forced is not None:
            self.options.choose_forced(None)  # for the next message only
            try:
                if settings.thinking:
                    raise ValueError("a forced call cannot be combined with thinking")
                constraint = catalog.forced(forced)
            except ValueError as exc:
                self._panel.show_problem(f"Could not use the tool: {exc}.", "warning")
            else:
                # The local engine forces the call with the grammar; a remote server with
                # tool_choice (core.remote.client).
                method = settings.method.with_constraint(constraint)
                if is_remote(self._panel.current_model_dir()):
                    method = settings.method
                turn.settings = replace(settings, method=method, tool_choice=forced)
                return turn
        lazy = catalog.lazy() if not is_remote(self._panel.current_model_dir()) else None
        if lazy is not None and settings.method.constraint is None:
            # A call the model opens by itself follows the tools' grammar (a remote server
            # reads its calls itself).
            settings = replace(settings, method=settings.method.with_constraint(lazy))
        turn.settings = settings
        return turn

    def take_over(self, stream: Stream, stats: GenerationStats) -> bool:
        """True when the answer that finished called tools: this module continues the turn."""
        run = self._run
        if run is None or stats.finish_reason == "cancelled":
            return False
        run.stream, run.last_stats = stream, stats
        content = stream.widget.content
        # A local model's calls are in its text; a remote server's come parsed (its stats).
        parsed = read_calls(content[run.offset :], stats.remote, run.catalog.tools)
        if isinstance(parsed, Malformed) and stats.remote is not None:
            stream.widget.show_notice(f"The server's tool call could not be run: {parsed.reason}.")
        if not isinstance(parsed, Calls):
            return False
        if len(run.rounds) >= MAX_ROUNDS:
            stream.widget.show_notice(
                f"The model kept calling tools; the chat stopped after {MAX_ROUNDS} rounds."
            )
            return False
        kept = content[: run.offset] + parsed.content
        self._show_text(stream, kept)
        now = time.time()
        calls = []
        for call in parsed.calls:
            server, tool = run.catalog.functions[call.name]
            calls.append(
                TracedCall(new_call_id(), call.name, server, tool, call.arguments, started_at=now)
            )
        run.rounds.append(ToolRound(parsed.content, tuple(calls)))
        view = view_of(stream.widget)
        if not view.property("consent_connected"):  # once per answer, not once per round
            view.decided.connect(self._on_decided)
            view.setProperty("consent_connected", True)
        self._next_call()
        return True

    def annotate(self, stream: Stream, record: dict[str, object]) -> None:
        """The finished answer's record keeps its tool calls (the transcript shows them)."""
        run = self._run
        if run is not None and run.rounds and (run.stream is None or run.stream is stream):
            record["tool_calls"] = trace_record(run.rounds)
        self._run = None

    def stop(self) -> bool:
        """Stop while a tool waits for permission or runs: the answer ends as stopped."""
        run = self._run
        if run is None or run.stream is None or run.last_stats is None:
            return False
        if self._turns.stream is not run.stream or not self._waiting(run):
            return False
        if run.tool_request is not None and self._mcp is not None:
            self._mcp.cancel(run.tool_request)
            run.tool_request = None
        for index, call in enumerate(run.calls):
            if not call.done:
                run.set_call(index, call.with_result("cancelled", "Stopped by the user."))
        view_of(run.stream.widget).show_rounds(run.rounds)
        stats = replace(run.last_stats, finish_reason="cancelled")
        self._turns.finish(stats)
        return True

    @staticmethod
    def _waiting(run: ToolRun) -> bool:
        return bool(run.calls) and not all(call.done for call in run.calls)

    # --- the round ---------------------------------------------------------------------------

    def _show_text(self, stream: Stream, text: str) -> None:
        """The answer's text without this round's call markup, on screen and in the store."""
        widget = stream.widget
        widget.begin_stream()
        widget.append(text)
        stream.take_pending()  # the markup is never written
        message_id = stream.message_id
        if message_id is not None:
            self._chats.submit(lambda store: ChatStore.edit_message(store, message_id, text))

    def _next_call(self) -> None:
        run = self._run
        if run is None or run.stream is None:
            return
        view = view_of(run.stream.widget)
        pending = next((i for i, c in enumerate(run.calls) if not c.done), None)
        if pending is None:
            view.show_rounds(run.rounds)
            self._answer_again(run)
            return
        call = run.calls[pending]
        server = run.servers.get(call.server)
        if server is not None and call.tool in server.always_allowed:
            self._start_call(run, pending)
        else:
            run.set_call(pending, replace(call, status="asking"))
            self._panel.figures.show_figures(f"Waiting for your permission to run {call.tool}")
        view.show_rounds(run.rounds)
        self._panel.transcript.scroll_to_bottom()

    def _on_decided(self, answer: str) -> None:
        run = self._run
        if run is None:
            return
        pending = next((i for i, c in enumerate(run.calls) if c.status == "asking"), None)
        if pending is None:
            return
        call = run.calls[pending]
        if answer == "deny":
            run.set_call(pending, call.with_result("denied", "Denied by the user."))
            self._next_call()
            return
        server = run.servers.get(call.server)
        if answer == "always" and server is not None:
            server = server.allowing(call.tool)
            run.servers[server.name] = server
            self.allow_tool(server.name, call.tool)
        self._start_call(run, pending)

    def _start_call(self, run: ToolRun, index: int) -> None:
        call = run.calls[index]
        server = run.servers.get(call.server)
        if self._mcp is None or server is None:
            run.set_call(index, call.with_result("failed", f"The server {call.server!r} is gone."))
            self._next_call()
            return
        run.set_call(index, replace(call, status="running", started_at=time.time()))
        timeout = self.timeout_s()
        run.tool_request = self._mcp.call_tool(server, call.tool, call.arguments_object, timeout)
        self._panel.figures.show_figures(f"Running {call.tool} ({call.server})…")
        if run.stream is not None:
            view_of(run.stream.widget).show_rounds(run.rounds)

    def _on_called(self, request_id: int, result: object) -> None:
        run = self._run
        if run is None or run.tool_request != request_id:
            return
        run.tool_request = None
        if self._mcp is not None:
            self._mcp.settle(request_id)
        index = next((i for i, c in enumerate(run.calls) if c.status == "running"), None)
        if index is None:
            return
        call = run.calls[index]
        if isinstance(result, ToolResult):
            status: CallStatus = "error" if result.is_error else "ok"
            run.set_call(index, call.with_result(status, result.text, result.duration_s))
        else:
            message = result.message if isinstance(result, McpError) else str(result)
            spent = time.time() - call.started_at
            run.set_call(index, call.with_result("failed", message, spent))
        self._next_call()

    def _answer_again(self, run: ToolRun) -> None:
        """Every call of the round is settled: the model reads the results and goes on."""
        stream = run.stream
        assert stream is not None
        history = run.history + round_messages(run.rounds)
        run.offset = len(stream.widget.content)
        request_id = self._router.start_generation(history, run.settings)
        stream.request_id = request_id
        self._panel.figures.show_waiting()
