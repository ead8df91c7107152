"""tool_choice auto's lazy grammar (issue 43, item 3) in llguidance over the tool model's real
vocabulary, no model run: text without "<tool_call>" is never touched (every token the text
needs is allowed, the end of text too), the tag opens the constraint however the tokens split
it (byte pieces, or Qwen's single `<tool_call>` token), after it only calls of the offered tools
are admitted, and after `max_calls` calls no further call can open. The engine keeps the
grammar off the thinking (`thinking_limit`; tests/integration/test_thinking_budget.py runs it)."""

from __future__ import annotations

import itertools
import json
from functools import cache
from pathlib import Path

import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.decoding.grammar import GrammarState, GrammarVocabulary
from qwen_mtp_desktop.core.decoding.method import Constraint, DecodingMethod
from qwen_mtp_desktop.core.engine import GenerationSettings
from qwen_mtp_desktop.core.engine.generation import thinking_limit
from qwen_mtp_desktop.core.tools.calls import Calls, parse, render_calls
from qwen_mtp_desktop.core.tools.grammar import CALL_TAG, tool_call_grammar
from qwen_mtp_desktop.devtools.tool_corpus import BOTH_TOOLS
from tests.models import TOOL_MODEL

TOKENIZER = TOOL_MODEL / "tokenizer.json"
VOCAB = 1024
END = 1004  # <|im_end|>
#: Where the single-token tag goes in the copy of the vocabulary that has one (free id).
TAG_ID = 1011
CALL = render_calls([("add", {"a": 12, "b": 30})])
WEATHER = render_calls([("get_weather", {"city": "Paris"})])


@cache
def vocabulary(tag_token: bool = False) -> GrammarVocabulary:
    return GrammarVocabulary(_tokenizer_file(tag_token), VOCAB, [END])


@cache
def _tokenizer_file(tag_token: bool) -> Path:
    if not tag_token:
        return TOKENIZER
    # Qwen3.5's own layout: "<tool_call>" an added token that is not special.
    data = json.loads(TOKENIZER.read_text(encoding="utf-8"))
    data["added_tokens"].append(
        {"id": TAG_ID, "content": CALL_TAG, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": False}
    )  # fmt: skip
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="tag-token-"))
    path = folder / "tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@cache
def tokenizer(tag_token: bool = False) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(_tokenizer_file(tag_token)))


def ids(text: str, tag_token: bool = False) -> list[int]:
    return list(tokenizer(tag_token).encode(text, add_special_tokens=False).ids)


def lazy(max_calls: int | None = None) -> Constraint:
    grammar = tool_call_grammar(BOTH_TOOLS, lazy=True, max_calls=max_calls)
    return Constraint("lark", grammar, "tool_calls_auto", lazy=True)


def state(max_calls: int | None = None, tag_token: bool = False) -> GrammarState:
    return GrammarState(vocabulary(tag_token), lazy(max_calls))


def consumes_all(grammar: GrammarState, tokens: list[int]) -> bool:
    """Whether the grammar takes `tokens` one at a time, each allowed by the mask first."""
    for token in tokens:
        if not grammar.allowed()[token] or grammar.consume([token]) != 1:
            return False
    return True


#: Text around the tag's pieces, so free text comes near it without writing it.
PIECES = st.sampled_from(["<", "tool", "_call", ">", "<tool", "call>", "\n", " ", "a", "é", "{"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=12))
def test_text_without_the_tag_is_free(parts: list[str]) -> None:
    text = "".join(parts).replace(CALL_TAG, "<tool call>")
    grammar = state()
    assert consumes_all(grammar, ids(text))
    assert grammar.allowed()[END]  # the answer may end anywhere in free text


