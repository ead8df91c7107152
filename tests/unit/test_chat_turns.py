"""core.chat.turns: one chat's decoding as the chat panel, `generate` and a server share it."""

from __future__ import annotations

from pathlib import Path

import pytest

from qwen_mtp_desktop.core.chat.store.records import ChatSettings, StoredMessage
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.chat.turns import (
    DEFAULT_PLAIN_LOAD_S,
    AutoDecoding,
    Turn,
    auto_applies,
    chat_history,
    generation_settings,
    plain_switch_cost,
    policy_for,
    restart_after,
    start_conversation,
    start_turn,
)
from qwen_mtp_desktop.core.decoding.method import PLAIN, DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.stats import build_stats
from qwen_mtp_desktop.core.engine import GenerationSettings, Message
from qwen_mtp_desktop.core.measure.recommendations import save_recommendation
from tests.unit.test_bench import fake_bench, rows


def stored(position: int, role: str, content: str) -> StoredMessage:
    return StoredMessage(
        position,
        1,
        position,
        role,
        content,
        "",
        None,
        0.0,
        "complete",
        None,
        None,  # type: ignore[arg-type]
    )


def benchmarked_model(tmp_path: Path, depth: int, speed: float) -> Path:
    """A model folder with a stored benchmark verdict: `depth` at `speed` vs plain 100 tok/s."""
    model = tmp_path / "model"
    model.mkdir()
    for name in ("openvino_language_model", "openvino_mtp_model"):
        (model / f"{name}.xml").write_text("<net/>")
        (model / f"{name}.bin").write_bytes(b"\0" * 16)
    base = [100.0]
    save_recommendation(
        fake_bench(model, rows(None, base, base=base) + rows(depth, [speed], base=base), [depth])
    )
    return model


def test_generation_settings_map_a_chats_settings() -> None:
    mtp = DecodingMethod.mtp
    auto = ChatSettings(temperature=0.0, num_assistant_tokens="auto", repetition_penalty=1.1)
    greedy = generation_settings(auto, mtp(3))
    assert greedy.method == mtp(3, Sampling(repetition_penalty=1.1))
    assert greedy.replay_lookup == DecodingMethod.lookup(4, 3)
    unbenchmarked = generation_settings(ChatSettings(temperature=0.0), None)
    assert unbenchmarked.method == mtp(1)
    sampled_auto = generation_settings(ChatSettings(temperature=0.7, seed=2), mtp(2))
    assert sampled_auto.method == mtp(2, Sampling(temperature=0.7, top_p=0.9, top_k=20, seed=2))
    fixed = generation_settings(
        ChatSettings(temperature=0.4, num_assistant_tokens=2, seed=5), mtp(4)
    )
    assert fixed.method == mtp(2, Sampling(temperature=0.4, top_p=0.9, top_k=20, seed=5))
    plain = generation_settings(ChatSettings(temperature=0.4, mtp=False, seed=5))
    assert plain.method == DecodingMethod.plain(fixed.method.sampling)
    lookup = ChatSettings(temperature=0.0, prompt_lookup=True, lookup_tokens=6, max_ngram_size=2)
    assert generation_settings(lookup).method == DecodingMethod.lookup(6, 2)
    assert generation_settings(lookup).replay_lookup == DecodingMethod.lookup(6, 2)


@pytest.mark.parametrize(
    ("settings", "method"),
    [
        (ChatSettings(temperature=0.0), "auto"),
        (ChatSettings(temperature=0.0, num_assistant_tokens=3), DecodingMethod.mtp(3)),
        (ChatSettings(temperature=0.0, mtp=False), PLAIN),
        (ChatSettings(temperature=0.0, mtp=False, prompt_lookup=True), DecodingMethod.lookup()),
        (ChatSettings(temperature=0.0, prompt_lookup=True, lookup_tokens=2, max_ngram_size=1),
         DecodingMethod.lookup(2, 1)),
        # Sampled with Auto draft tokens: Auto decides, by sampled turns' measurements.
        (ChatSettings(temperature=0.7, seed=1), "auto"),
        (ChatSettings(temperature=0.7, num_assistant_tokens=1, seed=1),
         DecodingMethod.mtp(1, Sampling(temperature=0.7, top_p=0.9, top_k=20, seed=1))),
    ],
)  # fmt: skip
def test_a_chats_settings_name_one_method_or_auto(
    settings: ChatSettings, method: DecodingMethod | str
) -> None:
    assert settings.method == method


def test_history_starts_with_the_system_prompt_and_skips_empty_answers() -> None:
    messages = [stored(1, "user", "hi"), stored(2, "assistant", ""), stored(3, "user", "again")]
    assert chat_history("be brief", messages) == [
        Message("system", "be brief"),
        Message("user", "hi", None),
        Message("user", "again", None),
    ]
    assert chat_history("", messages[:1]) == [Message("user", "hi", None)]


def test_one_switch_cost_for_every_caller() -> None:
    assert plain_switch_cost(plain_ready=True, load_s=7.0) == 0.0
    assert plain_switch_cost(plain_ready=False, load_s=7.0) == 7.0
    assert plain_switch_cost(plain_ready=False, load_s=None) == DEFAULT_PLAIN_LOAD_S


