"""MCP servers as the user configures them: a program started over stdio (command, arguments,
environment) or a streamable HTTP URL (with headers), and the tools always allowed to run.

Every value is checked here, whether typed in the dialog, imported from another app's JSON or
read back from the settings file: a bad one is a `McpConfigError` that names the server and the
field and says what to do, never a traceback. `import_servers` reads the `mcpServers` block that
Claude Desktop, LM Studio and Cursor write:

    {"mcpServers": {"files": {"command": "npx", "args": ["-y", "pkg"], "env": {"K": "v"}},
                    "remote": {"url": "https://example.com/mcp", "headers": {"X": "y"}}}}
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import urlsplit

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.safe_files import number_in_range, parse_json_text

Transport = Literal["stdio", "http"]

#: Bounds on what a configuration may hold (far above any real one).
MAX_SERVERS = 64
MAX_NAME = 64
MAX_TEXT = 4096
MAX_ITEMS = 128
MAX_IMPORT_CHARS = 1_000_000
#: A tool call's time limit: the default and what the setting accepts (seconds).
DEFAULT_TIMEOUT_S = 60.0
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 1.0, 3600.0
#: A server name: shown in the chat and used in tool names, so printable and short.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 _.\-]*$")
#: An environment variable's or header's name.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


class McpConfigError(UserFacingError):
    """An MCP server's configuration is not usable; the message names the server and field."""

    code = "MCP_CONFIG"


@dataclass(frozen=True)
class McpServer:
    """One MCP server. `transport` is "stdio" (`command`, `args`, `env`) or "http" (`url`,
    `headers`); `always_allowed` are tools that run without asking (the user chose
    "Always allow")."""

    name: str
    transport: Transport = "stdio"
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    always_allowed: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        check_server(self)

    @property
    def summary(self) -> str:
        """What the server is, in one line: "npx -y pkg" or the URL."""
        if self.transport == "http":
            return self.url
        return " ".join([self.command, *self.args])

    def allowing(self, tool: str) -> McpServer:
        if tool in self.always_allowed:
            return self
        return replace(self, always_allowed=(*self.always_allowed, tool))

    def to_dict(self) -> dict[str, Any]:
        """The stored form (the settings file): the `mcpServers` shape plus our fields."""
        stored: dict[str, Any] = {"name": self.name}
        if self.transport == "http":
            stored["url"] = self.url
            if self.headers:
                stored["headers"] = dict(self.headers)
        else:
            stored["command"] = self.command
            stored["args"] = list(self.args)
            if self.env:
                stored["env"] = dict(self.env)
        if self.always_allowed:
            stored["always_allowed"] = list(self.always_allowed)
        return stored


def _text(value: object, where: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise McpConfigError(f"{where} must be text, not {_kind(value)}.")
    if not empty and not value.strip():
        raise McpConfigError(f"{where} is empty.")
    if len(value) > MAX_TEXT:
        raise McpConfigError(f"{where} is {len(value):,} characters long; at most {MAX_TEXT:,}.")
    if "\x00" in value:
        raise McpConfigError(f"{where} contains a NUL character.")
    return value


def _kind(value: object) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "text",
        bool: "true/false",
        type(None): "null",
    }.get(type(value), "a number")


def check_name(name: object) -> str:
    text = _text(name, "The server's name")
    if len(text) > MAX_NAME or not _NAME.match(text):
        raise McpConfigError(
            f"The server name {text[:80]!r} is not usable.",
            f"Use up to {MAX_NAME} letters, digits, spaces, '-', '_' or '.', starting with a "
            "letter or digit.",
        )
    return text