@settings(max_examples=40, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("ab <>_\n"), max_size=12).filter(lambda t: CALL_TAG not in t),
    st.lists(st.integers(min_value=1, max_value=len(CALL_TAG) - 1), max_size=4),
)
def test_the_tag_opens_the_constraint_however_its_tokens_split_it(
    before: str, cuts: list[int]
) -> None:
    # The tag cut into pieces each tokenized alone: the grammar reads bytes, not tokens.
    edges = [0, *sorted(set(cuts)), len(CALL_TAG)]
    tag = [t for a, b in itertools.pairwise(edges) for t in ids(CALL_TAG[a:b])]
    grammar = state()
    assert consumes_all(grammar, ids(before) + tag)
    assert not grammar.allowed()[END]  # a call opened: it must be finished
    # Only an offered function may follow; the rest of a valid call is admitted.
    assert grammar.valid_prefix(ids("\n<function=get_forecast>\n")) < len(
        ids("\n<function=get_forecast>\n")
    )
    rest = WEATHER.removeprefix(CALL_TAG)
    assert consumes_all(grammar, ids(rest)) and grammar.allowed()[END]


def test_a_call_must_match_the_function_s_schema() -> None:
    for wrong in (
        "\n<function=add>\n<parameter=a>\ntwelve\n</parameter>\n",  # not an integer
        "\n<function=add>\n<parameter=c>\n1\n</parameter>\n",  # not a parameter of add
        "\n<function=add>\n</function>\n</tool_call>",  # a and b are required
        "\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\nok",
    ):
        grammar = state()
        head = ids("Sure.\n\n" + CALL_TAG)
        assert consumes_all(grammar, head)
        tokens = ids(wrong)
        assert grammar.valid_prefix(tokens) < len(tokens), wrong


@pytest.mark.parametrize("most", [1, 2, 3, None])
def test_after_max_calls_no_further_call_can_open(most: int | None) -> None:
    grammar = state(most)
    calls = most or 4
    answer = "Checking.\n\n" + "\n".join([CALL] * calls)
    assert isinstance(parse(answer, BOTH_TOOLS), Calls)
    assert consumes_all(grammar, ids(answer))
    allowed = grammar.allowed()
    assert allowed[END]
    another = ids("\n" + CALL_TAG)
    if most is None:
        assert grammar.valid_prefix(another) == len(another)
    else:
        # Only the end of text: the next call's new line is refused, so is any text.
        assert grammar.valid_prefix(another) == 0
        assert int(allowed.sum()) == 1


def test_qwen_s_single_tag_token_is_allowed_and_opens_the_constraint() -> None:
    tag = ids(CALL_TAG, tag_token=True)
    assert tag == [TAG_ID]  # the tokenizer writes the tag as one token, as Qwen3.5's does
    grammar = state(tag_token=True)
    head = ids("Let me check.\n\n", tag_token=True)
    # llguidance takes every added token for a special one; read as the text it spells, the
    # model's own tag token is allowed in free text and counts as the tag.
    assert consumes_all(grammar, head) and grammar.allowed()[TAG_ID]
    assert consumes_all(grammar, tag) and not grammar.allowed()[END]
    assert consumes_all(grammar, ids(WEATHER.removeprefix(CALL_TAG), tag_token=True))
    assert grammar.allowed()[END]
    # <think> and </think> (non-special added tokens too) are text, <|im_end|> stays special.
    tokens = vocabulary(True).tokenizer
    assert not tokens.is_special_token(1009) and not tokens.is_special_token(TAG_ID)
    assert tokens.is_special_token(END)


def test_the_thinking_is_decoded_without_the_lazy_grammar() -> None:
    """With thinking on, the engine decodes the reasoning without any constraint and, for a
    lazy one, keeps no room for an answer: the reasoning may run to the whole budget, as with
    no tools, and a "<tool_call>" in it opens nothing."""
    method = DecodingMethod.mtp(1).with_constraint(lazy())
    on = GenerationSettings(max_new_tokens=400, thinking=True, method=method)
    assert thinking_limit(on) == 400
    forced = Constraint("lark", tool_call_grammar(BOTH_TOOLS), "tool_choice")
    strict = GenerationSettings(
        max_new_tokens=400, thinking=True, method=DecodingMethod.mtp(1).with_constraint(forced)
    )
    limit = thinking_limit(strict)
    assert limit is not None and limit < 400  # a forced call keeps room for the call
    off = GenerationSettings(max_new_tokens=400, thinking=False, method=method)
    assert thinking_limit(off) is None
