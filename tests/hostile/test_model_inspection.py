"""Classes 10 and 11 (issue 29): `models inspect` on hostile model folders.

Class 10: `--verify` reads every file the export record lists. Hypothesis puts, in place of
listed files, FIFOs (in the folder, or through a link), links to /dev/zero, /dev/urandom and
/dev/null, a Unix socket, folders, dangling and looping links, truncated and lengthened files.
Each must be named by its own diagnostic (NOT_REGULAR, CHECKSUM_FILE_MISSING,
CHECKSUM_MISMATCH) in bounded time: the case runs in a child process with a time limit, so a
blocked open or an endless read fails the test instead of hanging it.

Class 11: config.json with shapes no model has (layer counts up to 10^39, heads, dims,
intervals) gives a CONFIG_INVALID warning at once instead of a loop; and for every way the
chat template can be present (the tokenizer IR's rt_info: absent, a string, empty, blank, a
`default` map, an empty element; tokenizer_config.json, processor_config.json and
chat_template.json with a string, a list, other types, invalid JSON; chat_template.jinja:
text, empty, blank, not UTF-8, a folder, a dangling link), `models inspect` says the model has
a template exactly when openvino-genai's tokenizer loads with a non-blank one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import REPO_ROOT
from tests.hostile.conftest import snapshot, touched
from tests.hostile.isolation import run_isolated
from tests.reliability import figures

pytestmark = pytest.mark.subprocess

VERIFY_EXAMPLES = 60
SHAPE_EXAMPLES = 80
TEMPLATE_EXAMPLES = 80

#: What takes a listed file's place -> the diagnostic code that must name it.
_REPLACEMENTS = {
    "fifo": "NOT_REGULAR",
    "fifo_link": "NOT_REGULAR",
    "dev_zero": "NOT_REGULAR",
    "dev_urandom": "NOT_REGULAR",
    "dev_null": "NOT_REGULAR",
    "socket": "NOT_REGULAR",
    "folder": "NOT_REGULAR",
    "dangling": "CHECKSUM_FILE_MISSING",
    "loop": "UNREADABLE",
    "truncated": "CHECKSUM_MISMATCH",
    "longer": "CHECKSUM_MISMATCH",
}
_SMALL_LISTED = [
    "config.json",
    "generation_config.json",
    "openvino_tokenizer.xml",
    "openvino_mtp_model.bin",
    "openvino_vision_embeddings_model.bin",
    "openvino_detokenizer.bin",
    "tokenizer.json",
]


def _replace(path: Path, how: str, scratch: Path, keep: list[socket.socket]) -> None:
    original = path.read_bytes() if path.is_file() else b""
    path.unlink()
    if how == "fifo":
        os.mkfifo(path)
    elif how == "fifo_link":
        fifo = scratch / f"pipe-{path.name}"
        os.mkfifo(fifo)
        path.symlink_to(fifo)
    elif how.startswith("dev_"):
        path.symlink_to("/dev/" + how.removeprefix("dev_"))
    elif how == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        keep.append(server)
    elif how == "folder":
        path.mkdir()
    elif how == "dangling":
        path.symlink_to(scratch / "gone")
    elif how == "loop":
        path.symlink_to(path.name)
    elif how == "truncated":
        path.write_bytes(original[: len(original) // 2])
    else:
        path.write_bytes(original + b"\0" * 4096)


def verify_case(examples: int, demo: str) -> dict[str, Any]:
    """Runs in the child: each example damages listed files of a fresh copy and verifies."""
    from qwen_mtp_desktop.core.models.folders.checksums import verify_checksums
    from qwen_mtp_desktop.core.models.folders.inspection import inspect_model

    work = Path(tempfile.mkdtemp(prefix="hostile-verify-"))
    counts: dict[str, int] = {}
    slowest = 0.0

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        changes=st.dictionaries(
            st.sampled_from(_SMALL_LISTED), st.sampled_from(sorted(_REPLACEMENTS)), min_size=1
        )
    )
    def case(changes: dict[str, str]) -> None:
        nonlocal slowest
        model = work / "model"
        scratch = work / "scratch"
        for folder in (model, scratch):
            shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(demo, model)
        scratch.mkdir()
        sockets: list[socket.socket] = []
        try:
            for name, how in changes.items():
                _replace(model / name, how, scratch, sockets)
                counts[how] = counts.get(how, 0) + 1
            started = time.perf_counter()
            inspect_model(model)  # must not block either
            findings = verify_checksums(model)
            slowest = max(slowest, time.perf_counter() - started)
        finally:
            for server in sockets:
                server.close()
        for name, how in changes.items():
            expected = _REPLACEMENTS[how]
            named = [f for f in findings if name in f.message]
            assert any(f.code == expected for f in named), (name, how, findings)
        assert not any(f.code == "CHECKSUMS_OK" for f in findings), findings

    case()
    shutil.rmtree(work, ignore_errors=True)
    return {"counts": counts, "slowest_s": slowest}


# --- class 11: absurd shapes ------------------------------------------------------------------

_SHAPE_FIELDS = [
    "num_hidden_layers",
    "full_attention_interval",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "hidden_size",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_conv_kernel_dim",
    "mtp_num_hidden_layers",
    "num_experts",
    "vocab_size",
]


def shapes_case(examples: int, demo: str) -> dict[str, Any]:
    """Runs in the child: config.json with absurd (but JSON-legal) shape numbers."""
    from qwen_mtp_desktop.core.models.folders.inspection import inspect_model

    work = Path(tempfile.mkdtemp(prefix="hostile-shapes-"))
    model = work / "model"
    shutil.copytree(demo, model, ignore=shutil.ignore_patterns("*.bin"))
    original = json.loads((model / "config.json").read_text())
    counts = {"tried": 0, "flagged": 0}
    slowest = 0.0

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        values=st.dictionaries(
            st.sampled_from(_SHAPE_FIELDS),
            st.integers(min_value=1, max_value=10**39) | st.sampled_from([10**6, 10**18, 2**63]),
            min_size=1,
            max_size=4,
        ),
        in_text_config=st.booleans(),
        drop_layer_types=st.booleans(),
    )
    def case(values: dict[str, int], in_text_config: bool, drop_layer_types: bool) -> None:
        nonlocal slowest
        counts["tried"] += 1
        config = json.loads(json.dumps(original))
        target = config["text_config"] if in_text_config else config
        target.update(values)
        if drop_layer_types:
            config["text_config"].pop("layer_types", None)
        (model / "config.json").write_text(json.dumps(config))
        started = time.perf_counter()
        report = inspect_model(model)
        slowest = max(slowest, time.perf_counter() - started)
        absurd = any(v > 100_000 for k, v in values.items() if k != "vocab_size")
        if in_text_config and absurd and values.get("num_hidden_layers", 0) > 100_000:
            counts["flagged"] += 1
            assert "CONFIG_INVALID" in report.codes(), report.codes()
            assert report.geometry is None or report.geometry.source != "config.json"
        json.dumps(report.to_json_dict())  # the report itself stays printable

    case()
    shutil.rmtree(work, ignore_errors=True)
    return {**counts, "slowest_s": slowest}


# --- class 11: where the template is found ----------------------------------------------------

_RT = ["absent", "string", "empty", "blank", "default_map", "empty_element"]
_JSON = ["absent", "string", "blank", "list_default", "number", "null", "invalid", "nan"]
_SIDE = ["absent", "text", "empty", "blank", "not_utf8", "folder", "dangling"]


def _set_rt(xml: Path, how: str) -> None:
    text = re.sub(r'<chat_template value="[^"]*"\s*/>', "", xml.read_text(encoding="utf-8"))
    element = {
        "absent": "",
        "string": '<chat_template value="RT {{ messages[0].content }}" />',
        "empty": '<chat_template value="" />',
        "blank": '<chat_template value=" &#10; " />',
        "default_map": '<chat_template><default value="D {{ messages[0].content }}" />'
        "</chat_template>",
        "empty_element": "<chat_template />",
    }[how]
    xml.write_text(text.replace("<rt_info>", "<rt_info>" + element, 1), encoding="utf-8")


def _set_json(path: Path, how: str, base: dict[str, Any]) -> None:
    value: Any = {
        "string": f"J {path.stem} {{{{ messages[0].content }}}}",
        "blank": "  ",
        "list_default": [{"name": "default", "template": "L {{ messages[0].content }}"}],
        "number": 5,
        "null": None,
    }.get(how)
    if how == "absent":
        if path.name != "tokenizer_config.json":
            path.unlink(missing_ok=True)
        return
    if how == "invalid":
        path.write_text('{"chat_template": ', encoding="utf-8")
    elif how == "nan":
        path.write_text('{"chat_template": "x", "n": NaN}', encoding="utf-8")
    else:
        path.write_text(json.dumps({**base, "chat_template": value}), encoding="utf-8")


def _set_side(path: Path, how: str) -> None:
    if how == "text":
        path.write_text("S {{ messages[0].content }}", encoding="utf-8")
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "blank":
        path.write_text(" \n\t", encoding="utf-8")
    elif how == "not_utf8":
        path.write_bytes(b"\xff\xfe{{ x }}")
    elif how == "folder":
        path.mkdir()
    elif how == "dangling":
        path.symlink_to(path.parent / "missing.jinja")


def templates_case(examples: int, demo: str) -> dict[str, Any]:
    """Runs in the child: inspect against the runtime's own tokenizer for each layout."""
    import openvino_genai

    from qwen_mtp_desktop.core.models.folders.inspection import inspect_model

    work = Path(tempfile.mkdtemp(prefix="hostile-templates-"))
    pristine = work / "pristine"
    keep = ("openvino_tokenizer", "openvino_detokenizer", "openvino_language_model.xml")
    shutil.copytree(
        demo,
        pristine,
        ignore=lambda _d, names: [n for n in names if n.endswith(".bin") and n.startswith(
            ("openvino_language", "openvino_mtp", "openvino_vision", "openvino_text")
        )],
    )  # fmt: skip
    assert all((pristine / f"{k}.xml").exists() or (pristine / k).exists() for k in keep)
    base = json.loads((pristine / "tokenizer_config.json").read_text(encoding="utf-8"))
    counts = {"tried": 0, "runtime_has": 0, "load_fails": 0}

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        rt=st.sampled_from(_RT),
        tokenizer_config=st.sampled_from(_JSON),
        processor_config=st.sampled_from(_JSON),
        chat_template_json=st.sampled_from(_JSON),
        side=st.sampled_from(_SIDE),
    )
    def case(
        rt: str, tokenizer_config: str, processor_config: str, chat_template_json: str, side: str
    ) -> None:
        counts["tried"] += 1
        model = work / "model"
        shutil.rmtree(model, ignore_errors=True)
        shutil.copytree(pristine, model, symlinks=True)
        (model / "chat_template.jinja").unlink()
        _set_rt(model / "openvino_tokenizer.xml", rt)
        _set_json(model / "tokenizer_config.json", tokenizer_config, base)
        _set_json(model / "processor_config.json", processor_config, {})
        _set_json(model / "chat_template.json", chat_template_json, {})
        _set_side(model / "chat_template.jinja", side)
        try:
            runtime = bool(str(openvino_genai.Tokenizer(str(model)).chat_template).strip())
        except Exception:  # the tokenizer does not load, or its template is not UTF-8
            runtime = False
            counts["load_fails"] += 1
        counts["runtime_has"] += runtime
        report = inspect_model(model)
        layout = (rt, tokenizer_config, processor_config, chat_template_json, side)
        assert report.chat_template == runtime, (layout, runtime, report.codes())
        if not runtime:
            assert {"CHAT_TEMPLATE", "NO_CHAT_TEMPLATE"} & set(report.codes()), layout

    case()
    shutil.rmtree(work, ignore_errors=True)
    return counts


