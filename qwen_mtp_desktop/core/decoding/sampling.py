"""Sampling for the app's decoder: a logits row to a processed distribution, a token drawn
from it, and the exact speculative acceptance rule that lets MTP drafts keep plain sampling's
output distribution. numpy only; no OpenVINO.

**One processing for every distribution.** `process_logits` makes plain sampling's
distribution, each verified position's target distribution p_i and the draft head's q_i, so
"the same processing" holds by construction. Order, as Hugging Face's generate applies it:
penalties (repetition over prompt + answer, Hugging Face's rule: positive logits divided,
negative multiplied; then OpenAI's frequency and presence penalties over this answer's
tokens, as vLLM applies them after the repetition penalty), temperature, top-k, top-p (mass
of the top-k set), min-p (relative to the most likely token). Temperature 0 is greedy: all
the mass on the argmax of the penalised logits (the lowest id on ties, as numpy's argmax).

**Sparse.** The vocabulary has 248,320 tokens and Qwen's settings keep 20 (top-k 20), so a
distribution is the token ids it keeps (ascending) with float64 probabilities. Top-k never
sorts the row: the k-th largest value of every 16th logit is a lower bound of the row's k-th
largest, one vectorised comparison keeps the few hundred logits above it, and only those are
ordered (float64 from there on). Without top-k, weights are computed in float32 over the row
(one pass); min-p is one threshold; top-p ranks the best 256 and, when they do not reach the
mass, sums the weights into bins of the logit and sorts only the bin where the cut falls.
About 0.2-0.4 ms per row with Qwen's settings on a loaded 2-core machine
(benchmarks/sampling_cost.py), against tens of ms for a model step.

**Deterministic ties.** Top-k and top-p rank tokens by processed logit, then by lower id, and
keep exactly that prefix (Hugging Face keeps every token tied with the k-th; this keeps k).

**Why the speculative rule is exact** (Leviathan et al. 2023; Chen et al. 2023). A draft x
sampled from q is accepted with probability min(1, p(x)/q(x)); on rejection the token comes
from normalise(max(0, p - q)). The chance of emitting y is then
min(p(y), q(y)) + (1 - sum_x min(p(x), q(x))) * max(0, p(y) - q(y)) / sum_x max(0, p(x) - q(x))
= p(y), for ANY q, because both sums equal the total variation distance. So q may be anything
the drafts were really sampled from, truncated or not, zero outside the draft vocabulary; only
the test must read the q actually sampled from. Chained drafts stay exact because each p_i is
computed for the prefix that includes the drafts before it (penalties included: `drafts=`),
which is the prefix plain sampling would have if they are accepted. After k acceptances the
next token comes from p_{k+1}, a plain sampling step.

**Randomness** comes only from the numpy Generator passed in: one `random()` double per
acceptance test and per token drawn, none when the outcome is certain (a point mass, or
p(x) >= q(x)), so greedy decoding draws nothing. The same seed, logits and settings give the
same tokens. `fresh_seed()` is for "no seed given": the decoder reports it with the answer.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from qwen_mtp_desktop.core.decoding.method import MAX_SEED, MethodError, Sampling

IdArray = npt.NDArray[np.int64]
ProbArray = npt.NDArray[np.float64]
#: A 1-D row of logits (float32 from the model; float16 or float64 are accepted too).
Logits = npt.NDArray[np.floating[Any]]

_F32_MAX = float(np.finfo(np.float32).max)
#: Top-k's pre-filter reads every this-many-th logit (about k * stride candidates survive).
_STRIDE = 16
#: Top-p without top-k looks among this many best tokens first, then bins the whole row.
_NUCLEUS_FIRST = 256
#: Bins of the exponent when top-p searches the whole row (no top-k): 0.025 wide.
_BINS = 4096
#: How far probabilities given to `Distribution` may sum from 1 (hand-built ones round).
_SUM_TOLERANCE = 1e-6


class LogitsError(ValueError):
    """A logits row that has no distribution (NaN, +inf, all -inf, wrong shape or size); the
    message says what was found and where."""


def fresh_seed() -> int:
    """A random seed for an answer sampled without one: 63 bits from the OS's secure source
    (`secrets`), so it fits `Sampling.seed` (0 to 2^63 - 1), SQLite and JSON. The decoder
    stores it with the answer's stats; passing it back as the seed reproduces the answer."""
    seed = secrets.randbits(63)
    assert 0 <= seed <= MAX_SEED
    return seed


