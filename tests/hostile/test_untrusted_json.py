"""Class 5: untrusted JSON and special files in every reader.

Hypothesis writes hostile content (deep nesting, huge or absurd numbers, NaN/Infinity, wrong
element types, invalid UTF-8, random JSON) or a special file (FIFO, device, symlink to a
device, folder, dangling link) where config.json, tokenizer.json, the export manifest, the
settings file and stored message stats are read. Every reader must return or raise its
UserFacingError with a message: no other exception, no hang, no multi-GB allocation (the
case runs under a 2 GB address-space limit and a time limit).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.isolation import run_isolated
from tests.reliability import figures

EXAMPLES = 400

_json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
_json_value = st.recursive(
    _json_leaf,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
_FIELDS = [
    "model_type",
    "max_position_embeddings",
    "vocab_size",
    "text_config",
    "architectures",
    "model",
    "added_tokens",
    "decoder",
    "files",
    "source",
    "options",
    "versions",
    "device",
    "default_model",
    "model_folders",
    "ui_state",
    "debug_logging",
    "schema_version",
    "acceptance_rate",
    "drafted_ranges",
    "auto",
    "generated_tokens",
    "mode",
]


@st.composite
def hostile_text(draw: st.DrawFn) -> bytes:
    kind = draw(
        st.sampled_from(["deep", "number", "constant", "object", "utf8", "huge_string", "value"])
    )
    if kind == "deep":
        depth = draw(st.integers(min_value=60, max_value=200_000))
        opener = draw(st.sampled_from(["[", '{"a":']))
        closer = "]" if opener == "[" else "}"
        return (opener * depth + "1" + closer * depth).encode()
    if kind == "number":
        digits = draw(st.integers(min_value=20, max_value=200_000))
        number = draw(st.sampled_from(["1" * digits, "-" + "9" * digits, f"1e{digits}"]))
        key = draw(st.sampled_from(_FIELDS))
        return json.dumps({key: 0}).replace("0", number).encode()
    if kind == "constant":
        key = draw(st.sampled_from(_FIELDS))
        return f'{{"{key}": {draw(st.sampled_from(["NaN", "Infinity", "-Infinity"]))}}}'.encode()
    if kind == "utf8":
        return b'{"model_type": "\xff\xfe"}'
    if kind == "huge_string":
        return json.dumps({draw(st.sampled_from(_FIELDS)): "x" * 2_000_000}).encode()
    if kind == "object":
        fields = draw(st.dictionaries(st.sampled_from(_FIELDS), _json_value, max_size=8))
        return json.dumps(fields).encode()
    return json.dumps(draw(_json_value)).encode()


SPECIALS = ["fifo", "dev_zero", "dev_null", "folder", "dangling", "loop"]


def _place(path: Path, content: bytes | str) -> None:
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content == "fifo":
        os.mkfifo(path)
    elif content == "dev_zero":
        path.symlink_to("/dev/zero")
    elif content == "dev_null":
        path.symlink_to("/dev/null")
    elif content == "folder":
        path.mkdir()
    elif content == "dangling":
        path.symlink_to(path.parent / "nowhere")
    elif content == "loop":
        path.symlink_to(path)


def _clear(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    elif path.is_symlink() or path.exists():
        path.unlink()


def readers_case(examples: int, demo: str) -> dict[str, Any]:
    """Runs in the child. Each example puts one hostile file in one reader's place."""
    from qwen_mtp_desktop.core.chat.store.stats import clean_stats
    from qwen_mtp_desktop.core.chat.store.store import ChatStore
    from qwen_mtp_desktop.core.decoding.text import MAX_VOCAB_SIZE, ByteLevelVocab
    from qwen_mtp_desktop.core.engine import EngineError, check_model_dir
    from qwen_mtp_desktop.core.models.folders.inspection import inspect_model
    from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME, read_manifest
    from qwen_mtp_desktop.core.settings.store import Settings, load_settings
    from qwen_mtp_desktop.ui.chat.transcript.message import format_stats

    tried: dict[str, int] = {}
    work = Path(tempfile.mkdtemp(prefix="hostile-json-"))
    model = work / "model"
    shutil.copytree(demo, model, ignore=shutil.ignore_patterns("*.bin"))
    originals = {n: (model / n).read_bytes() for n in ("config.json", "tokenizer.json")}

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        reader=st.sampled_from(["config", "tokenizer", "manifest", "settings", "stats"]),
        content=st.one_of(hostile_text(), st.sampled_from(SPECIALS)),
    )
    def case(reader: str, content: bytes | str) -> None:
        tried[reader] = tried.get(reader, 0) + 1
        for name, data in originals.items():
            _clear(model / name)
            (model / name).write_bytes(data)
        manifest = model / MANIFEST_NAME
        _clear(manifest)
        if reader == "config":
            _clear(model / "config.json")
            _place(model / "config.json", content)
            try:
                check_model_dir(model)
            except EngineError as exc:
                assert exc.message and exc.code
            inspect_model(model)  # must not raise
        elif reader == "tokenizer":
            _clear(model / "tokenizer.json")
            _place(model / "tokenizer.json", content)
            vocab = ByteLevelVocab.from_tokenizer_json(model / "tokenizer.json")
            assert vocab is None or len(vocab) <= MAX_VOCAB_SIZE
        elif reader == "manifest":
            _place(manifest, content)
            try:
                read_manifest(model)
            except ValueError as exc:
                assert str(exc)
            report = inspect_model(model)
            assert report is not None
        elif reader == "settings":
            folder = Path(tempfile.mkdtemp(dir=work))
            path = folder / "settings.json"
            _place(path, content)
            loaded = load_settings(path)
            assert isinstance(loaded.settings, Settings)
            if not isinstance(content, bytes) and content != "dangling":  # dangling = absent
                assert loaded.notice is not None  # a special file is never read silently
            shutil.rmtree(folder, ignore_errors=True)
        else:
            if not isinstance(content, bytes):
                return
            folder = Path(tempfile.mkdtemp(dir=work))
            store = ChatStore(folder / "chats.sqlite3")
            conversation = store.create_conversation("t")
            message = store.add_message(conversation.id, "assistant", "hi")
            # A damaged row, as a broken disk or another program leaves it.
            with contextlib.closing(sqlite3.connect(folder / "chats.sqlite3")) as conn:
                conn.execute(
                    "UPDATE messages SET stats_json = ? WHERE id = ?",
                    (content.decode("utf-8", "replace"), message.id),
                )
                conn.commit()
            (stored,) = store.messages(conversation.id)
            if stored.stats is not None:
                assert clean_stats(stored.stats) == stored.stats
                format_stats(stored.stats)  # the stats line must render
            store.close()
            shutil.rmtree(folder, ignore_errors=True)

    case()
    shutil.rmtree(work, ignore_errors=True)
    return {"tried": tried}


