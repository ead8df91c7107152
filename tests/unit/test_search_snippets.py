"""Search snippets (issue 44, minor 17): the line of a message around the searched words, with
them marked, safe whatever the message holds; and the store saying which message matched."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from qwen_mtp_desktop.core.chat.markdown import plain_text
from qwen_mtp_desktop.core.chat.snippets import ELLIPSIS, SNIPPET_CHARS, snippet
from qwen_mtp_desktop.core.chat.store import migrations
from qwen_mtp_desktop.core.chat.store.store import ChatStore

_INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")

# Words of the kind people search for, and text with everything hostile text holds: markup,
# control and bidi characters, runs of whitespace, letters whose case folds oddly.
_words = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12
).filter(lambda w: not any(c.isspace() for c in w))
_pieces = st.one_of(
    _words,
    st.sampled_from(["<b>", "</b>", "<script>alert(1)</script>", "&amp;", "**", "`", "# "]),
    st.sampled_from([" ", "\n", "\t", "   ", "\u202e", "\u200b", "\x00", "\x1b[31m"]),
    st.text(alphabet="xyz", min_size=100, max_size=3000),  # a long run without whitespace
)


def _body(found: str) -> str:
    return found.removeprefix(ELLIPSIS).removesuffix(ELLIPSIS)


def _clean(text: str) -> str:
    return " ".join(_INVISIBLE.sub("", " ".join(text.split())).split())


@settings(max_examples=300, deadline=None)
@given(
    pieces=st.lists(_pieces, max_size=40),
    terms=st.lists(_words, min_size=1, max_size=4),
    data=st.data(),
)
@example(pieces=["<b>", "needle", "</b>"], terms=["needle"], data=None)
def test_snippet_is_bounded_clean_and_marks_only_searched_words(
    pieces: list[str], terms: list[str], data: st.DataObject | None
) -> None:
    if data is not None and pieces and data.draw(st.booleans()):
        # Often the text does hold a searched word, as the store's match promises.
        pieces.insert(data.draw(st.integers(0, len(pieces))), terms[0])
    text = " ".join(pieces)
    found = snippet(text, terms)
    shown = found.text
    body = _body(shown)
    assert len(body) <= SNIPPET_CHARS
    # One line, nothing invisible or direction-changing, markup kept as the characters it is.
    assert not _INVISIBLE.search(shown) and "  " not in shown and shown == shown.strip()
    assert body in _clean(text)
    for part in found.marked:
        assert any(re.fullmatch(re.escape(t), part, re.IGNORECASE) for t in terms), part
    # A searched word in the text is in the snippet, marked (when it is one a row can show).
    visible = [t for t in terms if len(t) <= 40 and not _INVISIBLE.search(t) and t in text]
    if visible:
        assert found.marked, (text[:200], terms, shown)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=2000), terms=st.lists(_words, min_size=1, max_size=3))
def test_snippet_of_markdown_never_fails(text: str, terms: list[str]) -> None:
    found = snippet(text, terms, plain=plain_text)
    assert len(_body(found.text)) <= SNIPPET_CHARS


def test_snippet_of_a_huge_message_without_whitespace() -> None:
    text = "a" * 5_000_000 + "Needle" + "<i>" * 1_000_000
    found = snippet(text, ["needle"])
    assert found.marked == ["Needle"]
    assert found.text.startswith(ELLIPSIS) and found.text.endswith(ELLIPSIS)
    assert len(_body(found.text)) <= SNIPPET_CHARS


def test_snippet_starts_near_the_match_at_a_word() -> None:
    text = "Here is a long introduction that goes on and on before the quicksort algorithm appears"
    found = snippet(text, ["QUICKSORT"])
    assert found.text == "…on before the quicksort algorithm appears"
    assert found.marked == ["quicksort"]
    assert snippet("no such word", ["zz"]).parts == (("no such word", False),)


@pytest.fixture(params=["fts5", "like"])
def search_store(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    if request.param == "like":
        monkeypatch.setattr(migrations, "fts5_trigram_available", lambda: False)
    with ChatStore(tmp_path / "chats.sqlite3") as store:
        assert store.search_backend == request.param
        yield store


def test_store_names_the_matching_message_with_its_snippet(search_store: ChatStore) -> None:
    store = search_store
    chat = store.create_conversation("Sorting")
    question = store.add_message(chat.id, "user", "How do I sort a list?")
    answer = store.add_message(
        chat.id, "assistant", "# Sorting\nUse **sorted()**; the <b>quicksort</b> idea is older."
    )
    store.add_message(chat.id, "user", "Thanks, and dictionaries?")
    titled = store.create_conversation("Quicksort notes")  # the title alone matches
    found = {s.id: s for s in store.list_conversations("QUICKSORT idea")}
    match = found[chat.id].match
    assert match is not None and match.message_id == answer.id and match.role == "assistant"
    assert match.shown
    # Markdown marks go, markup stays as its characters, every searched word is marked.
    assert match.snippet.text == "…the <b>quicksort</b> idea is older."
    assert match.snippet.marked == ["quicksort", "idea"]
    by_title = {s.id: s.match for s in store.list_conversations("quicksort")}
    assert set(by_title) == {chat.id, titled.id} and by_title[titled.id] is None
    # The preview is still the last message; without a search there is no match.
    assert found[chat.id].preview == "Thanks, and dictionaries?"
    assert all(s.match is None for s in store.list_conversations())
    # The newest message that holds every word; short words (LIKE in FTS mode too).
    (sorting,) = [s for s in store.list_conversations("sort") if s.id == chat.id]
    assert sorting.match is not None and sorting.match.message_id == answer.id
    (short,) = store.list_conversations("do I")
    assert short.match is not None and short.match.message_id == question.id
    assert short.match.snippet.marked == ["do", "I", "i"]  # substrings, as the search
