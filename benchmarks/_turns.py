"""One turn through the Engine, timed as the benchmarks of kept conversation states report it
(benchmarks/multi_turn.py, benchmarks/shared_preamble.py): its prompt tokens, how many a kept
state spared, the time to first token, the answer, and the page faults before that token."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qwen_mtp_desktop.core.engine import Engine, GenerationSettings, LoadOptions, Message


@dataclass
class Turn:
    prompt_tokens: int
    reused_tokens: int
    ttft_s: float
    ids: list[int]
    answer: str
    #: Pages the process touched for the first time before the first token came (None where
    #: the platform does not count them): on a VM whose host takes freed memory back, each
    #: costs up to tens of microseconds, and a follow-up's graph call can touch a gigabyte.
    page_faults: int | None

    @property
    def prefilled(self) -> int:
        return self.prompt_tokens - self.reused_tokens


def page_faults() -> int | None:
    """This process's minor page faults so far (first touches of memory), where counted."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def run_turn(engine: Engine, messages: list[Message], settings: GenerationSettings) -> Turn:
    before = page_faults()
    generation = engine.generate(messages, settings)
    faults: int | None = None
    for _chunk in generation:
        if faults is None and before is not None:
            faults = (page_faults() or 0) - before  # the first chunk holds the first token
    assert generation.stats is not None
    stats = generation.stats
    return Turn(
        stats.prompt_tokens,
        stats.reused_tokens,
        stats.ttft_s,
        list(generation.token_ids),
        generation.answer,
        faults,
    )


def warm_and_cold(model: Path, exact: bool) -> tuple[Engine, Engine]:
    """Two engines on `model`, MTP on: `warm` keeps states between turns as the chat does; the
    other answers `cold_turn`s, so measuring a reference never disturbs what `warm` keeps.
    The caller unloads both."""
    options = LoadOptions(mtp=True, exact_numerics=exact)
    warm, cold = Engine(), Engine()
    warm.load(model, options)
    cold.load(model, options)
    return warm, cold


def cold_turn(engine: Engine, messages: list[Message], settings: GenerationSettings) -> Turn:
    """A turn on `engine` with its kept states dropped first: the whole prompt prefilled."""
    engine.drop_states()
    return run_turn(engine, messages, settings)
