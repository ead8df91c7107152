"""A chat's turns, Qt-free: shared by the chat panel, the `generate` command and a server.

- `generation_settings()`: a chat's settings (`ChatSettings`) as the engine's settings.
- `chat_history()`: what the model reads for the next answer.
- `AutoDecoding`: the benchmark's verdict per (model folder, device), read once, and Auto's
  policy per (conversation, model folder, device), which learns turn by turn. `plan_turn()`
  turns the policy's decision into this turn's settings; `Turn.finish()` teaches the policy
  what the turn measured and returns the stats record a message keeps.
- `plain_switch_cost()`: what falling back to plain decoding mid-answer costs, in one place.
- `start_conversation()`, `start_turn()`, `restart_after()`/`answer_again()`: the store work of
  one user action (send, edit, regenerate) as one call, so a front end makes one trip to its
  store thread. Regenerate and edit keep earlier versions (core.chat.store.versions).

Reading a verdict reads the data dir, so `AutoDecoding.lookup()` is the one blocking call: the
GUI runs it on its store thread and hands the result to `remember()`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.auto.policy import (
    UNBENCHMARKED_START,
    AdaptivePolicy,
    Decision,
    TurnContext,
    TurnSample,
)
from qwen_mtp_desktop.core.auto.turns import auto_summary, policy_from_recommendation, turn_settings
from qwen_mtp_desktop.core.chat.decoding_words import auto_sentence
from qwen_mtp_desktop.core.chat.markdown import plain_text
from qwen_mtp_desktop.core.chat.store.records import ChatSettings, Conversation, StoredMessage
from qwen_mtp_desktop.core.chat.store.store import ChatStore
from qwen_mtp_desktop.core.chat.tools import round_messages, trace_from_record
from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import GenerationStats
from qwen_mtp_desktop.core.engine import GenerationSettings, Message
from qwen_mtp_desktop.core.measure.recommendations import DepthRecommendation, depth_recommendation
from qwen_mtp_desktop.core.models.library import display_name

#: The plain pipeline's load time assumed before any model has loaded (seconds).
DEFAULT_PLAIN_LOAD_S = 1.0

#: (model folder, device): whose benchmark verdict.
ModelKey = tuple[Path, str]
#: (conversation id, model folder, device): whose Auto policy (0: a chat not yet stored).
PolicyKey = tuple[int, Path, str]


def generation_settings(
    settings: ChatSettings, auto_start: DecodingMethod | None = None
) -> GenerationSettings:
    """The engine's settings for a chat's settings (`ChatSettings.method`). Under Auto the
    method is `auto_start`, where the benchmark's recommendation starts Auto (MTP n=1 when
    there is none); `plan_auto_turn` then chooses each turn's."""
    method = settings.method
    if method == "auto":
        method = (auto_start or UNBENCHMARKED_START).with_sampling(settings.sampling)
    return GenerationSettings(
        max_new_tokens=settings.max_new_tokens,
        method=method,
        thinking=settings.thinking,
        thinking_budget=settings.thinking_budget,
        replay_lookup=settings.replay_lookup,
        context_overflow=settings.context_overflow,
    )


#: What an empty chat offers to send with one click: for the demo model the things it was
#: trained to do (resources/prompts/demo.json), for a real model everyday tasks.
DEMO_EXAMPLES = (
    "Count from 1 to 20.",
    "List the numbers from 5 to 16.",
    "Repeat 'the quick brown fox jumps over the lazy dog' three times.",
    'Say "we like apples" four times.',
)
GENERAL_EXAMPLES = (
    "Explain in a few sentences why the sky is blue.",
    "Write a polite email to a colleague asking to move our Tuesday meeting to Thursday.",
    "Write a Python function that checks whether a number is prime.",
    "Give me five short tips for a job interview.",
)