def check_server(server: McpServer) -> None:
    """McpConfigError when a field of `server` is unusable."""
    name = check_name(server.name)
    where = f"Server {name!r}:"
    if server.transport == "http":
        _check_url(server.url, where)
        _pairs(server.headers, f"{where} header", _HEADER_NAME, allow_empty_value=True)
    elif server.transport == "stdio":
        command = _text(server.command, f"{where} the command")
        if command != command.strip() or not command.isprintable():
            raise McpConfigError(
                f"{where} the command {command[:80]!r} has spaces around it or control characters.",
                "Put the program alone in Command and each argument in Arguments.",
            )
        if len(server.args) > MAX_ITEMS:
            raise McpConfigError(f"{where} {len(server.args)} arguments; at most {MAX_ITEMS}.")
        for index, arg in enumerate(server.args):
            _text(arg, f"{where} argument {index + 1}", empty=True)
        _pairs(server.env, f"{where} environment variable", _ENV_NAME, allow_empty_value=True)
    else:
        raise McpConfigError(f"{where} unknown transport {str(server.transport)[:40]!r}.")
    if len(server.always_allowed) > MAX_ITEMS:
        raise McpConfigError(f"{where} too many always-allowed tools.")
    for tool in server.always_allowed:
        _text(tool, f"{where} an always-allowed tool's name")


def _check_url(url: object, where: str) -> None:
    text = _text(url, f"{where} the URL")
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc or not text.isprintable():
        raise McpConfigError(
            f"{where} {text[:120]!r} is not an http:// or https:// URL.",
            "Give the server's streamable HTTP endpoint, e.g. http://127.0.0.1:8000/mcp.",
        )


def _pairs(
    pairs: Sequence[tuple[str, str]], what: str, pattern: re.Pattern[str], allow_empty_value: bool
) -> None:
    if len(pairs) > MAX_ITEMS:
        raise McpConfigError(f"{what}s: {len(pairs)} given; at most {MAX_ITEMS}.")
    seen: set[str] = set()
    for key, value in pairs:
        _text(key, f"{what} name")
        if not pattern.match(key):
            raise McpConfigError(f"{what} name {key[:80]!r} is not a valid name.")
        if key in seen:
            raise McpConfigError(f"{what} {key!r} is given twice.")
        seen.add(key)
        _text(value, f"{what} {key!r}", empty=allow_empty_value)
        if "\n" in value or "\r" in value:
            raise McpConfigError(f"{what} {key!r} contains a line break.")


def _string_map(value: object, where: str) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise McpConfigError(f"{where} must be an object of names to text, not {_kind(value)}.")
    pairs = []
    for key, item in value.items():
        if not isinstance(item, str):
            raise McpConfigError(f"{where} {str(key)[:60]!r} must be text, not {_kind(item)}.")
        pairs.append((str(key), item))
    return tuple(pairs)


def server_from_dict(name: object, raw: object) -> McpServer:
    """One server from its `mcpServers` entry (or our stored form); McpConfigError if bad."""
    checked = check_name(name)
    where = f"Server {checked!r}:"
    if not isinstance(raw, Mapping):
        raise McpConfigError(f"{where} its entry must be an object, not {_kind(raw)}.")
    allowed = raw.get("always_allowed", [])
    if not isinstance(allowed, list):
        raise McpConfigError(f"{where} always_allowed must be a list of tool names.")
    has_url, has_command = "url" in raw or "serverUrl" in raw, "command" in raw
    if has_url and has_command:
        raise McpConfigError(
            f"{where} it has both a command and a URL.", "Keep one: a program or a URL."
        )
    if has_url:
        kind = raw.get("type", raw.get("transport", "http"))
        if kind not in ("http", "streamable-http", "streamable_http", "streamableHttp"):
            raise McpConfigError(
                f"{where} transport {str(kind)[:40]!r} is not supported.",
                "Only streamable HTTP servers (and stdio programs) can be added; an SSE-only "
                "server needs a proxy such as mcp-proxy.",
            )
        return McpServer(
            checked,
            "http",
            url=raw.get("url", raw.get("serverUrl")),
            headers=_string_map(raw.get("headers"), f"{where} headers"),
            always_allowed=tuple(allowed),
        )
    if not has_command:
        raise McpConfigError(
            f"{where} it has neither a command nor a URL.",
            'Give "command" (and "args") for a program, or "url" for an HTTP server.',
        )
    args = raw.get("args", [])
    if not isinstance(args, list):
        raise McpConfigError(f"{where} args must be a list of text, not {_kind(args)}.")
    return McpServer(
        checked,
        "stdio",
        command=raw["command"],
        args=tuple(args),
        env=_string_map(raw.get("env"), f"{where} env"),
        always_allowed=tuple(allowed),
    )


