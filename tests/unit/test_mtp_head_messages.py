"""A missing or damaged MTP head is explained in words that name the file that is wrong and say
what to do (issue 28): what the chat's settings note shows (the engine's load warning) and what
the Models panel shows (the inspector's diagnostic). Generated damage to a copy of the demo
model's MTP head: either file removed, the weights cut at any length, the graph garbled."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.engine.model_files import check_model_dir
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.models.folders.inspection import inspect_model

XML, BIN = "openvino_mtp_model.xml", "openvino_mtp_model.bin"
#: What no message may show a user: internal tensor names, a tool to upgrade that is not
#: the problem.
INTERNALS = re.compile(r"Constant_\d+|constant\(s\)|optimum-intel|'[\w.]+_compressed'")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the demo model; each example puts its MTP head back."""
    copy = tmp_path_factory.mktemp("demo") / "model"
    shutil.copytree(demo_model_dir(), copy)
    return copy


damages = st.one_of(
    st.just(("remove", XML)),
    st.just(("remove", BIN)),
    st.just(("remove both", "")),
    st.tuples(st.just("truncate"), st.floats(0.0, 0.99)),
    st.just(("garble", XML)),
)


def _damage(model: Path, damage: tuple[str, object]) -> str:
    """Apply `damage`; the file a message must name."""
    kind, what = damage
    if kind == "remove":
        (model / str(what)).unlink()
        return str(what)
    if kind == "remove both":
        (model / XML).unlink()
        (model / BIN).unlink()
        return XML
    if kind == "truncate":
        data = (model / BIN).read_bytes()
        (model / BIN).write_bytes(data[: int(len(data) * float(what))])  # type: ignore[arg-type]
        return BIN
    (model / XML).write_text("this is not an IR <<<")
    return XML


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(damage=damages)
def test_the_load_warning_names_the_file_and_the_next_step(
    model: Path, damage: tuple[str, object]
) -> None:
    saved = {name: (model / name).read_bytes() for name in (XML, BIN)}
    try:
        culprit = _damage(model, damage)
        files = check_model_dir(model)
    finally:
        for name, data in saved.items():
            (model / name).write_bytes(data)
    assert not files.has_mtp
    (warning,) = files.warnings
    assert culprit in warning, warning
    assert "without speculative decoding" in warning
    assert re.search(r"(Copy|copy|export|Export)[^.]*model", warning), warning
    assert not INTERNALS.search(warning), warning
    if damage[0] == "remove" and damage[1] == BIN:  # the .xml is fine: never blamed
        assert f"{XML} is" not in warning and "missing beside" in warning


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cut=st.floats(0.0, 0.99))
def test_the_models_panel_says_truncated_in_words_with_a_fix(model: Path, cut: float) -> None:
    data = (model / BIN).read_bytes()
    try:
        (model / BIN).write_bytes(data[: int(len(data) * cut)])
        report = inspect_model(model)
    finally:
        (model / BIN).write_bytes(data)
    mtp = [d for d in report.diagnostics if d.message.startswith("MTP head")]
    assert mtp, report.diagnostics
    for diagnostic in mtp:
        assert BIN in diagnostic.message
        assert not INTERNALS.search(diagnostic.message), diagnostic.message
        assert diagnostic.fix, diagnostic
    assert report.usable_for_chat and not report.mtp_usable


def test_an_intact_head_has_no_warning(model: Path) -> None:
    files = check_model_dir(model)
    assert files.has_mtp and files.warnings == ()
