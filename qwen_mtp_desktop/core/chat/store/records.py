"""What the chat store holds: chat settings, conversations, messages, and its errors."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, get_args

from qwen_mtp_desktop.core.chat.snippets import Snippet
from qwen_mtp_desktop.core.chat.store.stats import stats_method
from qwen_mtp_desktop.core.decoding.method import (
    DEFAULT_LOOKUP_DRAFTS,
    DEFAULT_NGRAM,
    MAX_LOOKUP_DRAFTS,
    MAX_MTP_DEPTH,
    MAX_NGRAM,
    MAX_SEED,
    DecodingMethod,
    Sampling,
)
from qwen_mtp_desktop.core.engine import Message, Role
from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.prompt.context_limit import OVERFLOW_POLICIES, OverflowPolicy

log = logging.getLogger(__name__)

MessageStatus = Literal["complete", "streaming", "incomplete", "error"]

SearchBackend = Literal["fts5", "like"]

ROLES: tuple[str, ...] = get_args(Role)

STATUSES: tuple[str, ...] = get_args(MessageStatus)


class ChatStoreError(UserFacingError):
    """The conversation store could not do what was asked; `code` says which case."""

    code = "CHAT_STORE"


class UnknownConversationError(ChatStoreError, LookupError):
    code = "UNKNOWN_CONVERSATION"

    def __init__(self, conversation_id: int) -> None:
        super().__init__(
            f"Conversation {conversation_id} does not exist; it may have been deleted.",
            "Pick another chat from the list.",
        )
        self.conversation_id = conversation_id


class UnknownMessageError(ChatStoreError, LookupError):
    code = "UNKNOWN_MESSAGE"

    def __init__(self, message_id: int) -> None:
        super().__init__(
            f"Message {message_id} does not exist; its chat may have been deleted or truncated."
        )
        self.message_id = message_id


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


#: The largest thinking budget a chat may set (tokens; far above any answer's length).
MAX_THINKING_BUDGET = 1_000_000

#: MCP servers one chat may enable (core.tools.mcp.config names them).
MAX_CHAT_SERVERS = 64

#: What each ChatSettings field accepts; the constructor enforces it, `from_dict` falls back to
#: the default for a field that fails (one bad value in an old row should not lose the others).
_SETTING_CHECKS: dict[str, Callable[[Any], bool]] = {
    "device": lambda v: isinstance(v, str) and bool(v.strip()),
    "mtp": lambda v: isinstance(v, bool),
    "num_assistant_tokens": lambda v: v == "auto" or (_is_int(v) and 1 <= v <= MAX_MTP_DEPTH),
    "thinking": lambda v: isinstance(v, bool),
    "thinking_budget": lambda v: v is None or (_is_int(v) and 1 <= v <= MAX_THINKING_BUDGET),
    "max_new_tokens": lambda v: _is_int(v) and v >= 1,
    "temperature": lambda v: _is_number(v) and 0 <= v <= 100,
    "top_p": lambda v: _is_number(v) and 0 < v <= 1,
    "top_k": lambda v: _is_int(v) and v >= 0,
    "repetition_penalty": lambda v: _is_number(v) and 0 < v <= 100,
    "presence_penalty": lambda v: _is_number(v) and -2 <= v <= 2,
    "model_sampling": lambda v: isinstance(v, bool),
    "seed": lambda v: v is None or (_is_int(v) and 0 <= v <= MAX_SEED),
    "prompt_lookup": lambda v: isinstance(v, bool),
    "lookup_tokens": lambda v: _is_int(v) and 1 <= v <= MAX_LOOKUP_DRAFTS,
    "max_ngram_size": lambda v: _is_int(v) and 1 <= v <= MAX_NGRAM,
    "context_overflow": lambda v: v in OVERFLOW_POLICIES,
    "mcp_servers": lambda v: (
        isinstance(v, list | tuple)
        and len(v) <= MAX_CHAT_SERVERS
        and all(isinstance(name, str) and 0 < len(name) <= 64 for name in v)
    ),
}

_FLOAT_SETTINGS = ("temperature", "top_p", "repetition_penalty", "presence_penalty")
#: The sampling values every chat had before the model's defaults (issue 26): a stored chat
#: without "model_sampling" whose values are these never chose its own, so it follows the model.
_OLD_DEFAULTS = {"top_p": 0.9, "top_k": 20, "repetition_penalty": 1.0}


@dataclass(frozen=True)
class ChatSettings:
    """Per-chat generation settings (what the chat's settings panel edits). The stored keys
    are the chat's own vocabulary (a store edge); `method` is what they mean for decoding."""

    device: str = "CPU"
    mtp: bool = True
    #: Draft tokens per MTP step, or "auto" (the default): Auto (core.auto.policy) starts from the
    #: benchmark's depth and adapts turn by turn, down to plain decoding.
    num_assistant_tokens: int | Literal["auto"] = "auto"
    thinking: bool = False
    #: With thinking on, the most reasoning tokens before the engine ends the thinking and
    #: the model answers (GenerationSettings.thinking_budget); None: no limit.
    thinking_budget: int | None = None
    max_new_tokens: int = 512
    temperature: float = 0.7
    top_p: float = 0.9
    top_k: int = 20
    repetition_penalty: float = 1.0
    #: Subtracted from the logits of tokens already in the answer (Qwen advises it for
    #: quantized models); 0 is off.
    presence_penalty: float = 0.0
    seed: int | None = None
    #: Sample as the model's generation_config.json advises (core.chat.generation_defaults) while
    #: the user has not changed a sampling setting; the values above are then the model's
    #: (filled in by the chat), or the chat's own when the model names none.
    model_sampling: bool = True
    #: Draft by prompt lookup (core.decoding.prompt_lookup) instead of the MTP head; `mtp`
    #: still says whether the model loads with its head (so switching back costs no reload).
    prompt_lookup: bool = False
    #: Prompt lookup's drafts per step and longest n-gram.
    lookup_tokens: int = DEFAULT_LOOKUP_DRAFTS
    max_ngram_size: int = DEFAULT_NGRAM
    #: The MCP servers (their names in the app's settings) whose tools this chat offers.
    mcp_servers: tuple[str, ...] = ()
    #: When the conversation outgrows the model's context: refuse with the count ("stop", the
    #: default: nothing is left out unasked) or leave out earlier turns
    #: (core.prompt.context_limit.overflow_views).
    context_overflow: OverflowPolicy = "stop"

    @property
    def sampling(self) -> Sampling:
        """Temperature 0 is greedy decoding; top-p, top-k and the seed apply when sampling."""
        if self.temperature <= 0:
            return Sampling(
                repetition_penalty=self.repetition_penalty,
                presence_penalty=self.presence_penalty,
            )
        return Sampling(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            repetition_penalty=self.repetition_penalty,
            presence_penalty=self.presence_penalty,
            seed=self.seed,
        )

    def model_defaults(self) -> ChatSettings:
        """These settings with sampling as a new chat starts it when no default preset says
        otherwise: following the model's own defaults (core.chat.generation_defaults), greedy
        where the model names none, no seed. The device and the decoding method stay: they
        are how this computer runs the model, not how an answer is sampled."""
        fresh = ChatSettings(temperature=0.0)
        return replace(
            self,
            model_sampling=True,
            temperature=fresh.temperature,
            top_p=fresh.top_p,
            top_k=fresh.top_k,
            repetition_penalty=fresh.repetition_penalty,
            presence_penalty=fresh.presence_penalty,
            seed=None,
        )

    def following(self, model: Sampling | None) -> ChatSettings:
        """These settings with the model's sampling defaults filled in, while the chat
        follows them (`model_sampling`) and the model names some (`model` not None)."""
        if not self.model_sampling or model is None:
            return self
        return replace(
            self,
            temperature=model.temperature,
            top_p=model.top_p,
            top_k=model.top_k,
            repetition_penalty=model.repetition_penalty,
            presence_penalty=model.presence_penalty,
        )

    @property
    def replay_lookup(self) -> DecodingMethod:
        """Prompt lookup as this chat runs it (drafts per step, n-gram size): what Auto
        weighs and every greedy turn's replay measures."""
        return DecodingMethod.lookup(self.lookup_tokens, self.max_ngram_size)

    @property
    def method(self) -> DecodingMethod | Literal["auto"]:
        """The decoding method these settings ask for, or "auto" (MTP on, draft tokens Auto,
        greedy or sampled): Auto (core.auto.policy) chooses per turn, sampled turns by their own
        measurements (core.auto.sampling_bands)."""
        sampling = self.sampling
        if self.prompt_lookup:
            return self.replay_lookup.with_sampling(sampling)
        if not self.mtp:
            return DecodingMethod.plain(sampling)
        if self.num_assistant_tokens != "auto":
            return DecodingMethod.mtp(self.num_assistant_tokens, sampling)
        return "auto"

    def __post_init__(self) -> None:
        for name, check in _SETTING_CHECKS.items():
            value = getattr(self, name)
            if not check(value):
                raise ValueError(f"chat setting {name!r} has an invalid value: {value!r}")
            if name in _FLOAT_SETTINGS:
                object.__setattr__(self, name, float(value))
        object.__setattr__(self, "mcp_servers", tuple(dict.fromkeys(self.mcp_servers)))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ChatSettings:
        """Settings from a dict; unknown keys are ignored, missing or invalid ones use defaults."""
        values: dict[str, Any] = {}
        for name, check in _SETTING_CHECKS.items():
            if name not in raw:
                continue
            if check(raw[name]):
                values[name] = raw[name]
            else:
                log.warning("ignoring invalid chat setting %s=%r", name, raw[name])
        if "model_sampling" not in values and raw:
            # Stored before the model's defaults: follow them unless the user chose values.
            chosen = any(values.get(k, v) != v for k, v in _OLD_DEFAULTS.items())
            values["model_sampling"] = not chosen and values.get("temperature", 0.0) in (0, 0.7)
        return cls(**values)


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    #: Seconds since the epoch. `updated_at` moves when messages change, not on rename/settings.
    created_at: float
    updated_at: float
    model_dir: str | None
    system_prompt: str
    settings: ChatSettings
    #: Kept at the top of the chat list (Pin / Unpin in its context menu).
    pinned: bool = False


@dataclass(frozen=True)
class SearchMatch:
    """The message a search found in a chat, and the snippet of it the chat list shows."""

    message_id: int
    role: Role
    #: Whether it is in the chat's shown branch (else an earlier version of a message).
    shown: bool
    snippet: Snippet


@dataclass(frozen=True)
class ConversationSummary:
    """One row of the chat list: pinned first, then newest first, with the start of the last
    message."""

    id: int
    title: str
    created_at: float
    updated_at: float
    model_dir: str | None
    message_count: int
    preview: str
    preview_role: Role | None
    pinned: bool = False
    #: In a search's results, the message that matched (None when the title did).
    match: SearchMatch | None = None


@dataclass(frozen=True)
class StoredMessage:
    id: int
    conversation_id: int
    #: Order within the conversation (gaps are possible after deletions).
    position: int
    role: Role
    content: str
    reasoning: str
    image_path: Path | None
    created_at: float
    status: MessageStatus
    error: str | None
    #: GenerationStats.to_json_dict() plus "model" and "finished_at"; None for user messages.
    stats: dict[str, Any] | None
    #: The message this one follows (None for the first); see core.chat.store.versions.
    parent_id: int | None = None
    #: Whether this is the version chosen among its siblings.
    selected: bool = True
    #: Which version this is (1-based, oldest first) and how many its message has.
    version: int = 1
    version_count: int = 1

    def to_engine_message(self) -> Message:
        return Message(self.role, self.content, self.image_path)


@dataclass(frozen=True)
class DeletedConversation:
    """Everything `delete` removed; `restore` puts it back with the same ids (undo)."""

    conversation: Conversation
    messages: tuple[StoredMessage, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class DeletedMessage:
    """What `delete_message` changed; `restore_messages` puts the chat back exactly."""

    message_id: int
    #: The conversation as it was (its time is restored too).
    conversation: Conversation
    #: Every message of the chat, in every version, before the delete.
    messages: tuple[StoredMessage, ...]
    #: The ids left after the delete: restoring is refused once the chat changed again.
    remaining_ids: frozenset[int]


def stats_summary(stats: Mapping[str, Any]) -> str:
    """An answer's stats on one line: model, device, mode, tokens, TTFT, tok/s, acceptance."""
    parts: list[str] = []
    if isinstance(stats.get("model"), str) and stats["model"]:
        parts.append(str(stats["model"]))
    if isinstance(stats.get("device"), str):
        parts.append(str(stats["device"]))
    auto = stats.get("auto")
    if isinstance(auto, dict) and isinstance(auto.get("summary"), str):
        parts.append(f"Auto: {auto['summary']}")
    method = stats_method(stats)
    if method is not None:
        parts.append(method.label)
    if _is_int(stats.get("generated_tokens")):
        parts.append(f"{stats['generated_tokens']} tokens")
    reused, prompt = stats.get("reused_tokens"), stats.get("prompt_tokens")
    if isinstance(reused, int) and isinstance(prompt, int) and 0 < reused <= prompt:
        parts.append(f"{reused:,} of {prompt:,} prompt tokens reused")
    if _is_number(stats.get("ttft_s")):
        parts.append(f"TTFT {stats['ttft_s']:.2f} s")
    if _is_number(stats.get("decode_tokens_per_s")):
        parts.append(f"{stats['decode_tokens_per_s']:.1f} tok/s")
    if method is not None and not method.is_plain and _is_number(stats.get("acceptance_rate")):
        parts.append(f"acceptance {stats['acceptance_rate']:.0%}")
    if _is_number(stats.get("total_s")):
        parts.append(f"{stats['total_s']:.1f} s")
    return " · ".join(parts)
