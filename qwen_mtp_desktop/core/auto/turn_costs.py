"""What a turn costs before its first decode step, per decoding path: the prefill (time to first
token as a function of the prompt's length) and loading a pipeline on its first turn. Auto
(core.auto.policy) adds them to the decoding time it predicts, so a long prompt or an image turn
is judged with its real cost, not by decode speed alone.

The app's decoder runs every text turn, whatever its method, and keeps the conversation's
state between turns (core.decoding.state_cache): a turn prefills only the tokens the kept state
lacks, and switching method between turns keeps that state, so the prefill is the same for
every text option Auto compares. It still counts where paths differ: image turns (openvino-
genai's pipelines prefill the whole conversation, image included) and models the app's decoder
cannot run (openvino-genai's prompt-lookup pipeline prefills 3.3-3.8x slower than plain on
Qwen3.5-0.8B), and the first turn on a pipeline not opened yet, which loads it.

Paths (`path_of`): "app" (the app's own decoder, every method), "lookup" (openvino-genai's
prompt-lookup pipeline), "genai-mtp" / "genai-plain" (openvino-genai's MTP and plain pipelines,
which run turns with images and models the app's decoder cannot), each with an "+image" twin
for turns with images (the image's own tokens, which the app cannot count, make the same text
prompt cost more).

Each path's cost is a least-squares line, seconds = a + b x prefilled tokens (the prompt's
tokens minus those reused), over recent turns (older turns weigh less); a path never measured
is priced from a measured one by the ratio `benchmarks/prefill_costs.py` found on this machine
(PRIOR_RATIO).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from qwen_mtp_desktop.core.decoding.method import DecodingMethod

#: Prefill seconds per prompt token relative to the app's decoder, measured with
#: benchmarks/prefill_costs.py (32-2048 words, 3 interleaved rounds): lookup 1.33 / 1.31,
#: openvino-genai MTP with an image 1.55 / 1.55, plain 0.85-0.87 / 0.89-0.90 on the demo model /
#: MoE fixture. On Qwen3.5-0.8B geometry (INT4, benchmarks/methods_per_workload.py) prompt
#: lookup's time to first token was 3.3-3.8x plain decoding's on the code, chat, list and
#: summarise prompts (7.3x on edit): a full-size model is what users run, so lookup's prior is
#: that one.
PRIOR_RATIO: dict[str, float] = {
    "app": 1.0,
    "lookup": 3.5,
    "genai-mtp": 1.55,
    "genai-plain": 0.85,
    "genai-mtp+image": 1.55,
    "genai-plain+image": 0.87,
    "app+image": 1.0,
    "lookup+image": 3.5,
}
#: Per turn, older evidence keeps this weight (the machine's speed drifts).
DECAY = 0.7
#: Characters per prompt token assumed before a turn measured it (byte-level BPE on English).
PRIOR_TOKENS_PER_CHAR = 0.3
#: A pipeline's first load, as a share of the model's own load time (`Engine.load`): the
#: prompt-lookup pipeline's first request cost 0.09-0.30x of it beyond a warm one (demo model
#: and MoE fixture, benchmarks/prefill_costs.py); the top of that range.
LOAD_SHARE = 0.3


def path_of(method: DecodingMethod, decoder: str, images: int = 0) -> str:
    """The path a turn ran on, from the method that ran and its decoder."""
    path = text_path(method, fast=decoder == "app")
    return f"{path}+image" if images else path


def text_path(method: DecodingMethod, fast: bool) -> str:
    """The path a text turn of `method` takes: the app's decoder, or (when it cannot run the
    model) openvino-genai's prompt-lookup, MTP or plain pipeline."""
    if fast:
        return "app"
    if method.kind == "lookup":
        return "lookup"
    return "genai-mtp" if method.uses_mtp_head else "genai-plain"


@dataclass
class _Line:
    """Decayed sums for a least-squares line through (tokens, seconds)."""

    n: float = 0.0
    x: float = 0.0
    y: float = 0.0
    xx: float = 0.0
    xy: float = 0.0

    def add(self, tokens: float, seconds: float) -> None:
        for name in ("n", "x", "y", "xx", "xy"):
            setattr(self, name, getattr(self, name) * DECAY)
        self.n += 1.0
        self.x += tokens
        self.y += seconds
        self.xx += tokens * tokens
        self.xy += tokens * seconds

    def predict(self, tokens: float) -> float | None:
        if self.n <= 0 or self.x <= 0:
            return None
        mean_x, mean_y = self.x / self.n, self.y / self.n
        spread = self.xx / self.n - mean_x * mean_x
        # Lengths too alike to fit a slope (relative spread below 10 %): through the origin.
        if spread <= (0.1 * mean_x) ** 2:
            return max(mean_y / mean_x * tokens, 0.0)
        slope = max((self.xy / self.n - mean_x * mean_y) / spread, 0.0)
        return max(mean_y + slope * (tokens - mean_x), 0.0)


@dataclass
class TurnCosts:
    """Prefill lines per path, the prompt's tokens per character, and which paths ran."""

    _lines: dict[str, _Line] = field(default_factory=dict)
    _chars: float = 0.0
    _tokens: float = 0.0
    #: Paths that have run on this model (their pipelines are loaded); chat_turns shares
    #: one set between the conversations on one model and device.
    ran: set[str] = field(default_factory=set)

    def observe(
        self,
        path: str,
        prompt_tokens: int,
        ttft_s: float | None,
        prompt_chars: int = 0,
        reused_tokens: int = 0,
    ) -> None:
        """Take in a finished turn's path, prompt length (and how much of it was reused from a
        kept state) and time to first token."""
        self.ran.add(path.removesuffix("+image"))
        if prompt_tokens <= 0 or ttft_s is None or ttft_s <= 0:
            return
        prefilled = prompt_tokens - max(reused_tokens, 0)
        if prefilled > 0:
            self._lines.setdefault(path, _Line()).add(prefilled, ttft_s)
        if prompt_chars > 0 and not path.endswith("+image"):
            self._chars = self._chars * DECAY + prompt_chars
            self._tokens = self._tokens * DECAY + prompt_tokens

    def tokens_for(self, prompt_chars: int) -> int:
        """The prompt's length in tokens, from its characters."""
        ratio = self._tokens / self._chars if self._chars > 0 else PRIOR_TOKENS_PER_CHAR
        return round(prompt_chars * ratio)

    def prefill_s(self, path: str, tokens: int) -> float | None:
        """Predicted time to first token on `path` for prefilling `tokens` (None: no path
        has been measured yet)."""
        line = self._lines.get(path)
        if line is not None:
            found = line.predict(tokens)
            if found is not None:
                return found
        for other, measured in self._lines.items():
            if other == path:
                continue
            estimate = measured.predict(tokens)
            if estimate is not None:
                return estimate * PRIOR_RATIO.get(path, 1.0) / PRIOR_RATIO.get(other, 1.0)
        return None

    def load_s(self, path: str, model_load_s: float | None) -> float:
        """What this path's first turn adds by loading its pipeline (0 once it ran here)."""
        base = path.removesuffix("+image")
        if base in self.ran or base == "app" or model_load_s is None:
            return 0.0
        return model_load_s * LOAD_SHARE


__all__ = ["PRIOR_RATIO", "TurnCosts", "path_of", "text_path"]
