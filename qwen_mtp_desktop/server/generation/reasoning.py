"""The reasoning controls agent clients send, as Qwen3.5's thinking: chat completions'
`reasoning_effort`, the Responses API's `reasoning.effort`, vLLM's `thinking_token_budget` and
`chat_template_kwargs.enable_thinking`, reduced to thinking on or off and a thinking budget
(`GenerationSettings.thinking_budget`: the engine closes the thinking block itself when the
budget is spent, and always leaves the answer room; core.engine.generation.thinking_limit).

The mapping (docs/api-server.md, "Reasoning"): `none` and `minimal` turn thinking off
(Qwen3.5's template then renders an empty thinking block, which is what a budget of 0 would
give); `low`, `medium`, `high`, `xhigh` and `max` turn it on with a budget of 512, 2,048,
8,192, 16,384 tokens and no budget of its own (the answer's room still applies). A request that
says two contradicting things (`enable_thinking: false` with `reasoning_effort: "high"`) is a
400 naming the field, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from qwen_mtp_desktop.server.http.errors import ApiError

#: OpenAI's reasoning efforts (the openai SDK's ReasoningEffort).
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
#: Efforts that turn thinking off.
OFF: frozenset[str] = frozenset({"none", "minimal"})
#: The thinking budget of each effort that thinks (tokens); None: no budget of its own.
EFFORT_BUDGETS: dict[str, int | None] = {
    "low": 512,
    "medium": 2048,
    "high": 8192,
    "xhigh": 16384,
    "max": None,
}
#: A budget the engine always caps (it keeps room for the answer): "max" thinks up to there.
UNBOUNDED = 1_000_000


@dataclass(frozen=True)
class Thinking:
    """What a request asks of the model's thinking."""

    on: bool
    #: Reasoning tokens before the engine closes the thinking block (None: no budget).
    budget: int | None = None


def plan_thinking(
    default: bool,
    *,
    enable: bool | None = None,
    effort: Effort | None = None,
    budget: int | None = None,
    effort_param: str = "reasoning_effort",
) -> Thinking:
    """The request's thinking: `default` (the server's `--think`), overridden by
    `enable_thinking`, `effort` (named `effort_param` in errors) and a `thinking_token_budget`.
    ApiError 400 for fields that contradict each other."""
    on = default if enable is None else enable
    limit: int | None = None
    if effort is not None:
        wants = effort not in OFF
        if enable is not None and enable != wants:
            said = "true" if enable else "false"
            raise ApiError(
                400,
                f"{effort_param} is {effort!r}, which turns thinking {'on' if wants else 'off'}, "
                f'but chat_template_kwargs says {{"enable_thinking": {said}}}; send one of them.',
                code="invalid_value",
                param=effort_param,
            )
        on = wants
        if wants:
            limit = EFFORT_BUDGETS[effort]
            if limit is None:
                limit = UNBOUNDED
    if budget is not None:
        if not on:
            raise ApiError(
                400,
                "thinking_token_budget limits the model's thinking, which is off for this "
                'request; send chat_template_kwargs {"enable_thinking": true} (or a '
                "reasoning effort above minimal) with it, or leave it out.",
                code="invalid_value",
                param="thinking_token_budget",
            )
        limit = budget
    return Thinking(on, limit if on else None)
