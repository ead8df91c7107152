"""A decoding method as one value: who drafts (nobody, the MTP head, or prompt lookup), how many
drafts per step, and how each token is chosen (greedy or sampled). Every front end (chat,
`generate`, `serve`, validate, bench, Auto) builds a `DecodingMethod` and every layer below
carries it unchanged to the decoder, so a new method or setting is added here, in the decoder
that runs it, in its measurement and in its UI, not in thirty modules.

One word for each thing: "plain" is decoding one token per step with no drafts (older records
and reports say "baseline"; `from_record` reads them), "MTP n=k" drafts k tokens per step with
the model's MTP head, "prompt lookup K=k, n-gram n" copies up to k tokens that followed the
last n tokens earlier in the conversation. Greedy decoding is sampling at temperature 0.

No OpenVINO here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

MethodKind = Literal["plain", "mtp", "lookup"]
METHOD_KINDS: tuple[MethodKind, ...] = ("plain", "mtp", "lookup")

#: Drafts per step the MTP head may propose (the verify call grows with depth). The CLI and the
#: API have accepted up to 32 since they exist; the Benchmark tries up to 8.
MAX_MTP_DEPTH = 32
#: Prompt lookup's defaults for the chat and `generate`, and the bounds settings accept.
DEFAULT_LOOKUP_DRAFTS = 4
DEFAULT_NGRAM = 3
MAX_LOOKUP_DRAFTS = 16
MAX_NGRAM = 8
#: Seeds are stored and shown; keep them to what every consumer (JSON, SQLite, numpy) holds.
MAX_SEED = 2**63 - 1


class MethodError(ValueError):
    """A decoding method or sampling setting that cannot run; the message says which value
    and what is allowed (front ends show it as it is)."""


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen from the model's distribution. Temperature 0 is greedy
    (the most likely token); otherwise the distribution is processed in this order, as
    Hugging Face's and openvino-genai's samplers do: penalties, temperature, top-k, top-p,
    min-p, then a token is drawn with a generator seeded by `seed`.

    `seed` None means "a fresh random seed per answer": the decoder draws one and reports it
    with the answer's stats, so any answer can be reproduced."""

    temperature: float = 0.0
    top_p: float = 1.0
    #: 0 keeps every token.
    top_k: int = 0
    min_p: float = 0.0
    #: > 1 makes tokens already in the prompt or answer less likely (divides positive logits).
    repetition_penalty: float = 1.0
    #: Subtracted from the logit of every token that appeared in the answer so far (OpenAI's).
    presence_penalty: float = 0.0
    #: Subtracted once per earlier occurrence in the answer (OpenAI's).
    frequency_penalty: float = 0.0
    seed: int | None = None
    #: (token id, bias) pairs, ascending ids: added to those tokens' logits after the
    #: penalties (OpenAI's logit_bias; -100 or 100 in effect bans or forces a token).
    logit_bias: tuple[tuple[int, float], ...] = ()

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def penalised(self) -> bool:
        """Whether the logits are changed before temperature: penalties or a logit bias."""
        return (
            self.repetition_penalty != 1.0
            or self.presence_penalty != 0.0
            or self.frequency_penalty != 0.0
            or bool(self.logit_bias)
        )

    def problems(self) -> list[str]:
        """What is wrong with these values, in words a user can act on (empty: fine)."""
        found: list[str] = []
        # (name, value, (low, high), whether low is allowed, whether high is, allowed range)
        checks: list[tuple[str, object, float, float, bool, bool, str]] = [
            ("temperature", self.temperature, 0, 100, True, True, "0 (greedy) to 100"),
            ("top-p", self.top_p, 0, 1, False, True, "above 0 and at most 1"),
            ("min-p", self.min_p, 0, 1, True, False, "0 to below 1"),
            (
                "repetition penalty",
                self.repetition_penalty,
                0,
                100,
                False,
                True,
                "above 0 and at most 100 (1 = off)",
            ),
            ("presence penalty", self.presence_penalty, -2, 2, True, True, "-2 to 2 (0 = off)"),
            ("frequency penalty", self.frequency_penalty, -2, 2, True, True, "-2 to 2 (0 = off)"),
        ]
        for name, value, low, high, with_low, with_high, allowed in checks:
            if isinstance(value, bool) or not isinstance(value, int | float):
                found.append(f"{name} must be a number ({allowed}).")
                continue
            above = value >= low if with_low else value > low
            below = value <= high if with_high else value < high
            if not (_finite(value) and above and below):
                found.append(f"{name} is {value!r}; it must be {allowed}.")
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            found.append(f"top-k is {self.top_k!r}; it must be a whole number >= 0 (0 = off).")
        seed = self.seed
        if seed is not None and (
            isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED
        ):
            found.append(f"seed is {seed!r}; it must be a whole number from 0 to 2^63 - 1.")
        found.extend(_bias_problems(self.logit_bias))
        return found

    def describe(self) -> str:
        """ "greedy" or "temperature 0.7, top-p 0.8, top-k 20" (only what differs from off)."""
        if self.greedy:
            text = "greedy"
        else:
            parts = [f"temperature {self.temperature:g}"]
            if self.top_p < 1:
                parts.append(f"top-p {self.top_p:g}")
            if self.top_k:
                parts.append(f"top-k {self.top_k}")
            if self.min_p:
                parts.append(f"min-p {self.min_p:g}")
            text = ", ".join(parts)
        extras = []
        if self.repetition_penalty != 1.0:
            extras.append(f"repetition penalty {self.repetition_penalty:g}")
        if self.presence_penalty:
            extras.append(f"presence penalty {self.presence_penalty:g}")
        if self.frequency_penalty:
            extras.append(f"frequency penalty {self.frequency_penalty:g}")
        if self.logit_bias:
            count = len(self.logit_bias)
            extras.append(f"logit bias on {count} token{'s' if count > 1 else ''}")
        return ", ".join([text, *extras])

    def to_record(self) -> dict[str, Any]:
        """The values as JSON; `logit_bias` ([[id, bias], ...]) only when there is one."""
        record: dict[str, Any] = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "repetition_penalty": self.repetition_penalty,
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
            "seed": self.seed,
        }
        if self.logit_bias:
            record["logit_bias"] = [[token, bias] for token, bias in self.logit_bias]
        return record

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> Sampling:
        """Values from a stored record; a missing or invalid value keeps its default (stored
        records are untrusted)."""
        values: dict[str, Any] = {}
        defaults = cls()
        for name, default in defaults.to_record().items():
            value = data.get(name, default)
            if name == "seed":
                ok = value is None or (type(value) is int and 0 <= value <= MAX_SEED)
            elif name == "top_k":
                ok = type(value) is int and value >= 0
            else:
                ok = type(value) in (int, float) and _finite(value)
            values[name] = value if ok else default
        bias = _bias_from_record(data.get("logit_bias", []))
        sampling = cls(**values, logit_bias=bias or ())
        return defaults if sampling.problems() else sampling