#: Said wherever the demo model's chat is shown: why earlier turns do not reach it.
DEMO_SINGLE_TURN_NOTE = (
    "The demo model answers each message on its own: it was trained on single requests and "
    "goes wrong when it reads earlier turns, so they are not sent to it."
)


def example_prompts(demo: bool) -> tuple[str, ...]:
    return DEMO_EXAMPLES if demo else GENERAL_EXAMPLES


def single_turn(history: Sequence[Message]) -> list[Message]:
    """The system prompt and the latest user message only: what the demo model reads, because
    its training never saw a multi-turn chat (from the third turn its answers go wrong). Tool
    calls and results after that message stay: they are this turn's (an API client's tools)."""
    system = [m for m in history if m.role == "system"]
    last = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == "user"), None)
    if last is None:
        return system
    return system + [m for m in history[last:] if m.role != "system"]


def chat_history(system_prompt: str, messages: Iterable[StoredMessage]) -> list[Message]:
    """The system prompt, then every stored message except empty answers (a failed or stopped
    turn that produced nothing); an answer that called tools brings its calls and their
    results first (core.chat.tools), as the model read them."""
    history: list[Message] = []
    if system_prompt:
        history.append(Message("system", system_prompt))
    for message in messages:
        if message.role == "assistant" and message.stats and "tool_calls" in message.stats:
            history.extend(round_messages(trace_from_record(message.stats["tool_calls"])))
        if message.role == "assistant" and not message.content:
            continue
        history.append(message.to_engine_message())
    return history


def start_turn(
    store: ChatStore, conversation_id: int, text: str, image: Path | None = None
) -> tuple[StoredMessage, StoredMessage]:
    """The user's message, stored, and the empty answer the model will stream into."""
    user = store.add_message(conversation_id, "user", text, image_path=image)
    return user, store.begin_assistant_message(conversation_id)


def start_conversation(
    store: ChatStore,
    text: str,
    image: Path | None = None,
    *,
    model_dir: str | None,
    system_prompt: str,
    settings: ChatSettings,
) -> tuple[Conversation, StoredMessage, StoredMessage]:
    """A new conversation titled after its first message's words (Markdown marks removed),
    with that message and the answer to stream into (the first send of a new chat)."""
    title = " ".join(plain_text(text).split())[:60] or " ".join(text.split())[:60]
    conversation = store.create_conversation(
        title, model_dir=model_dir, system_prompt=system_prompt, settings=settings
    )
    user, answer = start_turn(store, conversation.id, text, image)
    return store.get_conversation(conversation.id), user, answer


def restart_after(store: ChatStore, message_id: int, new_text: str | None = None) -> StoredMessage:
    """Regenerate (or, with `new_text`, edit and regenerate) from a user message: what followed
    it becomes an earlier version (ChatStore.begin_version); returns the new answer."""
    return store.begin_version(message_id, new_text)


def answer_again(
    store: ChatStore, message_id: int, new_text: str | None = None
) -> tuple[list[StoredMessage], StoredMessage]:
    """`restart_after`, and the shown branch up to the new answer: what a front end redraws
    and what the model reads, in one trip to the store thread."""
    answer = restart_after(store, message_id, new_text)
    branch = store.messages(answer.conversation_id)
    return [m for m in branch if m.id != answer.id], answer


def plain_switch_cost(*, plain_ready: bool, load_s: float | None) -> float:
    """Seconds that switching to plain decoding mid-answer would cost now: nothing when the
    plain pipeline is loaded, else about what loading the model took (`load_s`)."""
    if plain_ready:
        return 0.0
    return load_s if load_s is not None else DEFAULT_PLAIN_LOAD_S


def auto_applies(settings: ChatSettings) -> bool:
    """Auto chooses the method for "auto" draft tokens with MTP on, greedy or sampled (not
    when the chat asks for prompt lookup): `ChatSettings.method` says "auto"."""
    return settings.method == "auto"


