"""Conversation state kept between turns (issue 24), through the real engine and chat template:
random conversations with continue, regenerate, edit, delete, switching chats and back, new
chats that open with the same system prompt (issue 41), and a budget small enough to evict;
every answer equals the answer after a cold prefill (an engine that keeps nothing), token for
token, with exact numerics; and the turns that should reuse their conversation's state do."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding import continuation, state_cache
from qwen_mtp_desktop.core.decoding import decoder as decoder_module
from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message

pytestmark = pytest.mark.model

QUESTIONS = [
    "Count from 1 to 12.",
    "Repeat 'tea time' three times.",
    "List the numbers from 30 to 41.",
    'Say "we like apples" two times.',
    "Count from 7 to 15.",
]
#: The system prompt every chat here opens with (a new chat may resume after it).
SYSTEM = Message("system", "You answer briefly. " * 12)
METHODS = [
    DecodingMethod.plain(),
    DecodingMethod.mtp(1),
    DecodingMethod.mtp(3),
    DecodingMethod.lookup(3, 2),
    DecodingMethod.mtp(2, Sampling(temperature=1.0, top_k=8, seed=5)),
]


#: Calls that ran on a continuation graph (core.decoding.continuation), in any engine here.
TWIN_CALLS: list[int] = []


@pytest.fixture(scope="module")
def engines(demo_model: Path) -> Iterator[dict[str, Engine]]:
    """One engine that keeps states (default budget), one with a tiny budget that must evict,
    one that sends every continuing call of 2 tokens or more to the continuation graphs (the
    demo's conversations are far shorter than the 512 kept tokens they otherwise wait for),
    and one that keeps nothing (the cold reference)."""
    made = {}
    with pytest.MonkeyPatch.context() as patch:
        run = continuation.ContinuationGraph.run

        def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            TWIN_CALLS.append(1)
            return run(self, *args, **kwargs)

        patch.setattr(continuation.ContinuationGraph, "run", counted)
        for name, budget in (("keeps", None), ("tight", 400_000), ("twin", None), ("cold", 0)):
            engine = Engine()
            with pytest.MonkeyPatch.context() as thresholds:
                if name == "twin":  # read when its graphs are made, at load
                    thresholds.setattr(continuation, "MIN_NEW_TOKENS", 2)
                    thresholds.setattr(continuation, "MIN_KEPT_TOKENS", 1)
                engine.load(demo_model, LoadOptions(exact_numerics=True, state_cache_bytes=budget))
            made[name] = engine
        yield made
    for engine in made.values():
        engine.unload()


@dataclass
class Chat:
    messages: list[Message] = field(default_factory=lambda: [SYSTEM])


def answer(engine: Engine, messages: list[Message], method: DecodingMethod, thinking: bool):  # type: ignore[no-untyped-def]
    turn = engine.generate(
        messages, GenerationSettings(max_new_tokens=20, method=method, thinking=thinking)
    )
    stats = turn.run_to_end()
    return list(turn.token_ids), turn.answer, stats


ACTIONS = st.sampled_from(
    ["continue", "continue", "regenerate", "edit", "delete", "switch", "new chat"]
)


@given(
    steps=st.lists(
        st.tuples(ACTIONS, st.integers(0, 99), st.sampled_from(range(len(METHODS)))),
        min_size=4,
        max_size=9,
    ),
    thinking=st.booleans(),
)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_answers_with_kept_state_equal_cold_answers(
    engines: dict[str, Engine], steps: list[tuple[str, int, int]], thinking: bool
) -> None:
    # Keep every dropped tail of 8 tokens or more as an old branch (1,024 otherwise, far
    # beyond the demo's answers), so regenerates and edits put their old versions aside; and
    # keep states at message starts 16 tokens apart (256 otherwise), so prefills stop there.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(decoder_module, "MIN_TAIL_WORTH_SAVING", 8)
        patch.setattr(state_cache, "MIN_TOKENS_BETWEEN_RESUME_POINTS", 16)
        converse(engines, steps, thinking)


def converse(engines: dict[str, Engine], steps: list[tuple[str, int, int]], thinking: bool) -> None:
    """Play `steps` on chats that share a system prompt, every engine answering every turn;
    compare with "cold"."""
    chats = [Chat(), Chat()]
    current = 0
    for action, pick, method_index in steps:
        chat = chats[current]
        method = METHODS[method_index]
        if action == "switch":
            current = (current + 1 + pick) % len(chats)
            chat = chats[current]
            action = "continue"
        elif action == "new chat":
            chats.append(Chat())
            current = len(chats) - 1
            chat = chats[current]
            action = "continue"
        users = [i for i, m in enumerate(chat.messages) if m.role == "user"]
        if action in ("regenerate", "edit", "delete") and not users:
            action = "continue"
        if action == "regenerate":
            chat.messages = chat.messages[: users[-1] + 1]
        elif action == "edit":
            index = users[pick % len(users)]
            chat.messages = [*chat.messages[:index], Message("user", QUESTIONS[pick % 5])]
        elif action == "delete":
            chat.messages = chat.messages[: users[-1]]
            action = "continue"
        if action == "continue":
            chat.messages.append(Message("user", QUESTIONS[pick % len(QUESTIONS)]))
        results = {
            name: answer(engine, chat.messages, method, thinking)
            for name, engine in engines.items()
        }
        cold_ids = results["cold"][0]
        for name in ("keeps", "tight", "twin"):
            assert results[name][0] == cold_ids, (name, action, method, chat.messages)
        assert results["cold"][2].reused_tokens == 0
        chat.messages.append(Message("assistant", results["cold"][1]))
    report = engines["tight"].state_cache_report()
    assert report is not None and report.bytes <= 400_000


@pytest.mark.parametrize("name", ["keeps", "twin"])
def test_a_follow_up_reuses_the_conversation(engines: dict[str, Engine], name: str) -> None:
    """The next question, regenerate and switching back each reuse the kept state: all but
    the tokens the template re-renders (the last answer, whose thinking block it drops)."""
    engine = engines[name]
    twin_calls = len(TWIN_CALLS)
    method = DecodingMethod.mtp(2)
    chat = [Message("user", QUESTIONS[0])]
    _, text, first = answer(engine, chat, method, False)
    chat += [Message("assistant", text), Message("user", QUESTIONS[1])]
    _, text, second = answer(engine, chat, method, False)
    # Everything up to the first answer's header was kept: at least the first prompt minus
    # its generation prompt (the thinking block, a few tokens).
    assert second.reused_tokens >= first.prompt_tokens - 8, (second.reused_tokens, first)
    _, _, again = answer(engine, chat, method, False)  # regenerate
    assert again.reused_tokens == again.prompt_tokens
    other = [Message("user", QUESTIONS[2])]
    answer(engine, other, method, False)  # another chat
    _, _, back = answer(engine, chat, method, False)  # and back
    assert back.reused_tokens == back.prompt_tokens
    assert back.ttft_s < max(first.ttft_s, 0.05) * 3
    # The twin engine's follow-ups ran on its continuation graphs; the other's never did.
    assert (len(TWIN_CALLS) > twin_calls) == (name == "twin")


def test_a_new_chat_resumes_after_the_system_prompt_it_shares(engines: dict[str, Engine]) -> None:
    """A new chat that opens with the system prompt of an earlier one prefills only its own
    question: the state was kept where the system prompt ends (issue 41, item 3)."""
    engine = engines["keeps"]
    system = Message("system", "Answer briefly, count carefully and check twice. " * 24)
    method = DecodingMethod.mtp(2)
    _, _, first = answer(engine, [system, Message("user", QUESTIONS[3])], method, False)
    assert first.prompt_tokens > 300  # past the threshold for keeping a state there
    for question in (QUESTIONS[4], QUESTIONS[0]):
        _, _, new_chat = answer(engine, [system, Message("user", question)], method, False)
        assert new_chat.prompt_tokens - new_chat.reused_tokens < 40, new_chat
    _, _, other = answer(engine, [Message("user", QUESTIONS[4])], method, False)
    assert other.reused_tokens < 8  # no system prompt: nothing of it is shared