GREEDY = Sampling()
#: OpenAI's bounds for logit_bias: at most 300 tokens, each bias -100 to 100.
MAX_BIASED_TOKENS = 300
MAX_BIAS = 100.0


def _bias_problems(bias: object) -> list[str]:
    if not isinstance(bias, tuple) or len(bias) > MAX_BIASED_TOKENS:
        return [f"logit bias must name at most {MAX_BIASED_TOKENS} tokens."]
    last = -1
    for pair in bias:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            return ["logit bias must be (token id, bias) pairs."]
        token, value = pair
        if isinstance(token, bool) or not isinstance(token, int) or token <= last:
            return ["logit bias token ids must be whole numbers >= 0, ascending, each once."]
        last = token
        if isinstance(value, bool) or not isinstance(value, int | float):
            return [f"logit bias of token {token} must be a number."]
        if not (_finite(value) and -MAX_BIAS <= value <= MAX_BIAS):
            return [f"logit bias of token {token} is {value!r}; it must be -100 to 100."]
    return []


def _bias_from_record(value: object) -> tuple[tuple[int, float], ...] | None:
    """A stored [[id, bias], ...] list as Sampling's pairs; None when it is not one."""
    if not isinstance(value, list):
        return None
    pairs = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2):
            return None
        pairs.append((item[0], item[1]))
    bias = tuple(pairs)
    return None if _bias_problems(bias) else bias