def make_generator(seed: int) -> np.random.Generator:
    """The generator an answer draws from: PCG64 seeded with `seed` (numpy keeps PCG64's
    stream and `Generator.random()` stable across releases)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise MethodError(f"seed is {seed!r}; it must be a whole number from 0 to 2^63 - 1.")
    return np.random.Generator(np.random.PCG64(seed))


class Distribution:
    """Probabilities over token ids, sparse: `ids` (int64, strictly ascending) are the tokens
    with probability > 0 and `probs` (float64) their probabilities, summing to 1 up to
    rounding. Immutable (the arrays are read-only)."""

    __slots__ = ("_cdf", "ids", "probs")

    ids: IdArray
    probs: ProbArray
    _cdf: ProbArray | None

    def __init__(self, ids: Iterable[int] | IdArray, probs: Iterable[float] | ProbArray) -> None:
        """Checked: ids whole numbers >= 0, distinct; probs finite, >= 0, summing to 1 within
        1e-6 (renormalised exactly); zero-probability entries are dropped."""
        id_array = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids)
        prob_array = np.asarray(
            list(probs) if not isinstance(probs, np.ndarray) else probs, dtype=np.float64
        )
        if id_array.ndim != 1 or prob_array.shape != id_array.shape or id_array.size == 0:
            raise ValueError("a distribution needs as many probabilities as token ids (>= 1)")
        if id_array.dtype.kind not in "iu" or (id_array < 0).any():
            raise ValueError("token ids must be whole numbers >= 0")
        if not np.isfinite(prob_array).all() or (prob_array < 0).any():
            raise ValueError("probabilities must be finite and >= 0")
        total = float(prob_array.sum())
        if abs(total - 1.0) > _SUM_TOLERANCE:
            raise ValueError(f"probabilities sum to {total!r}, not 1")
        order = np.argsort(id_array, kind="stable")
        id_array = id_array[order].astype(np.int64)
        if (np.diff(id_array) == 0).any():
            raise ValueError("token ids must be distinct")
        prob_array = prob_array[order]
        keep = prob_array > 0
        self._set(id_array[keep], prob_array[keep] / prob_array[keep].sum())

    @classmethod
    def _trusted(cls, ids: IdArray, probs: ProbArray) -> Distribution:
        """Made by this module: ids ascending, probs > 0 and normalised (no checks)."""
        made = cls.__new__(cls)
        made._set(ids, probs)
        return made

    def _set(self, ids: IdArray, probs: ProbArray) -> None:
        ids.flags.writeable = False
        probs.flags.writeable = False
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "probs", probs)
        object.__setattr__(self, "_cdf", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a Distribution is immutable")

    @classmethod
    def point(cls, token: int) -> Distribution:
        """All the mass on one token (greedy decoding's distribution)."""
        return cls._trusted(np.asarray([token], dtype=np.int64), np.ones(1))

    @classmethod
    def from_dense(cls, probs: Sequence[float] | ProbArray) -> Distribution:
        """From probabilities indexed by token id (zeros dropped)."""
        dense = np.asarray(probs, dtype=np.float64)
        return cls(np.arange(dense.size, dtype=np.int64), dense)

    def __len__(self) -> int:
        return int(self.ids.size)

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{t}: {p:.4g}"
            for t, p in zip(self.ids[:8].tolist(), self.probs[:8].tolist(), strict=True)
        )
        more = ", ..." if len(self) > 8 else ""
        return f"Distribution({{{shown}{more}}})"

    def prob(self, token: int) -> float:
        """p(token); 0.0 for a token outside the support."""
        at = int(self.ids.searchsorted(token))
        return float(self.probs[at]) if at < self.ids.size and self.ids[at] == token else 0.0

    def probs_at(self, tokens: IdArray) -> ProbArray:
        """p at each of `tokens` (0.0 outside the support)."""
        at = np.minimum(np.searchsorted(self.ids, tokens), self.ids.size - 1)
        found = self.ids[at] == tokens
        return np.where(found, self.probs[at], 0.0)

    def to_dense(self, size: int) -> ProbArray:
        """Probabilities indexed by token id 0..size-1 (tests and reports)."""
        dense = np.zeros(size)
        dense[self.ids] = self.probs
        return dense

    @property
    def is_point(self) -> bool:
        return self.ids.size == 1

    def sample(self, rng: np.random.Generator) -> int:
        """One token; one `rng.random()` draw, none for a point mass."""
        if self.ids.size == 1:
            return int(self.ids[0])
        cdf = self._cdf
        if cdf is None:
            cdf = np.cumsum(self.probs)
            object.__setattr__(self, "_cdf", cdf)
        at = int(cdf.searchsorted(rng.random() * cdf[-1], side="right"))
        return int(self.ids[min(at, self.ids.size - 1)])


