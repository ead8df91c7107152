"""Which turns' measurements Auto (core.auto.policy) shares: greedy turns with greedy turns, sampled
turns with sampled turns of a similar temperature.

Speculative sampling accepts a draft with probability min(1, p(x)/q(x)), so acceptance falls as
the temperature flattens p (greedy accepts whenever the draft is the target's top token), and a
sampled step costs more than a greedy one (the processing of core.decoding.sampling). A greedy
turn's acceptance and step cost therefore say little about a sampled turn's: Auto keeps one set
of measurements per band and decides each turn by its own band's. Bands are by temperature
only, wide enough that a chat's settings stay in one (the recommended 0.6-0.7 share a band);
top-k, top-p and penalties move acceptance less, and the per-turn decay of acceptance follows
them within a band. No Qt, no OpenVINO.
"""

from __future__ import annotations

from dataclasses import dataclass

from qwen_mtp_desktop.core.decoding.method import Sampling

#: Upper temperature edges of the sampled bands (the last band is open above).
BAND_EDGES: tuple[float, ...] = (0.5, 0.9, 1.3)


@dataclass(frozen=True)
class SamplingBand:
    """Sampled turns whose temperature lies in (low, high] (high None: no upper edge)."""

    low: float
    high: float | None

    @property
    def key(self) -> str:
        return f"T{self.low:g}-{self.high:g}" if self.high is not None else f"T>{self.low:g}"

    def label(self, temperature: float | None = None) -> str:
        """E.g. "sampled at temperature 0.7 (band 0.5-0.9)"; without a temperature, the band."""
        band = f"{self.low:g}-{self.high:g}" if self.high is not None else f"above {self.low:g}"
        if temperature is None:
            return f"sampled, temperature {band}"
        return f"sampled at temperature {temperature:g} (band {band})"


def band_of(sampling: Sampling) -> SamplingBand | None:
    """The band a turn with `sampling` learns in and is decided by; None for greedy turns."""
    if sampling.greedy:
        return None
    low = 0.0
    for high in BAND_EDGES:
        if sampling.temperature <= high:
            return SamplingBand(low, high)
        low = high
    return SamplingBand(low, None)


__all__ = ["BAND_EDGES", "SamplingBand", "band_of"]