@dataclass(frozen=True)
class DecodingMethod:
    """Plain decoding, MTP at depth `drafts`, or prompt lookup with `drafts` per step and
    n-grams up to `ngram`; each greedy or sampled (`sampling`). Build them with `plain()`,
    `mtp()` and `lookup()`; `check()` says what is wrong with hand-built values."""

    kind: MethodKind = "plain"
    #: MTP depth or prompt lookup's drafts per step; 0 for plain decoding.
    drafts: int = 0
    #: Prompt lookup's longest n-gram searched; 0 for the others.
    ngram: int = 0
    sampling: Sampling = GREEDY
    #: What the answer must match (structured output), or None.
    constraint: Constraint | None = None

    @classmethod
    def plain(cls, sampling: Sampling = GREEDY) -> DecodingMethod:
        return cls("plain", 0, 0, sampling)

    @classmethod
    def mtp(cls, depth: int, sampling: Sampling = GREEDY) -> DecodingMethod:
        return cls("mtp", depth, 0, sampling)

    @classmethod
    def lookup(
        cls,
        drafts: int = DEFAULT_LOOKUP_DRAFTS,
        ngram: int = DEFAULT_NGRAM,
        sampling: Sampling = GREEDY,
    ) -> DecodingMethod:
        return cls("lookup", drafts, ngram, sampling)

    # --- what it is ----------------------------------------------------------------------------

    @property
    def is_plain(self) -> bool:
        return self.kind == "plain"

    @property
    def uses_mtp_head(self) -> bool:
        """Whether the model's MTP head drafts (a model loaded without one decodes plain)."""
        return self.kind == "mtp"

    @property
    def drafts_vary(self) -> bool:
        """Whether the drafts per step vary (prompt lookup proposes only what matched, so its
        acceptance comes from a replay of its search, and no per-depth projection applies);
        MTP proposes `drafts` every step."""
        return self.kind == "lookup"

    @property
    def drafting(self) -> DecodingMethod:
        """The method without its sampling and constraint: what Auto and the benchmark compare
        (greedy, unconstrained)."""
        if self.sampling == GREEDY and self.constraint is None:
            return self
        return replace(self, sampling=GREEDY, constraint=None)

    def with_sampling(self, sampling: Sampling) -> DecodingMethod:
        return replace(self, sampling=sampling)

    def with_constraint(self, constraint: Constraint | None) -> DecodingMethod:
        return replace(self, constraint=constraint)

    @property
    def name(self) -> str:
        """ "plain decoding", "MTP", "prompt lookup": the method without its settings."""
        return {"mtp": "MTP", "lookup": "prompt lookup"}.get(self.kind, "plain decoding")

    @property
    def label(self) -> str:
        """ "plain decoding", "MTP n=2", "prompt lookup K=4, n-gram 3"."""
        if self.kind == "mtp":
            return f"MTP n={self.drafts}"
        if self.kind == "lookup":
            return f"prompt lookup K={self.drafts}, n-gram {self.ngram}"
        return "plain decoding"

    @property
    def short_label(self) -> str:
        """ "plain", "MTP n=2", "lookup K=4": for tables and chart axes."""
        if self.kind == "lookup":
            return f"lookup K={self.drafts}"
        return "plain" if self.kind == "plain" else self.label

    def __str__(self) -> str:
        text = self.label
        if not self.sampling.greedy or self.sampling.penalised:
            text += f", {self.sampling.describe()}"
        if self.constraint is not None:
            text += f", output matches {self.constraint.describe()}"
        return text

    def check(self) -> None:
        """Raise MethodError naming the first value that cannot run."""
        if self.kind not in METHOD_KINDS:
            raise MethodError(f"unknown decoding method {self.kind!r}")
        if self.kind == "plain" and (self.drafts or self.ngram):
            raise MethodError("plain decoding drafts nothing (drafts and n-gram must be 0).")
        if self.kind == "mtp" and not (_whole(self.drafts) and 1 <= self.drafts <= MAX_MTP_DEPTH):
            raise MethodError(f"MTP needs 1 to {MAX_MTP_DEPTH} draft tokens per step.")
        if self.kind == "mtp" and self.ngram:
            raise MethodError("MTP has no n-gram size.")
        if self.kind == "lookup":
            if not (_whole(self.drafts) and 1 <= self.drafts <= MAX_LOOKUP_DRAFTS):
                raise MethodError(
                    f"Prompt lookup needs 1 to {MAX_LOOKUP_DRAFTS} draft tokens per step."
                )
            if not (_whole(self.ngram) and 1 <= self.ngram <= MAX_NGRAM):
                raise MethodError(f"The n-gram size for prompt lookup must be 1 to {MAX_NGRAM}.")
        problems = self.sampling.problems()
        if problems:
            raise MethodError(" ".join(problems))
        if self.constraint is not None:
            self.constraint.check()

    # --- records (the external edge: stored stats, reports, the API) ---------------------------

    def to_record(self) -> dict[str, Any]:
        """{"kind": "mtp", "drafts": 2, "ngram": 0, "sampling": {...}}."""
        return {
            "kind": self.kind,
            "drafts": self.drafts,
            "ngram": self.ngram,
            "sampling": self.sampling.to_record(),
            **(
                {"constraint": {"kind": self.constraint.kind, "name": self.constraint.name}}
                if self.constraint is not None
                else {}
            ),
        }

    @classmethod
    def from_record(cls, data: object) -> DecodingMethod | None:
        """A method from a stored record, this module's or an older one ({"mode": "baseline" |
        "mtp" | "lookup", "num_assistant_tokens": k, "max_ngram_size": n}); None when it names
        no method this app knows, or is no mapping at all (records are untrusted)."""
        if not isinstance(data, Mapping):
            return None
        kind = data.get("kind", data.get("mode"))
        if kind == "baseline":
            kind = "plain"
        drafts = data.get("drafts", data.get("num_assistant_tokens", 0))
        ngram = data.get("ngram", data.get("max_ngram_size", 0))
        if kind == "plain":
            drafts = ngram = 0
        elif kind == "mtp":
            ngram = 0
        raw = data.get("sampling")
        sampling = Sampling.from_record(raw) if isinstance(raw, Mapping) else GREEDY
        if kind not in METHOD_KINDS or not _whole(drafts) or not _whole(ngram):
            return None
        method = cls(kind, drafts, ngram, sampling)
        try:
            method.check()
        except MethodError:
            return None
        return method