class PenaltyHistory:
    """What the penalties read, kept incrementally: every distinct token of the prompt and of
    the answer so far (the repetition penalty's set) and how often each token occurs in the
    answer (presence and frequency penalties). `extend` adds accepted tokens; a distribution
    at a draft position passes `drafts=` instead, and nothing of size vocab is copied.

    The penalised value of a token depends only on its logit, whether it was seen and its
    answer count, so a draft position's penalised logits are bit-identical to those plain
    sampling computes after the same tokens were accepted."""

    def __init__(self, vocab_size: int, prompt_ids: Iterable[int] = ()) -> None:
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size is {vocab_size!r}; it must be a whole number >= 1")
        self.vocab_size = vocab_size
        #: Token -> its index in the seen list, -1 when not seen (one int32 per token).
        self._index = np.full(vocab_size, -1, dtype=np.int32)
        self._counts = np.zeros(vocab_size, dtype=np.int64)
        self._seen = np.empty(64, dtype=np.int64)
        self._seen_count = 0
        self.answer_length = 0
        self._add_seen(np.unique(self._checked(prompt_ids)))

    def _checked(self, token_ids: Iterable[int]) -> IdArray:
        ids = np.asarray(
            token_ids if isinstance(token_ids, np.ndarray) else list(token_ids), dtype=np.int64
        ).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            bad = int(ids[(ids < 0) | (ids >= self.vocab_size)][0])
            raise ValueError(
                f"token id {bad} is outside the vocabulary (0 to {self.vocab_size - 1})"
            )
        return ids

    def _add_seen(self, new: IdArray) -> None:
        """Append distinct, not yet seen tokens to the seen list."""
        if not new.size:
            return
        end = self._seen_count + new.size
        if end > self._seen.size:
            grown = np.empty(max(end, 2 * self._seen.size), dtype=np.int64)
            grown[: self._seen_count] = self._seen[: self._seen_count]
            self._seen = grown
        self._seen[self._seen_count : end] = new
        self._index[new] = np.arange(self._seen_count, end, dtype=np.int32)
        self._seen_count = end

    def extend(self, token_ids: Iterable[int]) -> None:
        """Tokens accepted into the answer (in order; repeats count)."""
        ids = self._checked(token_ids)
        if not ids.size:
            return
        fresh = np.unique(ids[self._index[ids] < 0])
        self._add_seen(fresh)
        np.add.at(self._counts, ids, 1)
        self.answer_length += int(ids.size)

    def seen(self, token: int) -> bool:
        """Whether `token` is in the prompt or the answer so far."""
        return bool(self._index[self._checked([token])[0]] >= 0)

    def answer_count(self, token: int) -> int:
        return int(self._counts[self._checked([token])[0]])

    def entries(self, drafts: Sequence[int] = ()) -> tuple[IdArray, IdArray]:
        """(tokens, answer counts) for every token seen in the prompt, the answer or
        `drafts` (the tokens after the answer at a draft position). Without drafts the
        tokens are a view of the history's own list (nothing of size vocab is copied)."""
        seen = self._seen[: self._seen_count]
        if not len(drafts):
            return seen, self._counts[seen]
        extra = self._checked(drafts)
        new: dict[int, int] = {}
        positions = np.empty(extra.size, dtype=np.int64)
        for at, token in enumerate(extra.tolist()):
            index = int(self._index[token])
            if index < 0:
                index = self._seen_count + new.setdefault(token, len(new))
            positions[at] = index
        tokens = np.concatenate([seen, np.fromiter(new, dtype=np.int64, count=len(new))])
        counts = self._counts[tokens]
        np.add.at(counts, positions, 1)
        return tokens, counts