class TestUntrustedJson:
    @pytest.mark.subprocess
    def test_every_reader_survives_hostile_files(self, demo_model: Path, decoy: Path) -> None:
        from tests.hostile.conftest import snapshot, touched

        before = snapshot(decoy)
        result = run_isolated(
            "tests.hostile.test_untrusted_json:readers_case",
            timeout_s=900,
            memory_mb=2048,
            limit="as",
            examples=EXAMPLES,
            demo=str(demo_model),
        )
        tried = sum(result["tried"].values())
        files_touched = touched(before, snapshot(decoy))
        assert files_touched == 0, "a hostile file made a reader change the user's files"
        assert tried >= EXAMPLES * 0.9
        assert set(result["tried"]) == {"config", "tokenizer", "manifest", "settings", "stats"}
        figures.record(
            "hostile",
            json_inputs=tried,
            json_per_reader=result["tried"],
            json_crashes=0,
            json_hangs=0,
            json_files_touched=files_touched,
        )

    def test_settings_value_falls_back_alone(self, tmp_path: Path) -> None:
        from qwen_mtp_desktop.core.settings.store import load_settings

        path = tmp_path / "settings.json"
        path.write_text(json.dumps({"device": 3, "model_folders": ["/a", "/b"]}))
        loaded = load_settings(path)
        assert loaded.settings.device == "CPU"  # the default
        assert loaded.settings.model_folders == ["/a", "/b"]  # the good value is kept
        assert loaded.notice is not None and "device" in loaded.notice

    def test_special_file_error_says_what_and_how_to_fix(self, tmp_path: Path) -> None:
        from qwen_mtp_desktop.core.files.safe_files import FileKind, UnsafeFileError, read_json_file

        fifo = tmp_path / "config.json"
        os.mkfifo(fifo)
        try:
            read_json_file(fifo, kind=FileKind("config.json", "Copy the file again."))
        except UnsafeFileError as exc:
            assert "named pipe" in exc.message and exc.fix == "Copy the file again."
        else:
            raise AssertionError("a FIFO was read")
