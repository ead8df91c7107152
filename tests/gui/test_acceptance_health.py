"""Acceptance health in the chat, on the real runtime: a copy of the demo model is validated,
chatted with (quiet), then its MTP head is replaced by random weights; the chat warns, names
the changed model files as a likely cause, and its Re-validate button runs a validation whose
new reference quiets the check."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.files.paths import demo_model_dir
from qwen_mtp_desktop.core.measure.acceptance_health import load_lookup_references, load_reference
from qwen_mtp_desktop.devtools.mtp_head import make_broken_mtp_copy
from qwen_mtp_desktop.ui.bench.panel import _PATH_ROLE
from tests.gui.test_chat_panel import LONG_WAIT, _open_window, _send
from tests.gui.test_chat_prompt_lookup import _choose
from tests.integration.test_validate import small_set

pytestmark = [pytest.mark.gui, pytest.mark.model]

MTP_FILES = ("openvino_mtp_model.xml", "openvino_mtp_model.bin")


def _load(qtbot: QtBot, chat: object, model: Path) -> None:
    chat.use_model(model)  # type: ignore[attr-defined]
    qtbot.waitUntil(
        lambda: (
            chat._loaded is not None  # type: ignore[attr-defined]
            and chat._loaded.model_dir == model  # type: ignore[attr-defined]
            and not chat._loading
        ),  # type: ignore[attr-defined]
        timeout=LONG_WAIT,
    )


def test_health_check_fires_after_the_head_is_randomised(
    qtbot: QtBot, tmp_path: Path, screenshot_dir: Path
) -> None:
    from qwen_mtp_desktop import cli

    model = tmp_path / "my model"
    shutil.copytree(demo_model_dir(), model)
    prompts = small_set(tmp_path, 32)
    assert cli.main(["validate", str(model), "--prompts", str(prompts), "--no-timing"]) == 0
    reference = load_reference(model, "CPU")
    assert reference is not None and reference.first_draft > 0.6

    window = _open_window(qtbot)
    chat = window.chat
    # MTP at a fixed depth: on the demo model Auto soon decodes plain (faster there), and the
    # check can only judge the MTP turns that run.
    _choose(chat.settings_panel, "mtp")
    assert chat.settings_panel.settings.num_assistant_tokens == 1
    _load(qtbot, chat, model)
    qtbot.waitUntil(lambda: chat._health is not None, timeout=LONG_WAIT)
    for text in ("Count from 1 to 20.", "Count from 35 to 52.", "Count from 60 to 79."):
        _send(qtbot, chat, text)
    assert chat.health_warning is None and not chat.health_wrap.isVisible()  # quiet

    # Replace the head while the chat runs another model (its files are mapped when loaded).
    _load(qtbot, chat, demo_model_dir())
    broken = make_broken_mtp_copy(demo_model_dir(), tmp_path / "random head")
    for name in MTP_FILES:
        shutil.copyfile(broken / name, model / name)
    _load(qtbot, chat, model)
    qtbot.waitUntil(lambda: chat._health is not None, timeout=LONG_WAIT)
    for text in ("Count from 1 to 20.", "Count from 2 to 21.", "Count from 40 to 59."):
        _send(qtbot, chat, text)
        if chat.health_warning is not None:
            break
    warning = chat.health_warning
    assert warning is not None and warning.live < 0.2
    assert chat.health_wrap.isVisible() and chat.health_text.text() == warning.text
    assert "model files changed since the validate" in warning.text
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        qtbot.wait(200)
        assert window.grab().save(str(screenshot_dir / f"chat_acceptance_health_{width}.png"))

    # One click re-validates; the new (low) reference is what the chat compares with next.
    bench = window.bench
    bench.tokens_spin.setValue(24)  # a short validation (the Benchmark panel's setting)
    # The panel loads a model's prompt sets in the background; a click before they are there
    # only says "still loading" (a race of the panel's own, reported), so let them load.
    bench.set_model(model)
    qtbot.waitUntil(lambda: bench.set_combo.currentData(_PATH_ROLE) is not None, timeout=30_000)
    with qtbot.waitSignal(bench.run_finished, timeout=3 * LONG_WAIT) as finished:
        with qtbot.waitSignal(chat.validate_requested, timeout=10_000) as asked:
            chat.revalidate_button.click()
        assert asked.args == [model] and not chat.health_wrap.isVisible()
    report = finished.args[0]
    assert report["kind"] == "validate" and report["summary"]["all_identical"], report["summary"]
    reference = load_reference(model, "CPU")
    assert reference is not None and reference.first_draft < 0.2
    window.show_panel("Chat")
    qtbot.waitUntil(lambda: chat._health is not None, timeout=LONG_WAIT)
    assert chat._health.reference.first_draft < 0.2
    _send(qtbot, chat, "Count from 1 to 20.")
    assert chat.health_warning is None and not chat.health_wrap.isVisible()
    window.close()


def test_lookup_health_compares_like_with_like_and_revalidates_lookup(
    qtbot: QtBot, tmp_path: Path, screenshot_dir: Path
) -> None:
    """Prompt lookup's reference is per workload: validated on copying prompts filed as the
    "list" workload (79 % / 50 % accepted on the demo model), then a chat request that reads as
    chat is not compared at all, and counting requests, which read as "list" but copy little
    (7-14 %), are: the check warns, names the workload and that it compares like with like,
    and its Re-validate runs prompt lookup's validation on the built-in list set."""
    from qwen_mtp_desktop import cli

    model = tmp_path / "my model"
    shutil.copytree(demo_model_dir(), model)
    copying = tmp_path / "copying.json"
    copying.write_text(
        json.dumps(
            {
                "name": "list",
                "max_new_tokens": 32,
                "prompts": [
                    {"id": "fox", "user": "Repeat 'the quick brown fox jumps over the lazy dog'"
                     " three times."},
                    {"id": "apples", "user": "Say 'we like apples' four times."},
                ],
            }
        )
    )  # fmt: skip
    args = ["validate", str(model), "--prompts", str(copying), "--prompt-lookup", "--no-timing"]
    assert cli.main(args) == 0
    reference = load_lookup_references(model, "CPU")["list"]
    assert reference.first_draft > 0.4 and load_reference(model, "CPU") is None

    window = _open_window(qtbot)
    chat = window.chat
    _choose(chat.settings_panel, "lookup")
    _load(qtbot, chat, model)
    qtbot.waitUntil(lambda: chat._health is not None, timeout=LONG_WAIT)
    _send(qtbot, chat, "Say 'good morning' four times.")  # reads as chat: no chat reference
    assert chat.health_warning is None and not chat.health_wrap.isVisible()
    for text in ("Count from 1 to 20.", "Count from 35 to 52.", "Count from 60 to 79."):
        _send(qtbot, chat, text)
        if chat.health_warning is not None:
            break
    warning = chat.health_warning
    assert warning is not None and warning.workload == "list"
    assert warning.method.kind == "lookup"
    assert warning.live < 0.2 and chat.health_wrap.isVisible()
    assert "Compared like with like only" in chat.health_text.text()
    assert "list prompts" in chat.revalidate_button.toolTip()
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        qtbot.wait(200)
        assert window.grab().save(str(screenshot_dir / f"chat_lookup_health_{width}.png"))

    bench = window.bench
    bench.tokens_spin.setValue(24)
    bench.set_model(model)
    qtbot.waitUntil(lambda: bench.set_combo.currentData(_PATH_ROLE) is not None, timeout=30_000)
    with qtbot.waitSignal(bench.run_finished, timeout=3 * LONG_WAIT) as finished:
        with qtbot.waitSignal(chat.validate_lookup_requested, timeout=10_000) as asked:
            chat.revalidate_button.click()
        # The chat's own prompt lookup (K=4, n-gram 3) is what is validated.
        assert asked.args == [model, "list", DecodingMethod.lookup(4, 3)]
        assert not chat.health_wrap.isVisible()
    report = finished.args[0]
    assert report["kind"] == "validate"
    assert report["settings"]["method"] == DecodingMethod.lookup(4, 3).to_record()
    assert report["prompt_set"]["name"] == "list" and report["summary"]["all_identical"]
    assert bench.banner_title.text() == "Validation passed: Prompt lookup output is identical"
    stored = load_lookup_references(model, "CPU")["list"]
    assert stored.report_id == report["id"] and stored.source == "validate"
    for width, height in ((1024, 700), (1600, 1000)):
        window.resize(width, height)
        qtbot.wait(200)
        assert window.grab().save(str(screenshot_dir / f"bench_lookup_validation_{width}.png"))
    window.close()