def penalised_logits(
    logits: Logits,
    sampling: Sampling,
    history: PenaltyHistory | None,
    drafts: Sequence[int] = (),
    *,
    ids: IdArray | None = None,
) -> Logits:
    """The row after the repetition, frequency and presence penalties: a copy, or the row
    itself when no penalty applies (the input is never changed). `ids` as in
    `process_logits`. Each touched value is computed in float64 and rounded once to the row's
    type; a finite logit stays finite (clipped), a masked one (-inf) stays -inf."""
    if not sampling.penalised:
        return logits
    if history is None:
        raise ValueError("penalties need the token history (a PenaltyHistory)")
    return _biased(_penalties(logits, sampling, history, drafts, ids), logits, sampling, ids)


def _penalties(
    logits: Logits,
    sampling: Sampling,
    history: PenaltyHistory,
    drafts: Sequence[int],
    ids: IdArray | None,
) -> Logits:
    """The row after the repetition, frequency and presence penalties (`penalised_logits`)."""
    if (
        sampling.repetition_penalty == 1.0
        and not sampling.presence_penalty
        and not sampling.frequency_penalty
    ):
        return logits
    tokens, counts = history.entries(drafts)
    if ids is None:
        if logits.size != history.vocab_size:
            raise LogitsError(
                f"the logits row has {logits.size:,} entries but the vocabulary has "
                f"{history.vocab_size:,} tokens"
            )
        positions = tokens
    else:
        at = np.minimum(np.searchsorted(ids, tokens), ids.size - 1)
        inside = ids[at] == tokens
        positions, counts = at[inside], counts[inside]
    if not positions.size:
        return logits
    out = logits.copy()
    original = out[positions].astype(np.float64)
    values = original
    rep = float(sampling.repetition_penalty)
    if rep != 1.0:
        values = np.where(values < 0, values * rep, values / rep)
    if sampling.frequency_penalty or sampling.presence_penalty:
        values = values - (
            float(sampling.frequency_penalty) * counts
            + float(sampling.presence_penalty) * (counts > 0)
        )
    largest = float(np.finfo(logits.dtype).max)
    with np.errstate(invalid="ignore"):
        values = np.where(np.isfinite(original), np.clip(values, -largest, largest), values)
    out[positions] = values
    return out


def _biased(row: Logits, original: Logits, sampling: Sampling, ids: IdArray | None) -> Logits:
    """The row with `sampling.logit_bias` added (a copy; never `original` changed). A masked
    token (-inf) stays masked; a biased logit stays finite (clipped)."""
    if not sampling.logit_bias:
        return row
    tokens = np.fromiter((t for t, _ in sampling.logit_bias), dtype=np.int64)
    bias = np.fromiter((b for _, b in sampling.logit_bias), dtype=np.float64)
    if ids is None:
        inside = tokens < row.size
        positions = tokens[inside]
    else:
        at = np.minimum(np.searchsorted(ids, tokens), ids.size - 1)
        inside = ids[at] == tokens
        positions = at[inside]
    if not positions.size:
        return row
    out = row.copy() if row is original else row
    current = out[positions].astype(np.float64)
    largest = float(np.finfo(row.dtype).max)
    with np.errstate(invalid="ignore"):
        moved = np.clip(current + bias[inside], -largest, largest)
    out[positions] = np.where(np.isfinite(current), moved, current)
    return out


