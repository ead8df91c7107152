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
import re
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
    # `oneOf` is decoded as `anyOf` (a value that matches two branches is rare, and schemas
    # from pydantic and zod write `oneOf` where `anyOf` is meant); llguidance refuses it else.
    "coerce_one_of": True,
}

#: What `bounded_schema` adds where a schema is silent, so a value can never run away (a
#: model unsure of a number writes digits until its token budget ends: `[-2222...`):
#: integers within +-(2**53 - 1) (what JSON numbers keep exactly everywhere, I-JSON), other
#: numbers within +-1e15 with at most 9 decimals (no exponent), strings at most 10,000
#: characters.
SILENT_INTEGER_BOUND = 2**53 - 1
SILENT_NUMBER_BOUND = 1e15
SILENT_NUMBER_STEP = 1e-9
SILENT_STRING_CHARS = 10_000
#: The string formats llguidance enforces; another `format` (pydantic's "password", "binary",
#: ...) is dropped (any string), since llguidance refuses a schema naming it.
KNOWN_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"}
)
#: Keywords whose value is one subschema / a list of them / a map of them.
_ONE_SCHEMA = ("additionalProperties", "items", "not", "contains", "if", "then", "else")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
#: Deeper than this a schema is returned as it is (the grammar engine bounds it anyway).
_MAX_SCHEMA_DEPTH = 64


class ConstraintError(MethodError):
    """A constraint that cannot be enforced; the message says why."""


def bounded_schema(schema: Any, *, strict: bool) -> Any:
    """A copy of a JSON schema that closes objects and bounds values where it is silent, so
    every value the grammar admits ends (docs/api-server.md, "Structured output"):

    - an object schema without `additionalProperties` (or `patternProperties`,
      `unevaluatedProperties`) is closed (`additionalProperties: false`) when `strict` (as
      OpenAI's strict mode requires) or when it lists `properties` (the keys a client reads:
      an invented key is only room for the model to ramble); without `strict`, an object
      that lists no properties stays a free-form map. Members of an `allOf` with several
      members are left open (closing each would forbid the others' keys).
    - an integer without a bound gets +-SILENT_INTEGER_BOUND; a number without one gets
      +-SILENT_NUMBER_BOUND, and at most 9 decimals unless it has `multipleOf`.
    - a string without `maxLength` (or `enum`, `const`) gets SILENT_STRING_CHARS; a `format`
      llguidance does not know is dropped.

    Anything else is kept as it is, and every `$ref` still points where it did."""
    return _bounded(schema, strict, in_all_of=False, depth=0)


def _bounded(node: Any, strict: bool, *, in_all_of: bool, depth: int) -> Any:
    if not isinstance(node, dict) or depth > _MAX_SCHEMA_DEPTH:
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _ONE_SCHEMA and isinstance(value, dict):
            value = _bounded(value, strict, in_all_of=False, depth=depth + 1)
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            several = key == "allOf" and len(value) > 1
            value = [_bounded(v, strict, in_all_of=several, depth=depth + 1) for v in value]
        elif key in _SCHEMA_MAPS and isinstance(value, dict):
            value = {
                k: _bounded(v, strict, in_all_of=False, depth=depth + 1) for k, v in value.items()
            }
        out[key] = value
    kinds = out.get("type")
    types = {kinds} if isinstance(kinds, str) else set(kinds) if isinstance(kinds, list) else set()
    valued = "enum" in out or "const" in out
    properties = out.get("properties")
    is_object = "object" in types or (not types and isinstance(properties, dict))
    open_keys = ("additionalProperties", "patternProperties", "unevaluatedProperties")
    silent = is_object and not in_all_of and not any(key in out for key in open_keys)
    if silent and (strict or (isinstance(properties, dict) and properties)):
        out["additionalProperties"] = False
    if isinstance(out.get("format"), str) and out["format"] not in KNOWN_FORMATS:
        del out["format"]
    if valued:
        return out
    if "integer" in types or "number" in types:
        bound = SILENT_INTEGER_BOUND if "number" not in types else SILENT_NUMBER_BOUND
        if "minimum" not in out and "exclusiveMinimum" not in out:
            out["minimum"] = -bound
        if "maximum" not in out and "exclusiveMaximum" not in out:
            out["maximum"] = bound
        if "number" in types and "multipleOf" not in out:
            out["multipleOf"] = SILENT_NUMBER_STEP
    if "string" in types and "maxLength" not in out:
        least = out.get("minLength")
        out["maxLength"] = max(SILENT_STRING_CHARS, least if isinstance(least, int) else 0)
    return out


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


def grammar_problem(constraint: Constraint) -> str | None:
    """Why the grammar engine refuses a constraint, with no vocabulary at hand (None: it
    compiles), for a caller that would rather go without the constraint than fail the turn."""
    import llguidance

    try:
        grammar = grammar_text(constraint)
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar)
    except (ConstraintError, ValueError, RuntimeError, RecursionError) as exc:
        return str(exc)
    return (messages[0] if messages else "refused") if is_error else None


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
                text_added_tokens(text), n_vocab=vocab_size, eos_token=stops or None
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


#: An added token read as the text it spells (printable ASCII, which byte-level BPE writes
#: as itself).
_PLAIN_TOKEN = re.compile(r"^[!-~]+$")


def text_added_tokens(tokenizer_json: str) -> str:
    """tokenizer.json with its added tokens that are not special (Qwen's `<tool_call>`,
    `</tool_call>`, `<think>`, `</think>`) moved into the vocabulary, so the grammar engine
    reads them as the text they spell, as the tokenizer decodes them. llguidance takes every
    added token for a special one, which no text in a grammar matches: a tool call's
    `"<tool_call>"` would then mask the model's own `<tool_call>` token and force the tag
    byte by byte. Unchanged when there is nothing to move or the file is not the usual shape."""
    try:
        data = json.loads(tokenizer_json)
    except (ValueError, RecursionError):
        return tokenizer_json  # llguidance says what is wrong with it
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) else None
    added = data.get("added_tokens") if isinstance(data, dict) else None
    if not isinstance(vocab, dict) or not isinstance(added, list):
        return tokenizer_json
    kept: list[Any] = []
    for token in added:
        content = token.get("content") if isinstance(token, dict) else None
        plain = isinstance(content, str) and bool(_PLAIN_TOKEN.match(content))
        if plain and token.get("special") is False and isinstance(token.get("id"), int):
            vocab.setdefault(content, token["id"])
        else:
            kept.append(token)
    if len(kept) == len(added):
        return tokenizer_json
    # The tokenizers library numbers added tokens it does not find in the vocabulary from the
    # vocabulary's size on, whatever their "id" says: the ones kept go in it too (they stay
    # special, being added tokens), so every id stays where it was.
    for token in kept:
        content = token.get("content") if isinstance(token, dict) else None
        if isinstance(content, str) and isinstance(token.get("id"), int):
            vocab.setdefault(content, token["id"])
    data["added_tokens"] = kept
    return json.dumps(data, ensure_ascii=False)


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