def test_auto_applies_to_auto_depth_with_mtp_greedy_or_sampled() -> None:
    assert auto_applies(ChatSettings(temperature=0.0))
    assert auto_applies(ChatSettings(temperature=0.7))  # sampled turns: their own measurements
    assert not auto_applies(ChatSettings(temperature=0.0, num_assistant_tokens=2))
    assert not auto_applies(ChatSettings(temperature=0.0, mtp=False))


def test_auto_starts_from_the_stored_verdict_and_learns(tmp_path: Path) -> None:
    model = benchmarked_model(tmp_path, depth=2, speed=150.0)
    auto = AutoDecoding()
    assert not auto.known(model, "CPU")
    assert auto.status(None, model, "CPU").startswith("Auto · starts at MTP n=1 (not benchmarked")
    found = AutoDecoding.lookup(model, "CPU")
    assert found is not None and found.acceptance_rate is not None
    auto.remember(model, "CPU", found)
    assert auto.known(model, "CPU") and auto.start(model, "CPU") == DecodingMethod.mtp(2)
    assert auto.status(None, model, "CPU") == (
        f"Auto · starts at MTP n=2 (benchmark: {found.acceptance_rate:.0%} accepted, 1.50x)"
    )

    key = (1, model, "CPU")
    turn = auto.plan_turn(key, GenerationSettings(max_new_tokens=32), plain_ready=False, load_s=2.0)
    assert turn.decision is not None and turn.decision.method == DecodingMethod.mtp(2)
    assert turn.settings.method == DecodingMethod.mtp(2)
    assert turn.settings.within_turn is not None
    assert turn.settings.within_turn.plain_load_s == 2.0
    assert auto.existing_policy(key) is turn.policy

    stats = build_stats(
        method=DecodingMethod.mtp(2), device="CPU", prompt_tokens=10,
        chunk_sizes=[1, 3, 3, 1], chunk_times=[0.1, 0.2, 0.3, 0.4], total_s=0.4,
        reasoning_tokens=0, answer_tokens=8, finish_reason="stop", max_new_tokens=32,
    )  # fmt: skip
    record = turn.finish(stats, model, [(0, 4)])
    assert turn.policy is not None and turn.policy.turns == 1
    assert record["decoding"] == "auto"
    assert record["auto"]["method"] == DecodingMethod.mtp(2).to_record()
    assert record["method"] == DecodingMethod.mtp(2).to_record()
    assert record["model_dir"] == str(model) and record["drafted_ranges"] == [[0, 4]]
    assert "chunk_sizes" not in record and "chunk_times" not in record
    assert auto.status(key, model, "CPU").startswith("Auto · ")

    auto.forget(model)
    assert not auto.known(model, "CPU") and auto.existing_policy(key) is None


def test_a_fixed_turn_records_fixed_decoding() -> None:
    stats = build_stats(
        method=PLAIN, device="CPU", prompt_tokens=4,
        chunk_sizes=[1, 1], chunk_times=[0.1, 0.2], total_s=0.2, reasoning_tokens=0,
        answer_tokens=2, finish_reason="stop",
    )  # fmt: skip
    record = Turn(GenerationSettings()).finish(stats, None)
    assert record["decoding"] == "fixed" and "auto" not in record and record["model"] == ""


@pytest.mark.parametrize(
    ("depth", "speed", "start"), [(2, 150.0, DecodingMethod.mtp(2)), (1, 50.0, PLAIN)]
)
def test_policy_for_a_verdict(
    tmp_path: Path, depth: int, speed: float, start: DecodingMethod
) -> None:
    found = AutoDecoding.lookup(benchmarked_model(tmp_path, depth, speed), "CPU")
    assert found is not None
    assert policy_for(found).current == start
    assert policy_for(None).current == DecodingMethod.mtp(1)


def test_each_user_action_is_one_store_call(tmp_path: Path) -> None:
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        settings = ChatSettings(temperature=0.0)
        conversation, user, answer = start_conversation(
            store, "  Count\n to three ", model_dir="/m", system_prompt="brief", settings=settings
        )
        assert (conversation.title, conversation.model_dir, conversation.system_prompt) == (
            "Count to three",
            "/m",
            "brief",
        )
        assert conversation.settings == settings
        assert (user.role, user.content, answer.role, answer.status) == (
            "user",
            "  Count\n to three ",
            "assistant",
            "streaming",
        )
        store.finish_message(answer.id, None, "complete", answer_delta="1 2 3")

        second_user, second_answer = start_turn(store, conversation.id, "again")
        assert [m.id for m in store.messages(conversation.id)] == [
            user.id,
            answer.id,
            second_user.id,
            second_answer.id,
        ]

        # Edit the first message and answer again: what followed it is gone.
        fresh = restart_after(store, user.id, "Count to four")
        messages = store.messages(conversation.id)
        assert [m.id for m in messages] == [user.id, fresh.id]
        assert messages[0].content == "Count to four" and fresh.status == "streaming"

        # Regenerate without an edit keeps the text.
        again = restart_after(store, user.id)
        assert [m.id for m in store.messages(conversation.id)] == [user.id, again.id]
        assert store.get_message(user.id).content == "Count to four"
