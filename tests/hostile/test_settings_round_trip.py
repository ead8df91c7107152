"""A settings file the app writes always loads back whole (issue 45 item 3).

Presets allowed 100 x 32,000 characters, non-ASCII was written as `\\uXXXX` (6 bytes a CJK
character) and the reader stopped at 1 MiB: six presets with 30,000-character CJK system
prompts made a 1,082,559-byte file, and the next start moved it aside and reset presets, MCP
servers, library folders and the API key. Hypothesis fills every setting the UI accepts
with text of any script (CJK, emoji, RTL, combining marks, lone surrogates, every plane), at
sizes up to the limits. Properties: a save either writes a file that `load_settings` reads
back equal, with no notice and nothing moved aside, or refuses with SettingsNotSavedError
naming the size, leaving the file and the settings in memory as they were.
"""

from __future__ import annotations

import copy
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.store.records import ChatSettings
from qwen_mtp_desktop.core.settings.presets import (
    MAX_NAME_CHARS,
    MAX_PRESETS,
    MAX_SYSTEM_PROMPT_CHARS,
    ChatPreset,
    PresetError,
)
from qwen_mtp_desktop.core.settings.store import (
    MAX_SETTINGS_BYTES,
    Settings,
    SettingsNotSavedError,
    SettingsStore,
    load_settings,
    save_settings,
)
from qwen_mtp_desktop.core.tools.mcp.config import McpConfigError, McpServer

#: Text of any script: every code point but NUL (which no text field takes), lone
#: surrogates included (they cannot be UTF-8; the writer escapes them).
_any_char = st.characters(blacklist_characters="\x00")
#: What a preset's name may hold (printable: the panel refuses the rest), of any script.
_name_char = st.characters(categories=["L", "M", "N", "P", "S", "Zs"])
_scripts = [
    "中文提示词",
    "日本語",
    "한국어",
    "😀🧪👩‍💻",
    "עברית\u202e",
    "العربية",
    "é\u0301",
    "a",
    "\U00020000",
]


@st.composite
def big_text(draw: st.DrawFn, max_chars: int) -> str:
    """Up to `max_chars` characters: a drawn piece of any script, repeated (hypothesis does
    not draw 32,000 characters one at a time in reasonable time)."""
    piece = draw(st.sampled_from(_scripts) | st.text(_any_char, min_size=1, max_size=12))
    most = max_chars // len(piece)
    times = draw(st.integers(0, most) | st.just(most))  # at the limit, often
    return (piece * times)[:max_chars]


@st.composite
def presets(draw: st.DrawFn) -> list[dict[str, Any]]:
    # Sometimes every prompt at the limit in a wide script: past the file's limit, or near it
    # (4 MB is 41 presets of 32,000 CJK characters, 31 of emoji).
    full = draw(st.sampled_from([None, None, "中", "😀", "é"]))
    many = (
        st.sampled_from([25, 35, 45, MAX_PRESETS])
        if full
        else st.integers(0, 12) | st.integers(0, MAX_PRESETS)
    )
    count = draw(many)
    kept: list[dict[str, Any]] = []
    for index in range(count):
        raw_name = draw(st.text(_name_char, min_size=1, max_size=MAX_NAME_CHARS))
        prompt = full * MAX_SYSTEM_PROMPT_CHARS if full else draw(big_text(MAX_SYSTEM_PROMPT_CHARS))
        try:
            preset = ChatPreset.of_chat(
                f"{index} {raw_name}"[:MAX_NAME_CHARS], ChatSettings(), prompt
            )
        except PresetError:
            continue  # the panel refuses it too (control characters in the name)
        kept.append(preset.to_stored())
    return kept


@st.composite
def mcp_servers(draw: st.DrawFn) -> list[dict[str, Any]]:
    servers: list[dict[str, Any]] = []
    for index in range(draw(st.integers(0, 4))):
        try:
            server = McpServer(
                f"server {index}",
                command=draw(st.sampled_from(["npx", "python", "/opt/工具/bin/run"])),
                args=tuple(draw(st.lists(st.text(_any_char, max_size=30), max_size=4))),
                env=tuple(
                    (f"K{i}", v)
                    for i, v in enumerate(
                        draw(st.lists(st.text(_any_char, max_size=30), max_size=2))
                    )
                ),
                always_allowed=tuple(
                    draw(st.lists(st.sampled_from(["read", "写", "😀"]), max_size=2, unique=True))
                ),
            )
        except McpConfigError:
            continue  # the MCP dialog refuses it too
        servers.append(server.to_dict())
    return servers


