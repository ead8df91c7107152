from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.settings.store import (
    SCHEMA_VERSION,
    THEMES,
    Settings,
    SettingsNotSavedError,
    SettingsStore,
    load_settings,
    save_settings,
)
from qwen_mtp_desktop.core.system.state_budget import (
    AUTO_MAX_BYTES,
    AUTO_MIN_BYTES,
    MAX_SETTING_MB,
    MB,
    automatic_bytes,
    describe_automatic,
    load_option,
)


def test_home_override_moves_every_folder(app_home: Path) -> None:
    paths = app_paths().ensure()
    for folder in (paths.data_dir, paths.config_dir, paths.cache_dir, paths.log_dir):
        assert folder.is_dir()
        assert folder.is_relative_to(app_home)
    assert paths.settings_file.parent == paths.config_dir


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    loaded = load_settings(tmp_path / "settings.json")
    assert loaded.settings == Settings()
    assert loaded.notice is None


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "settings.json"
    settings = Settings(default_model="/models/q", device="GPU", model_folders=["/a", "/b"])
    settings.ui_state["geometry"] = "abc"
    save_settings(path, settings)
    assert load_settings(path).settings == settings
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION
    # The write is atomic: no temp files are left next to it.
    assert [p.name for p in path.parent.iterdir()] == ["settings.json"]


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "[1, 2]",
        '{"device": 3}',
        '{"schema_version": 999}',
        '{"debug_logging": "yes"}',
        b"\xff\xfe garbage",
    ],
)
def test_damaged_file_is_kept_aside_and_defaults_used(tmp_path: Path, content: str | bytes) -> None:
    path = tmp_path / "settings.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    original = path.read_bytes()
    loaded = load_settings(path)
    assert loaded.settings == Settings()
    assert loaded.notice is not None and "default settings" in loaded.notice
    backups = list(tmp_path.glob("settings.json.damaged-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == original
    assert not path.exists()


def test_unknown_keys_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"schema_version": 1, "device": "NPU", "future_key": 1}))
    loaded = load_settings(path)
    assert loaded.notice is None
    assert loaded.settings.device == "NPU"


def test_store_saves(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path / "settings.json")
    store.settings.device = "GPU"
    store.save()
    assert SettingsStore(tmp_path / "settings.json").settings.device == "GPU"


@pytest.mark.parametrize("chat_first", [True, False])
def test_updates_merge_whoever_saves_first(tmp_path: Path, chat_first: bool) -> None:
    """Issue 44: two parts of the app save different keys (or entries), in either order, on
    the one store: both survive in the file."""
    store = SettingsStore(tmp_path / "settings.json")
    store.update(lambda s: setattr(s, "mcp_servers", [{"name": "calc", "command": "python"}]))

    def chat(s: Settings) -> None:  # "Always allow" on one entry
        s.mcp_servers = [dict(entry, always_allowed=["add"]) for entry in s.mcp_servers]

    def dialog(s: Settings) -> None:  # another key
        s.tool_timeout_s = 15.0

    for change in (chat, dialog) if chat_first else (dialog, chat):
        store.update(change)
    saved = SettingsStore(tmp_path / "settings.json").settings
    assert saved.mcp_servers[0]["always_allowed"] == ["add"] and saved.tool_timeout_s == 15.0


# --- Settings page values (issue 18): theme and models folder, hostile values ------------------

_ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=60),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(theme=_ANY_JSON, models_dir=_ANY_JSON)
def test_theme_and_models_dir_are_kept_only_when_valid(
    tmp_path_factory: pytest.TempPathFactory, theme: object, models_dir: object
) -> None:
    folder = tmp_path_factory.mktemp("settings")
    path = folder / "settings.json"
    path.write_text(json.dumps({"schema_version": 1, "device": "GPU", "theme": theme,
                                "models_dir": models_dir}))  # fmt: skip
    loaded = load_settings(path)
    settings_ = loaded.settings
    assert settings_.device == "GPU"  # a bad value never costs the good ones
    valid_theme = theme in THEMES
    assert settings_.theme == (theme if valid_theme else "system")
    valid_dir = (
        isinstance(models_dir, str)
        and 0 < len(models_dir) <= 4096
        and models_dir.isprintable()
        and Path(models_dir).is_absolute()
    )
    assert settings_.models_dir == (models_dir if valid_dir else None)
    bad = [name for name, ok, value in (("theme", valid_theme, theme),
                                        ("models_dir", valid_dir, models_dir))
           if not ok and value is not None]  # fmt: skip
    if bad:
        assert loaded.notice is not None and all(name in loaded.notice for name in bad)
    else:
        assert loaded.notice is None
        save_settings(path, settings_)
        assert load_settings(path).settings == settings_