def process_logits(
    logits: Logits,
    sampling: Sampling,
    history: PenaltyHistory | None = None,
    drafts: Sequence[int] = (),
    *,
    ids: IdArray | None = None,
) -> Distribution:
    """The distribution a token is drawn from: penalties (from `history`, plus `drafts`
    after it at a draft position), temperature, top-k, top-p, min-p (module docstring).

    `ids` gives each entry's token id when the row covers part of the vocabulary (the draft
    head's rows: strictly ascending ids); None means entry i is token i. Penalised settings
    need `history` (ValueError without it: never silently unpenalised). Raises MethodError
    for settings that cannot run and LogitsError for a row that has no distribution (NaN,
    +inf, every entry -inf). -inf entries are allowed: they mark impossible tokens."""
    problems = sampling.problems()
    if problems:
        raise MethodError(" ".join(problems))
    _check_row(logits, ids)
    row = penalised_logits(logits, sampling, history, drafts, ids=ids)
    if sampling.greedy:
        best = int(np.argmax(row))
        _check_finite(row, float(row[best]), logits)
        return Distribution.point(_token(best, ids))
    top = float(row.max())
    _check_finite(row, top, logits)
    k = sampling.top_k
    temperature = float(sampling.temperature)
    if 0 < k < row.size:
        kept, weights = _top_k(row, k, temperature)  # ranked
        if sampling.top_p < 1:
            cumulative = np.cumsum(weights)
            cut = int(np.searchsorted(cumulative, sampling.top_p * cumulative[-1], side="left"))
            kept, weights = kept[: cut + 1], weights[: cut + 1]
        # Min-p relative to the most likely token, whose weight is exactly 1 here; it keeps
        # a prefix of the ranking top-p cuts, so after top-p it is an intersection.
        keep = weights >= sampling.min_p if sampling.min_p > 0 else weights > 0
        order = np.argsort(kept[keep])
        kept, weights = kept[keep][order], weights[keep][order]
    else:
        kept, weights = _whole_row(row, top, temperature, sampling.top_p, sampling.min_p)
    tokens = kept.astype(np.int64, copy=False) if ids is None else ids[kept]
    return Distribution._trusted(tokens, weights / weights.sum())


def _check_row(logits: Logits, ids: IdArray | None) -> None:
    if not isinstance(logits, np.ndarray) or logits.ndim != 1 or logits.size == 0:
        shape = getattr(logits, "shape", type(logits).__name__)
        raise LogitsError(f"expected one non-empty row of logits, got shape {shape}")
    if logits.dtype.kind != "f":
        raise LogitsError(f"logits must be floating point, not {logits.dtype}")
    if ids is not None:
        if ids.shape != logits.shape or ids.dtype.kind not in "iu":
            raise LogitsError(
                f"the row has {logits.size:,} logits but {ids.size:,} token ids (one per logit)"
            )
        if ids.size > 1 and (ids[1:] <= ids[:-1]).any():
            raise LogitsError("the token ids of a row must be strictly ascending")


def _check_finite(row: Logits, top: float, raw: Logits) -> None:
    """`top` is the row's max (or argmax value): NaN, +inf or -inf there means no
    distribution. Says what the model's row held, which is where the fault is."""
    if np.isfinite(top):
        return
    nan = int(np.isnan(raw).sum())
    positive = int(np.isposinf(raw).sum())
    if nan or positive:
        first = int(np.flatnonzero(np.isnan(raw) | np.isposinf(raw))[0])
        found = ", ".join(
            part
            for part in (f"{nan:,} NaN" if nan else "", f"{positive:,} +inf" if positive else "")
            if part
        )
        raise LogitsError(
            f"the model's logits hold {found} of {raw.size:,} values (first at entry {first}); "
            "its numerics broke down (try exact numerics, another precision or device)"
        )
    if np.isneginf(row).all():
        raise LogitsError(
            f"every one of the {raw.size:,} logits is -inf (every token masked): nothing can "
            "be sampled"
        )
    raise LogitsError("the penalised logits are not finite")  # pragma: no cover - clipped


def _token(position: int, ids: IdArray | None) -> int:
    return position if ids is None else int(ids[position])