def _whole(value: object) -> bool:
    return type(value) is int


def _finite(value: float) -> bool:
    """math.isfinite without its OverflowError on ints too large for a float (those are
    finite; the range checks refuse them)."""
    return isinstance(value, int) or math.isfinite(value)


PLAIN = DecodingMethod.plain()
#: MTP n=1: the depth validated on every model so far, the cheapest when drafts are rejected,
#: and where Auto starts on a model never benchmarked.
DEFAULT_MTP = DecodingMethod.mtp(1)
#: Prompt lookup with its default drafts per step and n-gram size.
DEFAULT_LOOKUP = DecodingMethod.lookup()


ConstraintKind = Literal["json_object", "json_schema", "regex", "lark"]
CONSTRAINT_KINDS: tuple[ConstraintKind, ...] = ("json_object", "json_schema", "regex", "lark")
#: A schema, regex or grammar longer than this is refused (they come from API clients).
MAX_CONSTRAINT_CHARS = 200_000


@dataclass(frozen=True)
class Constraint:
    """What the answer must match, enforced token by token (core.decoding.grammar): any JSON
    object, a JSON schema (`source`: the schema as JSON text; `name` for messages), a regular
    expression or a Lark grammar. Part of a `DecodingMethod`; the decoder masks every
    distribution with it, drafts included, so the output equals plain constrained decoding.

    `lazy`: the grammar admits any text until a tool call opens (tool_choice auto), so it
    shapes the answer only from there; where no grammar can be enforced (openvino-genai's
    turns, an assistant prefill) the turn runs without it rather than being refused, and
    with thinking on it keeps no room for an answer (the model may end in its reasoning)."""

    kind: ConstraintKind
    source: str = ""
    name: str = ""
    lazy: bool = False

    def check(self) -> None:
        """MethodError when the constraint is malformed before compiling it (the grammar
        engine checks the rest: core.decoding.grammar)."""
        if self.kind not in CONSTRAINT_KINDS:
            raise MethodError(f"unknown kind of structured output {self.kind!r}")
        if not isinstance(self.source, str) or len(self.source) > MAX_CONSTRAINT_CHARS:
            raise MethodError(
                f"The {self.describe()} must be text of at most {MAX_CONSTRAINT_CHARS:,} "
                "characters."
            )
        if self.kind != "json_object" and not self.source.strip():
            raise MethodError(f"The {self.describe()} is empty.")

    def describe(self) -> str:
        if self.kind == "json_object":
            return "any JSON object"
        if self.kind == "json_schema":
            return f"JSON schema {self.name!r}" if self.name else "a JSON schema"
        if self.lazy:
            return "grammar of the offered tools' calls"
        return "a regular expression" if self.kind == "regex" else "a grammar"