def import_servers(text: str) -> list[McpServer]:
    """The servers of a pasted JSON `mcpServers` block (the whole file another app writes, the
    block alone, or one server's entry as {"name": {...}}); McpConfigError says what is wrong."""
    if len(text) > MAX_IMPORT_CHARS:
        raise McpConfigError(f"The JSON is {len(text):,} characters; at most {MAX_IMPORT_CHARS:,}.")
    try:
        parsed = parse_json_text(text, max_values=100_000)
    except (ValueError, RecursionError) as exc:
        raise McpConfigError(
            f"This is not valid JSON ({str(exc)[:200]}).",
            'Paste the "mcpServers" block as another app writes it.',
        ) from None
    if not isinstance(parsed, dict):
        raise McpConfigError(f"The JSON must be an object, not {_kind(parsed)}.")
    block = parsed.get("mcpServers", parsed.get("servers", parsed))
    if not isinstance(block, dict) or not block:
        raise McpConfigError(
            'No servers found: expected {"mcpServers": {"name": {"command": ...}}}.'
        )
    if len(block) > MAX_SERVERS:
        raise McpConfigError(f"{len(block)} servers; at most {MAX_SERVERS}.")
    return [server_from_dict(name, entry) for name, entry in block.items()]


def servers_from_settings(value: object) -> list[McpServer]:
    """The stored list (the settings file's `mcp_servers`); McpConfigError on any bad entry."""
    if not isinstance(value, list) or len(value) > MAX_SERVERS:
        raise McpConfigError(f"mcp_servers must be a list of at most {MAX_SERVERS} servers.")
    servers = []
    names: set[str] = set()
    for entry in value:
        if not isinstance(entry, dict):
            raise McpConfigError(f"each stored MCP server must be an object, not {_kind(entry)}.")
        server = server_from_dict(entry.get("name"), entry)
        if server.name in names:
            raise McpConfigError(f"two stored MCP servers are named {server.name!r}.")
        names.add(server.name)
        servers.append(server)
    return servers


def stored_servers(value: object) -> list[dict[str, Any]] | None:
    """The settings validator: the list in its stored form, or None when any entry is bad."""
    try:
        return [server.to_dict() for server in servers_from_settings(value)]
    except McpConfigError:
        return None


def stored_timeout(value: object) -> float | None:
    """The settings validator of the tool-call time limit (seconds)."""
    return number_in_range(value, MIN_TIMEOUT_S, MAX_TIMEOUT_S)


def merge(existing: Sequence[McpServer], added: Sequence[McpServer]) -> list[McpServer]:
    """`existing` with `added` put in: a server of the same name is replaced in place."""
    merged = list(existing)
    for server in added:
        at = next((i for i, s in enumerate(merged) if s.name == server.name), None)
        if at is None:
            merged.append(server)
        else:
            merged[at] = server
    if len(merged) > MAX_SERVERS:
        raise McpConfigError(f"At most {MAX_SERVERS} MCP servers can be configured.")
    return merged


def allowing_tool(servers: Sequence[McpServer], name: str, tool: str) -> list[McpServer]:
    """`servers` (the latest stored list) with `tool` always allowed on the server `name`,
    every other entry and field as it is (merge on write: the chat changes only this one)."""
    return [server.allowing(tool) if server.name == name else server for server in servers]


def putting(servers: Sequence[McpServer], old_name: str | None, new: McpServer) -> list[McpServer]:
    """`servers` (the latest stored list) with `new` in the place of the server `old_name`
    (added when None or gone); McpConfigError when the list would be too long."""
    if old_name is None or all(s.name != old_name for s in servers):
        return merge(servers, [new])
    return [new if s.name == old_name else s for s in servers]
