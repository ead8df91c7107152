"""A search hit's snippet: a short line of a message around the first searched word, with every
searched word in it marked.

The snippet is data (text parts, each marked or not), never markup: whoever shows it draws the
parts as text, so a message holding HTML or Markdown shows its characters. Hostile text is bounded
here: only a window around the first match is ever looked at after the one linear search for it
(a message of megabytes without whitespace costs that search and nothing more), whitespace runs
become one space, and control and bidirectional-override characters are dropped (they could
reorder or hide what the row shows).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

#: The snippet's length in characters: a chat-list row shows about 30 of them, its tooltip all.
SNIPPET_CHARS = 120
#: Words kept before the first match, at most this many characters: the row is narrow, so the
#: match must stand near its start.
LEAD_CHARS = 16
ELLIPSIS = "…"

# C0/C1 controls (whitespace among them becomes a space first), and the characters that change
# the direction or visibility of what follows (bidi embeddings, overrides and isolates, the
# zero-width joiners and marks), so a snippet cannot disguise itself.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0e-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]"
)


@dataclass(frozen=True)
class Snippet:
    """The snippet's parts in order: (text, marked). Marked parts are searched words."""

    parts: tuple[tuple[str, bool], ...]

    @property
    def text(self) -> str:
        return "".join(part for part, _marked in self.parts)

    @property
    def marked(self) -> list[str]:
        return [part for part, marked in self.parts if marked]


@lru_cache(maxsize=16)
def _pattern(terms: tuple[str, ...]) -> re.Pattern[str] | None:
    # Longest first, so of two overlapping words the longer one is marked whole.
    words = sorted({t for t in terms if t}, key=lambda t: (-len(t), t))
    if not words:
        return None
    return re.compile("|".join(re.escape(word) for word in words), re.IGNORECASE)


def search_terms(search: str) -> tuple[str, ...]:
    """The words of a search as the store matches them: split on whitespace, each once."""
    return tuple(dict.fromkeys(search.replace("\x00", " ").split()))


def _clean(text: str) -> str:
    return " ".join(_INVISIBLE.sub("", " ".join(text.split())).split())


def snippet(
    text: str,
    terms: Sequence[str],
    *,
    width: int = SNIPPET_CHARS,
    plain: Callable[[str], str] | None = None,
) -> Snippet:
    """A one-line snippet of `text` around its first searched word (case-insensitive), at most
    `width` characters plus the ellipses that say text was left out, with each searched word in
    it marked. `plain` (Markdown to its words, say) is applied to the window around the match
    only. Without a match it is the text's start, unmarked."""
    width = max(width, 8)
    pattern = _pattern(tuple(terms))
    found = pattern.search(text) if pattern is not None else None
    at = found.start() if found is not None else 0
    # A generous raw window: whitespace and invisible characters may collapse away.
    start = max(at - 4 * LEAD_CHARS, 0)
    window = text[start : at + 8 * width]
    clipped_end = at + 8 * width < len(text)
    if plain is not None:
        window = plain(window)
    line = _clean(window)
    # Where the match stands in the cleaned line; the lead before it is kept short.
    inner = pattern.search(line) if pattern is not None else None
    cut = 0
    if inner is not None and inner.start() > LEAD_CHARS:
        cut = inner.start() - LEAD_CHARS
        space = line.find(" ", cut, inner.start())
        if space != -1:
            cut = space + 1  # begin at a word, not inside one
    head = start > 0 or cut > 0
    line = line[cut:]
    tail = clipped_end or len(line) > width
    line = line[:width].rstrip() if tail else line
    parts: list[tuple[str, bool]] = []
    if head and line:
        parts.append((ELLIPSIS, False))
    position = 0
    if pattern is not None:
        for match in pattern.finditer(line):
            if match.start() > position:
                parts.append((line[position : match.start()], False))
            parts.append((match.group(), True))
            position = match.end()
    if position < len(line):
        parts.append((line[position:], False))
    if tail and line:
        parts.append((ELLIPSIS, False))
    return Snippet(tuple(parts))