def _weights(values: npt.NDArray[np.floating[Any]], top: float, temperature: float) -> ProbArray:
    """exp((logit - max) / temperature) in float64: the max gets exactly 1, -inf gets 0."""
    with np.errstate(over="ignore", under="ignore"):
        return np.exp((values.astype(np.float64) - top) / temperature)


def _best(row: Logits, k: int) -> IdArray:
    """Ascending positions of every entry >= the row's k-th largest value (ties included;
    -inf entries only if fewer than k are finite), without sorting the row."""
    sample = row[::_STRIDE]
    candidates: IdArray | None = None
    if sample.size > 4 * k:
        # The k-th largest of a subset is <= the k-th largest of the row.
        bound = np.partition(sample, sample.size - k)[sample.size - k]
        candidates = np.flatnonzero(row >= bound)
    if candidates is None or candidates.size > max(64 * k, 4096):
        # Small or adversarial rows (sorted, many ties): the k-th value, then every tie.
        kth = np.partition(row, row.size - k)[row.size - k]
        # Fewer than k possible tokens (the rest masked with -inf): those few.
        candidates = np.flatnonzero(row >= kth if kth > -np.inf else row > kth)
    return candidates


def _ranked(row: Logits, positions: IdArray) -> IdArray:
    """`positions` ordered by (logit descending, id ascending)."""
    return positions[np.lexsort((positions, -row[positions]))]


def _top_k(row: Logits, k: int, temperature: float) -> tuple[IdArray, ProbArray]:
    """The k best entries ranked by (logit descending, id ascending), with their weights
    relative to the best."""
    best = _ranked(row, _best(row, k))[:k]
    values = row[best]
    return best, _weights(values, float(values[0]), temperature)


def _whole_row(
    row: Logits, top: float, temperature: float, top_p: float, min_p: float
) -> tuple[IdArray, ProbArray]:
    """Top-p and min-p over the whole row (no top-k): weights computed in float32 (one pass
    each), the kept positions ascending with weights > 0."""
    scale = np.float32(min(1.0 / temperature, _F32_MAX))
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        exponents = (row - row.dtype.type(top)).astype(np.float32, copy=False) * scale
        weights = np.exp(exponents)
    if top_p < 1:
        kept = _nucleus(row, exponents, weights, top_p)
        kept = kept[weights[kept] >= min_p if min_p > 0 else weights[kept] > 0]
    else:
        kept = np.flatnonzero(weights >= min_p if min_p > 0 else weights > 0)
    return kept, weights[kept].astype(np.float64)


def _nucleus(
    row: Logits,
    exponents: npt.NDArray[np.float32],
    weights: npt.NDArray[np.float32],
    top_p: float,
) -> IdArray:
    """The smallest prefix of the row ranked by (logit descending, id ascending) whose mass
    is >= top_p of the whole, without sorting the row. When the best few hundred do not
    reach it, the weights are summed into bins of the exponent (monotone in the logit, so
    every token of an earlier bin ranks strictly before every token of a later one) and
    only the bin where the cut falls is sorted."""
    target = top_p * float(weights.sum(dtype=np.float64))
    if row.size > 4 * _NUCLEUS_FIRST:
        # Usually the nucleus is a few tokens: rank only the best few hundred. The cut
        # counts if it lies strictly above their lowest logit (nothing outside ranks before).
        ranked = _ranked(row, _best(row, _NUCLEUS_FIRST))
        running = np.cumsum(weights[ranked], dtype=np.float64)
        cut = int(np.searchsorted(running, target, side="left"))
        if cut < ranked.size and row[ranked[cut]] > row[ranked[-1]]:
            return np.sort(ranked[: cut + 1])
    # float32 weights are 0 below exp(-104): those tokens share the last bin.
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.minimum(-exponents * np.float32(_BINS / 104.0), np.float32(_BINS - 1))
    bins = scaled.astype(np.int32)
    cumulative = np.cumsum(np.bincount(bins, weights=weights, minlength=_BINS))
    cut_bin = min(int(np.searchsorted(cumulative, target, side="left")), _BINS - 1)
    before = float(cumulative[cut_bin - 1]) if cut_bin else 0.0
    inside = _ranked(row, np.flatnonzero(bins == cut_bin))
    running = before + np.cumsum(weights[inside], dtype=np.float64)
    cut = min(int(np.searchsorted(running, target, side="left")), inside.size - 1)
    kept = np.concatenate([np.flatnonzero(bins < cut_bin), inside[: cut + 1]])
    kept.sort()
    return kept


