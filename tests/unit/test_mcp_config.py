"""MCP server configuration (core.tools.mcp.config): typed servers, the `mcpServers` JSON other apps
write, and the settings file's stored list; hostile input is a clear McpConfigError."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.settings.store import Settings, load_settings, save_settings
from qwen_mtp_desktop.core.tools.mcp.config import (
    McpConfigError,
    McpServer,
    allowing_tool,
    import_servers,
    merge,
    putting,
    servers_from_settings,
)

CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
            "env": {"DEBUG": "1"},
        },
        "remote": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}},
    }
}


def test_imports_the_block_other_apps_write() -> None:
    servers = import_servers(json.dumps(CLAUDE_DESKTOP))
    files, remote = servers
    assert files == McpServer(
        "filesystem",
        "stdio",
        command="npx",
        args=("-y", "@modelcontextprotocol/server-filesystem", "/tmp"),
        env=(("DEBUG", "1"),),
    )
    assert remote.transport == "http" and remote.url == "https://example.com/mcp"
    assert dict(remote.headers) == {"Authorization": "Bearer x"}
    # The block alone, or one entry, reads the same.
    assert import_servers(json.dumps(CLAUDE_DESKTOP["mcpServers"])) == servers


def test_stored_form_round_trips_through_the_settings_file(tmp_path: Path) -> None:
    servers = import_servers(json.dumps(CLAUDE_DESKTOP))
    servers[0] = servers[0].allowing("read_file")
    path = tmp_path / "settings.json"
    save_settings(path, Settings(mcp_servers=[s.to_dict() for s in servers], tool_timeout_s=5))
    loaded = load_settings(path)
    assert loaded.notice is None
    assert servers_from_settings(loaded.settings.mcp_servers) == servers
    assert loaded.settings.tool_timeout_s == 5


def test_damaged_stored_servers_fall_back_with_a_notice(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"mcp_servers": [{"name": "x", "command": 3}], "theme": "dark"}))
    loaded = load_settings(path)
    assert loaded.settings.mcp_servers == [] and loaded.settings.theme == "dark"
    assert loaded.notice is not None and "mcp_servers" in loaded.notice


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "must be an object"),
        ('{"mcpServers": {}}', "No servers found"),
        ('{"mcpServers": {"a": {"command": "x", "url": "http://h/"}}}', "both a command and"),
        ('{"mcpServers": {"a": {}}}', "neither a command nor a URL"),
        ('{"mcpServers": {"a": {"command": ""}}}', "the command is empty"),
        ('{"mcpServers": {"a": {"command": "x", "args": "y"}}}', "args must be a list"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"1X": "y"}}}}', "not a valid name"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"X": 5}}}}', "must be text"),
        ('{"mcpServers": {"a": {"url": "file:///etc/passwd"}}}', "not an http:// or https://"),
        ('{"mcpServers": {"a": {"url": "http://h/", "type": "sse"}}}', "is not supported"),
        ('{"mcpServers": {"a/b": {"command": "x"}}}', "is not usable"),
        ('{"mcpServers": {"a": {"command": " x"}}}', "spaces around it"),
        ('{"mcpServers": {"a": {"url": "http://h/", "headers": {"X": "a\\nb"}}}}', "line break"),
    ],
)
def test_bad_blocks_say_what_is_wrong(text: str, words: str) -> None:
    with pytest.raises(McpConfigError) as caught:
        import_servers(text)
    assert words in str(caught.value)


def test_merge_replaces_by_name() -> None:
    a, b = McpServer("a", command="x"), McpServer("b", command="y")
    assert merge([a, b], [McpServer("a", command="z")]) == [McpServer("a", command="z"), b]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@pytest.mark.slow  # 300 generated entries (~5 s)
@settings(max_examples=300, deadline=None)
@given(
    entry=st.dictionaries(
        st.sampled_from(["command", "args", "env", "url", "headers", "type", "always_allowed"]),
        _json,
    ),
    name=st.text(max_size=70),
)
def test_any_entry_is_a_server_or_a_clear_error(entry: dict[str, object], name: str) -> None:
    text = json.dumps({"mcpServers": {name: entry}})
    try:
        servers = import_servers(text)
    except McpConfigError as exc:
        assert exc.message and "Traceback" not in exc.message
        return
    (server,) = servers
    # What was accepted is storable and reads back the same.
    assert servers_from_settings([server.to_dict()]) == [server]


def test_writes_change_only_their_own_entry() -> None:
    """Issue 44: "Always allow" from the chat and a server edit from the MCP dialog each change
    one entry of the latest list, so neither drops the other's."""
    calc = McpServer("calc", command="python", args=("a.py",))
    other = McpServer("other", command="npx")
    allowed = allowing_tool([calc, other], "calc", "add")
    assert allowed == [replace(calc, always_allowed=("add",)), other]
    assert allowing_tool(allowed, "calc", "add") == allowed  # once
    assert allowing_tool(allowed, "gone", "add") == allowed  # renamed or removed meanwhile
    edited = replace(other, args=("-y", "pkg"))
    assert putting(allowed, "other", edited) == [allowed[0], edited]
    added = McpServer("new", command="uvx")
    assert putting(allowed, None, added) == [*allowed, added]
    assert putting(allowed, "gone", added) == [*allowed, added]
