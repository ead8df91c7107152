"""McpTools: the window's handle on the MCP client (core.tools.mcp.client). Every request returns an
id at once; its result arrives as a signal on the GUI thread, so a stuck server never blocks
the window.

Signals:
    listed(int, object): a list_tools request's id and its tools (list[ToolInfo]) or McpError.
    called(int, object): a call_tool request's id and its ToolResult or McpError (a cancelled
        call sends nothing).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from concurrent.futures import CancelledError, Future
from typing import Any

from PySide6.QtCore import QObject, Signal

from qwen_mtp_desktop.core.errors import as_user_error
from qwen_mtp_desktop.core.tools.mcp.client import McpError, McpHub
from qwen_mtp_desktop.core.tools.mcp.config import DEFAULT_TIMEOUT_S, McpServer
from qwen_mtp_desktop.workers.foundation import RequestIds

log = logging.getLogger(__name__)


class McpTools(QObject):
    listed = Signal(int, object)
    called = Signal(int, object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._hub: McpHub | None = None  # its thread starts on first use
        self._ids = RequestIds()
        self._futures: dict[int, Future[Any]] = {}

    def _client(self) -> McpHub:
        if self._hub is None:
            self._hub = McpHub()
        return self._hub

    def list_tools(self, server: McpServer) -> int:
        return self._track(self._client().list_tools(server), self.listed)

    def call_tool(
        self,
        server: McpServer,
        name: str,
        arguments: Mapping[str, Any],
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> int:
        return self._track(
            self._client().call_tool(server, name, arguments, timeout_s), self.called
        )

    def forget(self, server_name: str) -> None:
        """Close a server whose configuration changed (reconnected on its next use)."""
        if self._hub is not None:
            self._hub.forget(server_name)

    def cancel(self, request_id: int) -> None:
        """Stop a request: a running tool call's server is ended (restarted on next use)."""
        future = self._futures.pop(request_id, None)
        if future is not None:
            future.cancel()

    def _track(self, future: Future[Any], signal: Any) -> int:
        request_id = self._ids.next()
        self._futures[request_id] = future

        def done(finished: Future[Any]) -> None:  # on the MCP client's thread
            try:
                result: object = finished.result()
            except CancelledError:
                return
            except Exception as exc:
                result = as_user_error(exc, McpError)
            signal.emit(request_id, result)  # queued to the GUI thread

        future.add_done_callback(done)
        return request_id

    def settle(self, request_id: int) -> None:
        """The window has taken this request's result."""
        self._futures.pop(request_id, None)

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """End every server and the client's thread (the app quits)."""
        for request_id in list(self._futures):
            self.cancel(request_id)
        if self._hub is not None:
            self._hub.close(timeout_s)
            self._hub = None
        return True
