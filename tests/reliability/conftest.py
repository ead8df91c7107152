"""Reliability suite: faults, bad input and long runs against the real app code.

The fixtures for real models come from the integration suite. Every test that measures
something records it with `figures.record`, which keeps the figures of the last run in
`.cache/reliability/figures.json` (benchmarks/results/reliability.md keeps a run of them).
"""

from __future__ import annotations

from tests.integration.conftest import demo_copy, demo_model  # noqa: F401 (fixtures)