_folder = st.builds(lambda t: "/data/" + t, st.text(_any_char, min_size=1, max_size=80))
_api_key = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x10FFFF, categories=["L", "N", "P", "S"]),
    min_size=1,
    max_size=256,
)


@st.composite
def any_settings(draw: st.DrawFn) -> Settings:
    chosen = draw(presets())
    default = draw(st.sampled_from([None, *(p["name"] for p in chosen)]))
    return Settings(
        default_model=draw(st.none() | _folder),
        model_folders=draw(st.lists(_folder, max_size=5)),
        api_server_key=draw(st.none() | _api_key),
        models_dir=draw(st.none() | _folder.filter(str.isprintable)),
        mcp_servers=draw(mcp_servers()),
        chat_presets=chosen,
        default_chat_preset=default,
        ui_state=draw(
            st.dictionaries(
                st.text(_any_char, min_size=1, max_size=20).map(lambda k: "x." + k),
                st.text(_any_char, max_size=200),
                max_size=3,
            )
        ),
    )


def _six_cjk_presets() -> Settings:
    prompt = ("这是一个很长的系统提示词。" * 3000)[:30_000]
    stored = [ChatPreset(f"预设 {i}", prompt).to_stored() for i in range(6)]
    return Settings(chat_presets=stored, api_server_key="key-123", model_folders=["/models/a"])


def _round_trip(path: Path, written: Settings) -> str:
    """'saved' or 'refused', after checking what each promises."""
    before = path.read_bytes() if path.exists() else None
    try:
        save_settings(path, written)
    except SettingsNotSavedError as exc:
        assert "MB" in exc.message and "chat presets" in exc.message, exc.message
        assert (path.read_bytes() if path.exists() else None) == before, "file changed"
        return "refused"
    size = path.stat().st_size
    assert size <= MAX_SETTINGS_BYTES
    loaded = load_settings(path)
    assert loaded.notice is None, loaded.notice
    assert asdict(loaded.settings) == json.loads(json.dumps(asdict(written)))
    assert not list(path.parent.glob("*.damaged-*")), "the file was moved aside"
    return "saved"


_outcomes = {"saved": 0, "refused": 0}


@pytest.mark.slow  # 60 generated settings files (~7 s)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(written=any_settings())
@example(written=_six_cjk_presets())  # the report's file: 1,082,559 bytes before the fix
def test_a_settings_file_the_app_writes_loads_back_whole(
    written: Settings, tmp_path_factory: pytest.TempPathFactory
) -> None:
    path = tmp_path_factory.mktemp("settings") / "settings.json"
    _outcomes[_round_trip(path, written)] += 1


def test_the_reported_presets_load_back_and_the_file_is_utf8(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    written = _six_cjk_presets()
    save_settings(path, written)
    size = path.stat().st_size
    assert size < 600_000, size  # 3 bytes a CJK character, not 6 (was 1,082,559)
    assert "\\u" not in path.read_text(encoding="utf-8")
    loaded = load_settings(path)
    assert loaded.notice is None and loaded.settings == written


def test_too_much_is_refused_with_a_message_and_memory_stays_as_saved(tmp_path: Path) -> None:
    """100 presets of 32,000 CJK characters (9.6 MB): refused, nothing lost."""
    path = tmp_path / "settings.json"
    store = SettingsStore(path)
    store.settings.api_server_key = "kept-key"
    store.settings.model_folders = ["/models/kept"]
    store.save()
    saved = copy.deepcopy(store.settings)
    on_disk = path.read_bytes()
    prompt = "中" * MAX_SYSTEM_PROMPT_CHARS
    store.settings.chat_presets = [
        ChatPreset(f"P{i}", prompt).to_stored() for i in range(MAX_PRESETS)
    ]
    with pytest.raises(SettingsNotSavedError) as caught:
        store.save()
    message = str(caught.value)
    assert "9.6 MB" in message and "4.0 MB" in message and "chat presets" in message, message
    assert isinstance(caught.value, OSError)  # what every settings-saving UI already shows
    assert path.read_bytes() == on_disk
    assert store.settings == saved  # the change undone in place; the next save works
    store.settings.theme = "dark"
    store.save()
    assert load_settings(path).settings.theme == "dark"
    assert load_settings(path).settings.api_server_key == "kept-key"


def test_a_value_the_loader_would_reject_is_refused_not_written(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    save_settings(path, Settings(api_server_key="good"))
    with pytest.raises(SettingsNotSavedError, match="api_server_key"):
        save_settings(path, Settings(api_server_key=" spaced "))
    assert load_settings(path).settings.api_server_key == "good"


def test_record() -> None:
    """Both outcomes were exercised (printed for the issue's report)."""
    print(f"settings round trips: {_outcomes}")
