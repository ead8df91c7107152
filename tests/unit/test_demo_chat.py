"""The demo model's single-turn history and the example prompts offered in an empty chat."""

from __future__ import annotations

import json

from qwen_mtp_desktop.core.chat.turns import (
    DEMO_EXAMPLES,
    GENERAL_EXAMPLES,
    example_prompts,
    single_turn,
)
from qwen_mtp_desktop.core.engine import Message
from qwen_mtp_desktop.core.files.paths import resources_dir


def test_single_turn_keeps_the_system_prompt_and_the_latest_question() -> None:
    history = [
        Message("system", "Be brief."),
        Message("user", "Count from 1 to 5."),
        Message("assistant", "1 2 3 4 5"),
        Message("user", "Count from 6 to 9."),
    ]
    assert single_turn(history) == [history[0], history[3]]
    assert single_turn(history[1:]) == [history[3]]
    assert single_turn([]) == []


def test_demo_examples_are_what_the_demo_model_was_trained_on() -> None:
    demo_set = json.loads((resources_dir() / "prompts" / "demo.json").read_text("utf-8"))
    trained = {prompt["user"] for prompt in demo_set["prompts"]}
    assert set(DEMO_EXAMPLES) <= trained
    assert example_prompts(True) == DEMO_EXAMPLES
    assert example_prompts(False) == GENERAL_EXAMPLES
    assert not set(GENERAL_EXAMPLES) & set(DEMO_EXAMPLES)