class TestVerifySpecialFiles:
    def test_listed_special_files_are_named_never_read(self, demo_model: Path, decoy: Path) -> None:
        before = snapshot(decoy)
        result = run_isolated(
            "tests.hostile.test_model_inspection:verify_case",
            timeout_s=600,
            memory_mb=2048,
            examples=VERIFY_EXAMPLES,
            demo=str(demo_model),
        )
        files_touched = touched(before, snapshot(decoy))
        assert set(result["counts"]) == set(_REPLACEMENTS), result
        assert result["slowest_s"] < 30, result
        assert files_touched == 0
        figures.record(
            "hostile",
            verify_inputs=VERIFY_EXAMPLES,
            verify_replacements=result["counts"],
            verify_slowest_s=round(result["slowest_s"], 2),
            verify_files_touched=files_touched,
        )

    @pytest.mark.parametrize("how", ["fifo", "dev_zero"])
    def test_cli_verify_names_a_fifo_or_device_and_exits(
        self, demo_copy: Path, tmp_path: Path, how: str
    ) -> None:
        _replace(demo_copy / "openvino_language_model.bin", how, tmp_path, [])
        done = subprocess.run(
            [sys.executable, "-m", "qwen_mtp_desktop", "models", "inspect", str(demo_copy),
             "--verify", "--json"],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )  # fmt: skip
        assert done.returncode == 1, done.stderr  # an error diagnostic: the chat model
        assert "Traceback" not in done.stderr
        report = json.loads(done.stdout)
        found = [d for d in report["diagnostics"] if d["code"] == "NOT_REGULAR"]
        assert found and "openvino_language_model.bin" in found[0]["message"], report
        assert ("named pipe" if how == "fifo" else "a device") in found[0]["message"]