# --- the speculative acceptance rule --------------------------------------------------------


class Verdict(NamedTuple):
    """A verification step's outcome: how many drafts were accepted, and the token after them
    (the residual's sample after a rejection, or the bonus token from p_{k+1})."""

    accepted: int
    token: int


def residual(p: Distribution, q: Distribution) -> Distribution:
    """normalise(max(0, p - q)), what a rejected position samples from; p itself when that is
    all zeros (p <= q everywhere, which with both summing to 1 means p = q up to rounding; a
    rejection there has probability ~0 and p is the limit). Its support is inside p's."""
    remaining = np.maximum(p.probs - q.probs_at(p.ids), 0.0)
    keep = remaining > 0
    total = float(remaining[keep].sum())
    if total <= 0:
        return p
    return Distribution._trusted(p.ids[keep], remaining[keep] / total)


def accept_probability(p: Distribution, q: Distribution, token: int) -> float:
    """min(1, p(x)/q(x)) for a draft x sampled from q (q(x) must be > 0)."""
    drafted = q.prob(token)
    if drafted <= 0:
        raise ValueError(
            f"draft token {token} has probability 0 under the distribution it was said to be "
            "sampled from"
        )
    return min(1.0, p.prob(token) / drafted)


def verify_drafts(
    drafts: Sequence[int],
    draft_distributions: Sequence[Distribution],
    targets: Sequence[Distribution] | Callable[[int], Distribution],
    rng: np.random.Generator,
) -> Verdict:
    """The exact speculative sampling step: draft x_i (sampled from q_i =
    draft_distributions[i]) is accepted with probability min(1, p_i(x_i) / q_i(x_i)) in
    order; at the first rejection the token comes from residual(p_i, q_i); after k
    acceptances from p_{k+1}. Emits what plain sampling would (module docstring).

    `targets` holds p_1..p_{k+1} (index 0..k), or is a function of the index, asked only for
    the positions reached (processing a 248k row costs; a rejection at 0 needs only p_1).
    p_i must be processed for the prefix that includes drafts[:i]. Greedy settings on both
    sides reduce to: accept iff x_i is p_i's argmax, no random draws."""
    k = len(drafts)
    if len(draft_distributions) != k:
        raise ValueError(f"{k} drafts but {len(draft_distributions)} draft distributions")
    if not callable(targets) and len(targets) != k + 1:
        raise ValueError(f"{k} drafts need {k + 1} target distributions, not {len(targets)}")
    target: Callable[[int], Distribution] = targets if callable(targets) else targets.__getitem__
    for index, (token, q) in enumerate(zip(drafts, draft_distributions, strict=True)):
        p = target(index)
        chance = accept_probability(p, q, token)
        if chance >= 1.0 or (chance > 0.0 and rng.random() < chance):
            continue
        return Verdict(index, residual(p, q).sample(rng))
    return Verdict(k, target(k).sample(rng))


def sample_draft(
    logits: Logits,
    sampling: Sampling,
    rng: np.random.Generator,
    history: PenaltyHistory | None = None,
    drafts: Sequence[int] = (),
    *,
    ids: IdArray | None = None,
) -> tuple[int, Distribution]:
    """A draft token and the q it was sampled from (keep q for `verify_drafts`).

    q gets the full processing p gets, penalties included: acceptance is
    sum_x min(p(x), q(x)), highest when q's shape matches p's, and p is penalised, tempered
    and truncated; a draft head that matched the target exactly would then be accepted every
    time, while an unpenalised or untruncated q loses mass on tokens p cuts or penalises
    (measured on a synthetic chain with a good draft: 0.73 expected acceptance, against
    0.71 without penalties, 0.67 without truncation; test_sampling_exactness.py).
    Exactness does not depend on this choice."""
    q = process_logits(logits, sampling, history, drafts, ids=ids)
    return q.sample(rng), q
