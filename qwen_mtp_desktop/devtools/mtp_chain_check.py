"""The app's decoder's MTP drafts against the reference chain (devtools.mtp_reference), draft
position by draft position: what tests/integration/test_mtp_chain_reference.py asserts and
benchmarks/mtp_chain_check.py reports.

The decoder is observed through its `draft_log` hook (core.decoding.decoder.AppDecoder), which
records (context length, drafts) for every step that drafts; nothing else about it changes. The
reference then computes, for the same context and fed the decoder's own earlier drafts, what
each depth should propose, so one wrong depth does not spoil the ones after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qwen_mtp_desktop.core.decoding.decoder import AppDecoder
from qwen_mtp_desktop.core.decoding.graphs import DEFAULT_DRAFT_VOCAB
from qwen_mtp_desktop.core.decoding.method import DecodingMethod
from qwen_mtp_desktop.core.decoding.stats import speculative_stats
from qwen_mtp_desktop.core.engine import EXACT_NUMERICS
from qwen_mtp_desktop.core.engine.generation import config_stop_ids, encode_ids
from qwen_mtp_desktop.devtools.mtp_reference import HiddenRule, MtpReference

#: How far fp16-rounded weights (the demo's export) move a draft logit, with room to spare:
#: measured at most 0.021 over 4 prompts x every answer position x depths 1-4, so a margin moves
#: by at most about 0.043.
FP16_SLACK = 0.05


@dataclass(frozen=True)
class DecoderRun:
    """One answer of the app's decoder at a fixed depth, with every step's drafts."""

    prompt: str
    depth: int
    prompt_ids: list[int]
    answer_ids: list[int]
    chunk_sizes: list[int]
    max_new_tokens: int
    draft_log: list[tuple[int, tuple[int, ...]]]

    @property
    def tokens(self) -> list[int]:
        return self.prompt_ids + self.answer_ids

    def acceptance(self) -> tuple[int, int, list[float]]:
        """(drafted, accepted, acceptance by draft position) by the app's own statistics."""
        method = DecodingMethod.mtp(self.depth)
        return speculative_stats(self.chunk_sizes, method, self.max_new_tokens)


@dataclass(frozen=True)
class DraftComparison:
    """One draft of the decoder and what the reference proposes in its place."""

    prompt: str
    context_len: int
    position: int  # draft position in its step, 1-based (the chain's depth)
    decoder: int
    reference: int  # the reference's argmax over the draft vocabulary
    reference_full: int  # ... and over the full vocabulary
    margin: float  # the reference's logit lead of its draft over the decoder's (0 if equal)
    int8_slack: float  # how much of that lead the INT8 draft head can erase (worst case)
    top_margin: float  # the reference's lead over its own runner-up

    @property
    def agrees(self) -> bool:
        return self.decoder == self.reference

    def near_tie(self, slack: float) -> bool:
        """A disagreement numerics can explain: the lead is within the INT8 head's worst case
        plus `slack` (weights stored in another precision than the reference's float32)."""
        return self.margin <= self.int8_slack + slack


@dataclass
class Tally:
    """Agreement at one draft position."""

    compared: int = 0
    agreed: int = 0
    mismatches: list[DraftComparison] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.agreed / self.compared if self.compared else 0.0


def by_position(comparisons: Sequence[DraftComparison], depth: int) -> list[Tally]:
    tallies = [Tally() for _ in range(depth)]
    for item in comparisons:
        tally = tallies[item.position - 1]
        tally.compared += 1
        if item.agrees:
            tally.agreed += 1
        else:
            tally.mismatches.append(item)
    return tallies