def test_models_folder_change_moves_nothing_and_keeps_the_old_folder_listed(
    tmp_path: Path,
) -> None:
    from qwen_mtp_desktop.core.models.data_folders import apply_models_folder, check_models_folder
    from qwen_mtp_desktop.core.models.library import library_folders

    paths = app_paths().ensure()
    old = paths.models_dir
    old.mkdir(parents=True)
    (old / "my-export").mkdir()
    (old / "my-export" / "weights.bin").write_bytes(b"keep")
    new = tmp_path / "big-disk" / "models"
    chosen = check_models_folder(str(new), paths)
    assert chosen == new and not new.exists()  # checking creates nothing
    settings_ = Settings()
    change = apply_models_folder(settings_, chosen, paths)
    assert settings_.models_dir == str(new)
    assert settings_.model_folders == [str(old)]
    assert "nothing is moved, copied or deleted" in change.message and str(old) in change.message
    assert (old / "my-export" / "weights.bin").read_bytes() == b"keep"
    # At the next start the app uses the new folder and still lists the old one.
    restarted = paths.with_models_dir(settings_.models_dir)
    assert restarted.models_dir == new
    listed = [(f.path, f.origin) for f in library_folders(settings_, restarted)]
    assert listed == [(new, "managed"), (old, "folder")]
    # Choosing the default folder again drops the override.
    assert apply_models_folder(settings_, paths.default_models_dir, restarted).folder
    assert settings_.models_dir is None


REFUSED = ("data", "config", "cache", "logs", "home", "root", "file", "relative", "same",
           "inside", "control", "no_such_user", "proc", "sys", "temp")  # fmt: skip


@pytest.mark.parametrize("where", REFUSED)
def test_models_folder_refusals_say_why(tmp_path: Path, where: str) -> None:
    from qwen_mtp_desktop.core.models.data_folders import FolderChoiceError, check_models_folder

    paths = app_paths().ensure()
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    text = {
        "data": str(paths.data_dir),
        "config": str(paths.config_dir / "models"),
        "cache": str(paths.cache_dir),
        "logs": str(paths.log_dir / "m"),
        "home": str(Path.home()),
        "root": "/",
        "file": str(a_file),
        "relative": "models",
        "same": str(paths.models_dir),
        "inside": str(paths.models_dir / "sub"),
        "control": str(tmp_path / "a\nb"),
        "no_such_user": "~0/models",  # found by hypothesis: expanduser raised RuntimeError
        "proc": "/proc/self/models",  # issue 29: kernel pseudo-filesystems
        "sys": "/sys/kernel",
        "temp": tempfile.gettempdir(),  # the shared temp folder itself
    }[where]
    with pytest.raises(FolderChoiceError) as caught:
        check_models_folder(text, paths)
    assert str(caught.value)
    assert a_file.read_text() == "x"


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=st.text(max_size=300))
def test_any_typed_folder_is_accepted_or_refused_and_nothing_is_created(
    tmp_path: Path, text: str
) -> None:
    from qwen_mtp_desktop.core.models.data_folders import FolderChoiceError, check_models_folder

    paths = app_paths()
    before = sorted(p.name for p in tmp_path.iterdir())
    try:
        folder = check_models_folder(text, paths)
    except FolderChoiceError as exc:
        assert str(exc)
    else:
        assert folder.is_absolute()
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    memory=_ANY_JSON
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.integers(min_value=-2, max_value=MAX_SETTING_MB + 2)
    | st.floats(allow_nan=False, allow_infinity=False)  # JSON has no NaN or Infinity
)
def test_conversation_memory_is_kept_only_when_valid(
    tmp_path_factory: pytest.TempPathFactory, memory: object
) -> None:
    """Settings › Conversation memory (MB, None = automatic): a whole number 0..1 TB is kept
    and reaches the engine as bytes; anything else is reset to automatic with a notice."""
    path = tmp_path_factory.mktemp("settings") / "settings.json"
    path.write_text(json.dumps({"schema_version": 1, "theme": "dark",
                                "conversation_memory_mb": memory}))  # fmt: skip
    loaded = load_settings(path)
    valid = (
        isinstance(memory, int) and not isinstance(memory, bool) and 0 <= memory <= MAX_SETTING_MB
    )
    assert loaded.settings.theme == "dark"
    assert loaded.settings.conversation_memory_mb == (memory if valid else None)
    if valid or memory is None:
        assert loaded.notice is None
        save_settings(path, loaded.settings)
        assert load_settings(path).settings == loaded.settings
    else:
        assert loaded.notice is not None and "conversation_memory_mb" in loaded.notice
    option = load_option(loaded.settings.conversation_memory_mb)
    assert option == (memory * MB if valid and isinstance(memory, int) else None)


@given(total=st.integers(min_value=0, max_value=2**50) | st.none())
def test_the_automatic_budget_is_an_eighth_of_memory_within_bounds(total: int | None) -> None:
    budget = automatic_bytes(total) if total is not None else automatic_bytes(0)
    assert AUTO_MIN_BYTES <= budget <= AUTO_MAX_BYTES
    if total is not None and AUTO_MIN_BYTES <= total // 8 <= AUTO_MAX_BYTES:
        assert budget == total // 8
        assert "1/8 of this computer's memory" in describe_automatic(total)
    assert describe_automatic(total if total is not None else 0).startswith("Automatic: ")


def test_an_update_that_cannot_be_read_back_undoes_only_itself(tmp_path: Path) -> None:
    """A refused save (SettingsNotSavedError) takes back its own change, never what another
    part of the app holds in memory (the chat's ui_state, kept until the window closes)."""
    store = SettingsStore(tmp_path / "settings.json")
    ui_state = store.settings.ui_state
    ui_state["chat_show_drafts"] = "1"  # the chat's, not saved yet
    with pytest.raises(SettingsNotSavedError):
        store.update(lambda s: setattr(s, "tool_timeout_s", -1.0))
    assert store.settings.tool_timeout_s != -1.0
    assert store.settings.ui_state is ui_state and ui_state["chat_show_drafts"] == "1"