def policy_for(found: DepthRecommendation | None) -> AdaptivePolicy:
    """A fresh Auto policy starting from a benchmark verdict (None: never benchmarked, n=1)."""
    if found is None:
        return policy_from_recommendation(None)
    return policy_from_recommendation(
        found.start, speedup=found.speedup, acceptance=found.acceptance_rate
    )


def verdict_text(recommendation: DepthRecommendation) -> str:
    """The benchmark's reason in a few words, e.g. "78 % accepted, 1.30x" or "MTP 0.93x"."""
    speedup = recommendation.speedup
    accepted = recommendation.acceptance_rate
    parts = []
    if accepted is not None:
        parts.append(f"{accepted:.0%} accepted")
    if speedup is not None:
        parts.append(
            f"MTP would be {speedup:.2f}x" if recommendation.start.is_plain else f"{speedup:.2f}x"
        )
    return ", ".join(parts) or recommendation.label


@dataclass
class Turn:
    """One answer's decoding: its settings and, under Auto, the policy and its decision."""

    settings: GenerationSettings
    policy: AdaptivePolicy | None = None
    decision: Decision | None = None
    context: TurnContext | None = None

    def finish(
        self,
        stats: GenerationStats,
        model_dir: Path | None,
        drafted_ranges: Sequence[tuple[int, int]] = (),
    ) -> dict[str, Any]:
        """Teach Auto what this turn measured; returns the stats record the message keeps."""
        record = stats.to_json_dict()
        record.pop("chunk_sizes", None)
        record.pop("chunk_times", None)
        record["model"] = display_name(model_dir) if model_dir is not None else ""
        record["model_dir"] = str(model_dir) if model_dir is not None else ""
        record["drafted_ranges"] = [list(pair) for pair in drafted_ranges]
        if self.policy is not None and self.decision is not None:
            sample = TurnSample.from_stats(stats, self.settings.max_new_tokens, self.context)
            self.policy.observe(sample)
            record["decoding"] = "auto"
            record["auto"] = auto_summary(self.decision, stats)
            record["auto"]["sentence"] = auto_sentence(self.decision, stats)  # as shown
        else:
            record["decoding"] = "fixed"
        return record


