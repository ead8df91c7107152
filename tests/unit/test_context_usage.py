"""The context meter's numbers (issue 44, minor 3): the message being typed is estimated from
its characters, and a turn refused for not fitting gives the engine's own count."""

from __future__ import annotations

import pytest

from qwen_mtp_desktop.core.chat.context_usage import (
    TOKENS_PER_MESSAGE,
    ContextUsage,
    conversation_usage,
    estimate_chars,
)
from qwen_mtp_desktop.core.chat.store.records import StoredMessage
from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.prompt.context_limit import check_fits, overflow_tokens


def _message(role: str, content: str = "", error: str | None = None) -> StoredMessage:
    return StoredMessage(
        1,
        1,
        0,
        role,
        content,
        "",
        None,
        0.0,
        "error" if error else "complete",
        error,
        None,  # type: ignore[arg-type]
    )


def test_the_typed_message_is_an_estimate_added_to_the_conversation() -> None:
    usage = ContextUsage(1_000, 4_096, estimated=False)
    typed = usage.with_typed(7_000)
    assert typed.typed == estimate_chars(7_000) + TOKENS_PER_MESSAGE
    assert typed.total == 1_000 + typed.typed and typed.text().startswith("about ")
    assert "message being typed" in typed.explanation()
    assert typed.with_typed(0) == usage and usage.text() == "1,000 / 4,096 tokens"


def test_a_refused_turn_counts_what_the_engine_counted() -> None:
    with pytest.raises(UserFacingError) as caught:
        check_fits(129_964, 32_768)
    assert overflow_tokens(caught.value.message) == 129_964
    assert overflow_tokens("Something else went wrong.") is None
    messages = [
        _message("user", "word " * 50_000),
        _message("assistant", error=caught.value.message),
    ]
    usage = conversation_usage(messages, "", 32_768)
    assert usage.tokens == 129_964 and not usage.estimated and usage.full
