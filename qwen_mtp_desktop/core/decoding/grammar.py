"""Constrained decoding: a `Constraint` (JSON object, JSON schema, regex, Lark grammar) turned
into a token mask at every position the decoder scores, drafts included.

The grammar engine is llguidance (Microsoft's, used by llama.cpp and vLLM): it builds masks for
a 248k-token vocabulary in well under a millisecond, supports rollback (a verification's
rejected drafts are taken back) and reports tokens the grammar forces (the decoder proposes
them as free drafts). xgrammar, the other engine on the package index, needs torch,
transformers and triton at run time (gigabytes the chat runtime does not otherwise need);
llguidance needs nothing.

The vocabulary comes from the model's tokenizer.json, read with the same limits as every
untrusted file (core.files.safe_files), and is built once per model. A constraint that cannot be
compiled (an invalid schema, regex or grammar, or one llguidance does not support) is a
`ConstraintError` with llguidance's reason, never ignored.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qwen_mtp_desktop.core.decoding.method import (
    MAX_CONSTRAINT_CHARS,
    Constraint,
    MethodError,
)
from qwen_mtp_desktop.core.decoding.text import TOKENIZER_JSON
from qwen_mtp_desktop.core.files.safe_files import (
    TOKENIZER_JSON_BYTES,
    UnsafeFileError,
    read_text_file,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from llguidance._lib import JsonCompileOptions

log = logging.getLogger(__name__)


#: JSON as json.dumps writes it: one space after ',' and ':', no other whitespace. Free
#: whitespace lets a model that is unsure (small ones are) pad an answer with blanks until
#: its token budget runs out, still "valid".
JSON_LAYOUT: JsonCompileOptions = {
    "whitespace_flexible": False,
    "item_separator": ", ",
    "key_separator": ": ",
}


class ConstraintError(MethodError):
    """A constraint that cannot be enforced; the message says why."""


def grammar_text(constraint: Constraint) -> str:
    """llguidance's grammar for a constraint (ConstraintError when it is not well formed)."""
    import llguidance

    if len(constraint.source) > MAX_CONSTRAINT_CHARS:
        raise ConstraintError(
            f"The {constraint.describe()} is {len(constraint.source):,} characters long; "
            f"at most {MAX_CONSTRAINT_CHARS:,} are accepted."
        )
    try:
        if constraint.kind in ("json_object", "json_schema"):
            schema = json.loads(constraint.source) if constraint.kind == "json_schema" else {}
            if not isinstance(schema, dict):
                raise ConstraintError("A JSON schema must be a JSON object.")
            if constraint.kind == "json_object":
                schema = {"type": "object"}
            return str(llguidance.LLMatcher.grammar_from_json_schema(schema, overrides=JSON_LAYOUT))
        if constraint.kind == "regex":
            return str(llguidance.LLMatcher.grammar_from_regex(constraint.source))
        return str(llguidance.LLMatcher.grammar_from_lark(constraint.source))
    except (ValueError, RecursionError) as exc:  # json.JSONDecodeError is a ValueError
        raise ConstraintError(f"The {constraint.describe()} is not valid: {exc}") from exc


class GrammarVocabulary:
    """A model's vocabulary as llguidance sees it (built once per model: about a second for a
    248k-token vocabulary)."""

    def __init__(self, tokenizer_json: Path, vocab_size: int, stop_ids: Iterable[int]) -> None:
        import llguidance

        try:
            text = read_text_file(
                tokenizer_json, max_bytes=TOKENIZER_JSON_BYTES, kind=TOKENIZER_JSON
            )
        except (OSError, UnsafeFileError) as exc:
            raise ConstraintError(
                f"Constrained output needs the model's tokenizer.json: {exc}"
            ) from exc
        stops = sorted(int(i) for i in stop_ids if 0 <= int(i) < vocab_size)
        try:
            self.tokenizer = llguidance.LLTokenizer(
                text, n_vocab=vocab_size, eos_token=stops or None
            )
        except (ValueError, RuntimeError) as exc:
            raise ConstraintError(
                f"Constrained output needs the model's tokenizer.json, which llguidance cannot "
                f"read: {exc}"
            ) from exc
        self.vocab_size = vocab_size
        self.stop_ids = tuple(stops)

    def check(self, constraint: Constraint) -> str:
        """The compiled grammar; ConstraintError when it cannot be enforced."""
        import llguidance

        grammar = grammar_text(constraint)
        problem = llguidance.LLMatcher.validate_grammar(grammar, self.tokenizer)
        if problem:
            raise ConstraintError(f"The {constraint.describe()} cannot be enforced: {problem}")
        return grammar


class GrammarState:
    """One answer's position in a grammar: the mask for the next token, tokens the grammar
    forces, and consuming or taking back tokens (a verification's rejected drafts)."""

    def __init__(self, vocabulary: GrammarVocabulary, constraint: Constraint) -> None:
        import llguidance

        self._vocabulary = vocabulary
        self._matcher = llguidance.LLMatcher(vocabulary.tokenizer, vocabulary.check(constraint))
        if self._matcher.is_error():
            raise ConstraintError(
                f"The {constraint.describe()} cannot be enforced: {self._matcher.get_error()}"
            )
        self._consumed = 0

    def allowed(self) -> npt.NDArray[np.bool_]:
        """Which token ids may come next ([vocab_size] booleans)."""
        import numpy as np

        bits = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little")[: self._vocabulary.vocab_size].astype(bool)

    def forced(self) -> list[int]:
        """Tokens the grammar allows as the only continuation (may be empty)."""
        return [int(t) for t in self._matcher.compute_ff_tokens()]

    def valid_prefix(self, tokens: Sequence[int]) -> int:
        """How many of `tokens`, in order, the grammar allows from here (nothing consumed)."""
        return int(self._matcher.validate_tokens([int(t) for t in tokens])) if tokens else 0

    def consume(self, tokens: Sequence[int]) -> int:
        """Advance over the allowed prefix of `tokens`; how many that was (a token the grammar
        refuses is never consumed, so the state never enters llguidance's error state)."""
        count = self.valid_prefix(tokens)
        if count and not self._matcher.consume_tokens([int(t) for t in tokens[:count]]):
            raise ConstraintError(f"the grammar engine failed: {self._matcher.get_error()}")
        self._consumed += count
        return count

    def rollback(self, count: int) -> None:
        if count > 0:
            self._matcher.rollback(count)
            self._consumed -= count

    @property
    def finished(self) -> bool:
        """The grammar accepts nothing more (only an end of text may follow)."""
        return bool(self._matcher.is_stopped())

    @property
    def error(self) -> str:
        return str(self._matcher.get_error()) if self._matcher.is_error() else ""


def masked(logits: npt.NDArray[Any], allowed: npt.NDArray[np.bool_]) -> npt.NDArray[Any]:
    """A copy of a logits row with disallowed tokens at -inf (`allowed` may cover fewer ids:
    then the rest are allowed only if inside it)."""
    import numpy as np

    row = np.array(logits, dtype=np.float32)
    row[~allowed[: len(row)]] = -np.inf
    if len(allowed) < len(row):
        row[len(allowed) :] = -np.inf
    return row
