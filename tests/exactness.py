"""Exact speculative sampling measured on a real model: the machinery shared by the integration
test (tests/integration/test_speculative_sampling.py, ~1,500 samples per case) and its large
version (benchmarks/sampling_exactness.py, >= 20,000 per case).

For a fixed prompt, plain sampling's joint distribution of the first `tokens` tokens is
enumerated from the model's own logits through the same processing the decoder applies
(`exact_joint`); `sample_counts` draws answers with a decoding method (plain, MTP at a depth,
prompt lookup), one seed per sample, and counts their first tokens; `marginal` and
`marginal_counts` give one position's distribution, so a check can say which token moved.
`skipping_residual()` installs the classic mistake (on rejection, draw from p instead of the
normalised max(0, p - q)) for as long as the block runs, so a check can show it fails.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from qwen_mtp_desktop.core.decoding import sampling as sampling_module
from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
from qwen_mtp_desktop.core.decoding.method import DecodingMethod, Sampling
from qwen_mtp_desktop.core.decoding.sampling import Distribution, PenaltyHistory, process_logits

#: A prompt the demo model is unsure about (it was trained on counting and repeating), where
#: its MTP head's drafts are accepted about 30 % of the time at POEM_SETTINGS, and settings
#: that keep the joint of three tokens small enough to enumerate exactly. Measured: a sampler
#: that skips the residual moves the second token's distribution by a total variation of 0.05
#: (0.00 on prompts the head predicts well, where nearly every draft is accepted).
POEM_PROMPT = (
    "<|im_start|>user\nWrite a poem about the sea<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n"
)
POEM_SETTINGS = Sampling(temperature=1.5, top_k=6, repetition_penalty=1.2)
TOKENS = 3


def prompt_ids(model_dir: Path, prompt: str) -> list[int]:
    """The prompt's token ids with the model's own tokenizer (the prompt carries its chat
    template already)."""
    import openvino_genai

    tokenizer = openvino_genai.Tokenizer(str(model_dir))
    ids = tokenizer.encode(prompt, add_special_tokens=False).input_ids.data[0]
    return [int(i) for i in ids]


def exact_joint(
    decoder: AppDecoder, prompt: list[int], settings: Sampling, tokens: int = TOKENS
) -> dict[tuple[int, ...], float]:
    """P(first `tokens` tokens) under plain sampling with `settings`, by enumeration."""

    def step(prefix: tuple[int, ...]) -> Distribution:
        history = PenaltyHistory(decoder.vocab_size, prompt)
        history.extend(prefix)
        return process_logits(decoder.logits_after(prompt + list(prefix)), settings, history)

    joint: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(tokens):
        grown: dict[tuple[int, ...], float] = {}
        for prefix, mass in joint.items():
            p = step(prefix)
            for token, prob in zip(p.ids.tolist(), p.probs.tolist(), strict=True):
                grown[(*prefix, token)] = mass * prob
        joint = grown
    return joint


@dataclass
class SampleRun:
    """How often each first-tokens tuple came out, and the drafts proposed and accepted."""

    counts: Counter[tuple[int, ...]] = field(default_factory=Counter)
    drafted: int = 0
    accepted: int = 0

    @property
    def samples(self) -> int:
        return sum(self.counts.values())


def sample_counts(
    decoder: AppDecoder,
    prompt: list[int],
    method: DecodingMethod,
    samples: int,
    settings: Sampling,
    tokens: int = TOKENS,
    first_seed: int = 0,
) -> SampleRun:
    """`samples` answers with `method` (its sampling replaced by `settings` with seeds
    `first_seed`, `first_seed` + 1, ...), counted by their first `tokens` tokens."""
    run = SampleRun()
    for seed in range(first_seed, first_seed + samples):
        seeded = method.with_sampling(Sampling(**{**settings.to_record(), "seed": seed}))
        # Two more tokens than are checked, so depth 3 drafts whole chains from step two on.
        steps = list(
            decoder.decode(prompt, method=seeded, max_new_tokens=tokens + 2, stop_ids=set())
        )
        answer = [t for step in steps for t in step.tokens]
        run.counts[tuple(answer[:tokens])] += 1
        run.drafted += sum(step.drafted for step in steps)
        run.accepted += sum(step.accepted for step in steps)
    return run


def marginal(joint: Mapping[tuple[int, ...], float], position: int) -> dict[Hashable, float]:
    """One position's distribution (0-based) from a joint over token tuples."""
    out: dict[Hashable, float] = {}
    for key, prob in joint.items():
        out[key[position]] = out.get(key[position], 0.0) + prob
    return out


def marginal_counts(counts: Mapping[tuple[int, ...], int], position: int) -> Counter[Hashable]:
    out: Counter[Hashable] = Counter()
    for key, count in counts.items():
        out[key[position]] += count
    return out


@contextmanager
def skipping_residual() -> Iterator[None]:
    """A deliberately biased sampler while the block runs: on rejection the token is drawn
    from p itself instead of the residual normalise(max(0, p - q))."""
    original = sampling_module.residual
    sampling_module.residual = lambda p, q: p  # type: ignore[assignment]
    try:
        yield
    finally:
        sampling_module.residual = original


__all__ = [
    "POEM_PROMPT",
    "POEM_SETTINGS",
    "TOKENS",
    "SampleRun",
    "exact_joint",
    "marginal",
    "marginal_counts",
    "prompt_ids",
    "sample_counts",
    "skipping_residual",
]