@dataclass
class AutoDecoding:
    """Auto's memory for one app (or command) run; see the module docstring."""

    _verdicts: dict[ModelKey, DepthRecommendation | None] = field(default_factory=dict)
    _policies: dict[PolicyKey, AdaptivePolicy] = field(default_factory=dict)
    #: Decoding paths that have run per model and device (core.auto.turn_costs: their pipelines
    #: are loaded, so Auto charges no load for them).
    _ran: dict[ModelKey, set[str]] = field(default_factory=dict)

    @staticmethod
    def lookup(model_dir: Path, device: str) -> DepthRecommendation | None:
        """The stored benchmark verdict (blocking: reads the data dir)."""
        return depth_recommendation(model_dir, device)

    def known(self, model_dir: Path, device: str) -> bool:
        return (model_dir, device) in self._verdicts

    def remember(
        self, model_dir: Path, device: str, recommendation: DepthRecommendation | None
    ) -> None:
        self._verdicts[(model_dir, device)] = recommendation

    def recommendation(self, model_dir: Path, device: str) -> DepthRecommendation | None:
        """The verdict `remember()` was given (None when unknown or never benchmarked)."""
        return self._verdicts.get((model_dir, device))

    def start(self, model_dir: Path, device: str) -> DecodingMethod | None:
        """Where Auto starts on this model and device (None: never benchmarked)."""
        found = self.recommendation(model_dir, device)
        return found.start if found is not None else None

    def forget(self, model_dir: Path) -> None:
        """A new benchmark result for `model_dir`: its verdicts and policies start over."""
        for key in [key for key in self._verdicts if key[0] == model_dir]:
            del self._verdicts[key]
        for policy_key in [key for key in self._policies if key[1] == model_dir]:
            del self._policies[policy_key]

    def pipelines_ran(self, model_dir: Path, device: str) -> set[str]:
        """The decoding paths that have run on this model and device (shared, mutable)."""
        return self._ran.setdefault((model_dir, device), set())

    def existing_policy(self, key: PolicyKey) -> AdaptivePolicy | None:
        return self._policies.get(key)

    def policy(self, key: PolicyKey) -> AdaptivePolicy:
        """This conversation's policy on this model and device, made on first use."""
        policy = self._policies.get(key)
        if policy is None:
            policy = policy_for(self.recommendation(key[1], key[2]))
            policy.share_loaded(self.pipelines_ran(key[1], key[2]))
            self._policies[key] = policy
        return policy

    def plan_turn(
        self,
        key: PolicyKey,
        settings: GenerationSettings,
        *,
        plain_ready: bool,
        load_s: float | None,
        history: Sequence[Message] = (),
    ) -> Turn:
        """The policy's decision for the next answer, as settings with its within-turn check.
        `history` is what the model will read: its length and images price the prefill."""
        policy = self.policy(key)
        return plan_auto_turn(
            policy, settings, plain_ready=plain_ready, load_s=load_s, history=history
        )

    def status(self, key: PolicyKey | None, model_dir: Path, device: str) -> str:
        """What Auto did last in this conversation, or where it will start and why."""
        policy = self._policies.get(key) if key is not None else None
        if policy is not None and policy.last_decision is not None:
            return f"Auto · {policy.last_decision.summary()}"
        recommendation = self.recommendation(model_dir, device)
        if recommendation is None:
            return "Auto · starts at MTP n=1 (not benchmarked on this device yet)"
        start = recommendation.start.short_label
        return f"Auto · starts at {start} (benchmark: {verdict_text(recommendation)})"

    def sentence(self, key: PolicyKey | None, model_dir: Path, device: str) -> str:
        """`status()` in one plain sentence, e.g. "Plain decoding: MTP was slower on this
        model in the last turns" (core.chat.decoding_words); `status()` keeps the details."""
        policy = self._policies.get(key) if key is not None else None
        if policy is not None and policy.last_decision is not None:
            return auto_sentence(policy.last_decision)
        recommendation = self.recommendation(model_dir, device)
        if recommendation is None:
            return "Starts with MTP n=1 and measures whether it pays on this model"
        start = recommendation.start
        if start.is_plain:
            return "Starts with plain decoding: the benchmark found MTP slower on this model"
        return f"Starts with {start.label}: the benchmark found it fastest on this model"


def plan_auto_turn(
    policy: AdaptivePolicy,
    settings: GenerationSettings,
    *,
    plain_ready: bool,
    load_s: float | None,
    history: Sequence[Message] = (),
) -> Turn:
    """Auto's turn: prompt lookup with the chat's own K and n-gram size, and the options
    compared with this history's prefill (its characters and images) and pipeline loads; a
    sampled turn decided by sampled turns' measurements (core.auto.sampling_bands)."""
    policy.use_lookup_settings(settings.replay_lookup)
    cost = plain_switch_cost(plain_ready=plain_ready, load_s=load_s)
    context = TurnContext(
        prompt_chars=sum(len(m.content) for m in history),
        images=sum(1 for m in history if m.image is not None),
        model_load_s=load_s,
        plain_load_s=cost,
        sampling=settings.method.sampling,
    )
    decision = policy.decide(context)
    settings = turn_settings(decision, settings, policy, plain_load_s=cost)
    return Turn(settings, policy, decision, context)


__all__ = [
    "AutoDecoding",
    "ModelKey",
    "PolicyKey",
    "Turn",
    "answer_again",
    "auto_applies",
    "chat_history",
    "generation_settings",
    "plain_switch_cost",
    "plan_auto_turn",
    "policy_for",
    "restart_after",
    "start_conversation",
    "start_turn",
    "verdict_text",
]
