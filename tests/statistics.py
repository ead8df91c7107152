"""Chi-squared tests for samplers: do two samples come from one distribution (homogeneity),
does a sample fit known probabilities (goodness of fit)?

Categories too rare for the chi-squared approximation (expected count below 5 in a cell) are
pooled into one "rest" category, rarest first, until every expected count is >= 5; what was
pooled is reported. Built on scipy.stats (chi2_contingency, chisquare). Used by the unit
tests of core.decoding.sampling and by benchmarks that check exactness on real models.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_EXPECTED = 5.0


@dataclass(frozen=True)
class ChiSquared:
    """A test's outcome: the statistic, degrees of freedom and p-value, how many categories
    it compared (the pooled "rest" counts as one) and how many were pooled into "rest"."""

    statistic: float
    dof: int
    p_value: float
    categories: int
    pooled: int
    samples: int

    def __str__(self) -> str:
        return (
            f"chi2 {self.statistic:.1f}, dof {self.dof}, p = {self.p_value:.3g} "
            f"({self.categories} categories, {self.pooled} rare ones pooled, "
            f"{self.samples:,} samples)"
        )


def _pool(expected_min: np.ndarray, min_expected: float) -> tuple[np.ndarray, np.ndarray]:
    """Which columns stay (indices) and which are pooled, given each column's smallest
    expected count: rarest first into "rest" until the rest itself reaches min_expected."""
    order = np.argsort(expected_min, kind="stable")
    rare = int(np.searchsorted(expected_min[order], min_expected, side="left"))
    # The rest itself may still be too small: add the next rarest until it is not.
    while 0 < rare < order.size and expected_min[order[:rare]].sum() < min_expected:
        rare += 1
    return np.sort(order[rare:]), order[:rare]


def homogeneity(
    first: Mapping[Hashable, int],
    second: Mapping[Hashable, int],
    min_expected: float = MIN_EXPECTED,
) -> ChiSquared:
    """Two-sample chi-squared test of homogeneity of two count tables (category -> count):
    a small p-value means they were drawn from different distributions."""
    keys = sorted(set(first) | set(second), key=repr)
    table = np.array(
        [[first.get(k, 0) for k in keys], [second.get(k, 0) for k in keys]], dtype=np.float64
    )
    totals = table.sum(axis=1)
    if (totals <= 0).any():
        raise ValueError("both samples need at least one observation")
    column = table.sum(axis=0)
    expected_min = column * totals.min() / totals.sum()
    kept, pooled = _pool(expected_min, min_expected)
    columns = [table[:, kept]]
    if pooled.size:
        columns.append(table[:, pooled].sum(axis=1, keepdims=True))
    merged = np.concatenate(columns, axis=1)
    if merged.shape[1] < 2:
        raise ValueError("too few samples: every category had to be pooled into one")
    result = stats.chi2_contingency(merged, correction=False)
    return ChiSquared(
        statistic=float(result.statistic),
        dof=int(result.dof),
        p_value=float(result.pvalue),
        categories=int(merged.shape[1]),
        pooled=int(pooled.size),
        samples=int(totals.sum()),
    )


def goodness_of_fit(
    counts: Mapping[Hashable, int],
    probabilities: Mapping[Hashable, float],
    min_expected: float = MIN_EXPECTED,
) -> ChiSquared:
    """Chi-squared goodness of fit of observed counts to known probabilities (summing to 1).
    A category observed but given probability 0 fails outright (p-value 0)."""
    impossible = [k for k, n in counts.items() if n and probabilities.get(k, 0.0) <= 0]
    samples = int(sum(counts.values()))
    if impossible:
        return ChiSquared(float("inf"), 0, 0.0, len(probabilities), 0, samples)
    keys = [k for k, p in probabilities.items() if p > 0]
    observed = np.array([counts.get(k, 0) for k in keys], dtype=np.float64)
    expected = np.array([probabilities[k] for k in keys], dtype=np.float64)
    expected = expected / expected.sum() * samples
    kept, pooled = _pool(expected, min_expected)
    obs = [observed[kept]]
    exp = [expected[kept]]
    if pooled.size:
        obs.append(observed[pooled].sum(keepdims=True))
        exp.append(expected[pooled].sum(keepdims=True))
    merged_obs, merged_exp = np.concatenate(obs), np.concatenate(exp)
    if merged_obs.size < 2:
        raise ValueError("too few samples: every category had to be pooled into one")
    result = stats.chisquare(merged_obs, merged_exp)
    return ChiSquared(
        statistic=float(result.statistic),
        dof=int(merged_obs.size - 1),
        p_value=float(result.pvalue),
        categories=int(merged_obs.size),
        pooled=int(pooled.size),
        samples=samples,
    )