class TestInspectHostileConfig:
    def test_absurd_shapes_are_flagged_quickly(self, demo_model: Path) -> None:
        result = run_isolated(
            "tests.hostile.test_model_inspection:shapes_case",
            timeout_s=600,
            memory_mb=2048,
            limit="as",
            examples=SHAPE_EXAMPLES,
            demo=str(demo_model),
        )
        assert result["tried"] >= SHAPE_EXAMPLES * 0.9
        assert result["flagged"] > 0, result
        assert result["slowest_s"] < 10, result
        figures.record(
            "hostile",
            shape_inputs=result["tried"],
            shape_flagged=result["flagged"],
            shape_slowest_s=round(result["slowest_s"], 2),
        )

    def test_template_presence_agrees_with_the_runtime(self, demo_model: Path) -> None:
        result = run_isolated(
            "tests.hostile.test_model_inspection:templates_case",
            timeout_s=900,
            memory_mb=4096,
            examples=TEMPLATE_EXAMPLES,
            demo=str(demo_model),
        )
        assert result["tried"] >= TEMPLATE_EXAMPLES * 0.9
        # Both answers occur, and loads that fail too: the layouts are not all alike.
        assert 0 < result["runtime_has"] < result["tried"], result
        assert result["load_fails"] > 0, result
        figures.record(
            "hostile",
            template_layout_inputs=result["tried"],
            template_layouts_with_template=result["runtime_has"],
        )