class DecoderUnderTest:
    """The app's decoder on a model folder, opened as the engine opens it (stop ids in the
    draft vocabulary; exact numerics or the device's defaults), with its draft log on."""

    def __init__(
        self,
        model_dir: Path,
        *,
        exact: bool = True,
        draft_vocab: int = DEFAULT_DRAFT_VOCAB,
        decoder_class: type[AppDecoder] = AppDecoder,
    ) -> None:
        import openvino_genai

        self.model_dir = model_dir
        self.tokenizer = openvino_genai.Tokenizer(str(model_dir))
        config = openvino_genai.GenerationConfig(str(model_dir / "generation_config.json"))
        if config.eos_token_id < 0:
            config.set_eos_token_id(self.tokenizer.get_eos_token_id())
        self.stop_ids = frozenset(i for i in config_stop_ids(config) if i >= 0)
        properties = dict(EXACT_NUMERICS) if exact else {}
        self.decoder = decoder_class(
            model_dir,
            "CPU",
            properties,
            draft_vocab=draft_vocab,
            special_ids=sorted(self.stop_ids),
        )
        self.draft_vocab = draft_vocab

    def prompt_ids(self, text: str) -> list[int]:
        history = [{"role": "user", "content": text}]
        prompt = self.tokenizer.apply_chat_template(
            history, add_generation_prompt=True, extra_context={"enable_thinking": False}
        )
        return [int(i) for i in encode_ids(self.tokenizer, prompt)]

    def run(
        self, text: str, depth: int, max_new_tokens: int, *, ignore_eos: bool = False
    ) -> DecoderRun:
        return self.run_ids(text, self.prompt_ids(text), depth, max_new_tokens, ignore_eos)

    def run_ids(
        self, label: str, ids: list[int], depth: int, max_new_tokens: int, ignore_eos: bool = False
    ) -> DecoderRun:
        """An answer to prompt token ids (`label` names it in reports). The decoder keeps its
        states between calls, as in a chat: a prompt that extends the last one resumes there."""
        log: list[tuple[int, tuple[int, ...]]] = []
        self.decoder.draft_log = log
        try:
            steps = list(
                self.decoder.decode(
                    ids,
                    method=DecodingMethod.mtp(depth),
                    max_new_tokens=max_new_tokens,
                    stop_ids=self.stop_ids,
                    ignore_eos=ignore_eos,
                )
            )
        finally:
            self.decoder.draft_log = None
        answer = [t for step in steps for t in step.tokens]
        sizes = [len(step.tokens) for step in steps]
        return DecoderRun(label, depth, ids, answer, sizes, max_new_tokens, log)

    def reference(self, checkpoint: Path, embedding_scale: float = 1.0) -> MtpReference:
        """The reference for this decoder's checkpoint, with the same draft vocabulary."""
        reference = MtpReference(
            checkpoint,
            draft_vocab=self.draft_vocab,
            special_ids=sorted(self.stop_ids),
            embedding_scale=embedding_scale,
        )
        if len(reference.draft_ids) != self.decoder.draft_vocab_size:
            raise AssertionError(
                f"draft vocabularies differ: reference {len(reference.draft_ids)} ids, "
                f"decoder {self.decoder.draft_vocab_size}"
            )
        return reference


@dataclass(frozen=True)
class RunComparison:
    drafts: list[DraftComparison]
    #: Answer tokens where the reference's target picks the same greedy token as the run.
    target_agreed: int
    target_compared: int


def compare(
    reference: MtpReference,
    run: DecoderRun,
    *,
    chain_hidden: HiddenRule = "post_norm",
    target_hidden: HiddenRule = "post_norm",
    prepared: Any = None,
) -> RunComparison:
    """Every draft of `run` against the reference chain at the same context, each depth fed the
    decoder's own earlier drafts. `prepared` reuses a `reference.prepare(run.tokens)`."""
    if prepared is None:
        prepared = reference.prepare(run.tokens, target_hidden=target_hidden)
    start = len(run.prompt_ids)
    greedy = prepared.greedy[start - 1 : len(run.tokens) - 1]
    target_agreed = sum(int(a == b) for a, b in zip(greedy, run.answer_ids, strict=True))
    out: list[DraftComparison] = []
    for context_len, drafts in run.draft_log:
        chain = prepared.chain_at(
            context_len, len(drafts), chain_hidden=chain_hidden, follow=list(drafts)
        )
        for draft, step in zip(drafts, chain.steps, strict=True):
            out.append(
                DraftComparison(
                    run.prompt,
                    context_len,
                    step.depth,
                    draft,
                    step.draft_argmax,
                    step.full_argmax,
                    step.margin(draft),
                    step.int8_slack(draft),
                    step.top_margin,
                )
            )
    return RunComparison(out, target_agreed, len(run.answer_ids))


def chain_sensitivity(post_norm: RunComparison, pre_norm: RunComparison) -> tuple[int, int]:
    """(steps whose reference drafts at depth >= 2 differ between the two chaining rules, steps
    with depth >= 2), from one run compared under each rule: 0 differing means this model
    cannot tell which hidden state a decoder chains on."""
    steps: dict[int, list[bool]] = {}
    pairs = zip(post_norm.drafts, pre_norm.drafts, strict=True)
    for a, b in pairs:
        if a.position >= 2:
            steps.setdefault(a.context_len, []).append(a.reference != b.reference)
    return sum(any(v) for v in steps.values()), len(steps)
