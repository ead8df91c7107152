"""Split model output into Markdown text and fenced code segments, also while it streams.

The chat view renders each finished segment once; only the open tail changes as tokens arrive,
so the cost of a streamed chunk does not grow with the answer's length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

SegmentKind = Literal["markdown", "code"]

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")


@dataclass(frozen=True)
class Segment:
    kind: SegmentKind
    text: str
    #: The code block's language from its info string ("" when none), for highlighting.
    language: str = ""


def split_segments(text: str) -> list[Segment]:
    """The whole text as segments (an unclosed fence runs to the end, as Markdown says)."""
    segmenter = StreamingSegmenter()
    return segmenter.feed(text) + segmenter.close()


class StreamingSegmenter:
    """Feed text deltas; get back the segments that became complete.

    A Markdown segment completes at a blank line (end of a paragraph, list or table) or where a
    code fence opens; a code segment completes at its closing fence. `tail` is the segment
    still open.
    """

    def __init__(self) -> None:
        # The current line, not yet ended by "\n", kept in pieces: joining only when the line
        # ends keeps a long line's cost linear.
        self._pending: list[str] = []
        self._lines: list[str] = []  # complete lines of the open segment
        self._code_fence: str | None = None  # the opening fence while inside a code block
        self._language = ""

    @property
    def in_code(self) -> bool:
        return self._code_fence is not None

    @property
    def _pending_line(self) -> str:
        return "".join(self._pending)

    @property
    def tail(self) -> Segment | None:
        pending = self._pending_line
        lines = [*self._lines, pending] if pending else self._lines
        text = "\n".join(lines)
        if self._code_fence is not None:
            return Segment("code", text, self._language)
        return Segment("markdown", text) if text.strip() else None

    @property
    def tail_text(self) -> str:
        """The open segment as streamed so far, ending with the newline that ended its last
        complete line: the next delta continues it exactly (`tail.text` drops that newline)."""
        if self._pending or not self._lines:
            tail = self.tail
            return tail.text if tail is not None else ""
        return "\n".join(self._lines) + "\n"

    def feed(self, delta: str) -> list[Segment]:
        if "\n" not in delta:
            if delta:
                self._pending.append(delta)
            return []
        finished: list[Segment] = []
        parts = delta.split("\n")
        parts[0] = self._pending_line + parts[0]
        last = parts.pop()
        self._pending = [last] if last else []
        for line in parts:
            segment = self._add_line(line)
            if segment is not None:
                finished.append(segment)
        return finished

    def close(self) -> list[Segment]:
        """End of stream: the last line completes, and the open segment ends as it stands."""
        finished = self.feed("\n") if self._pending else []
        tail = self.tail
        self._lines, self._pending = [], []
        self._code_fence, self._language = None, ""
        return finished + ([tail] if tail is not None else [])

    def _add_line(self, line: str) -> Segment | None:
        if self._code_fence is not None:
            stripped = line.strip()
            if stripped.startswith(
                self._code_fence[0] * len(self._code_fence)
            ) and not stripped.strip(self._code_fence[0]):
                segment = Segment("code", "\n".join(self._lines), self._language)
                self._lines, self._code_fence, self._language = [], None, ""
                return segment
            self._lines.append(line)
            return None
        match = _FENCE.match(line)
        if match is not None:
            before = self._take_markdown()
            self._code_fence = match.group("fence")
            self._language = (
                match.group("info").strip().split(" ")[0] if match.group("info") else ""
            )
            return before
        if not line.strip():
            return self._take_markdown()
        self._lines.append(line)
        return None

    def _take_markdown(self) -> Segment | None:
        text = "\n".join(self._lines)
        self._lines = []
        return Segment("markdown", text) if text.strip() else None


def first_page(segments: list[Segment], limit: int) -> tuple[list[Segment], list[Segment]]:
    """(the segments to render now, the rest) so that at most `limit` characters render at
    once: rendering cost grows with the text, so an answer of any size costs at most a page
    until the user asks for more. A segment larger than the page is cut at the limit."""
    page: list[Segment] = []
    used = 0
    for index, segment in enumerate(segments):
        room = limit - used
        if len(segment.text) <= room:
            page.append(segment)
            used += len(segment.text)
            continue
        if room > 0 or not page:  # cut: the rest of this segment opens the next page
            cut = max(room, 1)
            page.append(Segment(segment.kind, segment.text[:cut], segment.language))
            rest = Segment(segment.kind, segment.text[cut:], segment.language)
            return page, [rest, *segments[index + 1 :]]
        return page, segments[index:]
    return page, []


_LINE_MARKERS = re.compile(
    r"(?m)^[ \t]{0,3}(?:#{1,6}[ \t]+|>[ \t]?|[-*+][ \t]+|\d{1,9}[.)][ \t]+)+"
)
_FENCE_LINES = re.compile(r"(?m)^[ \t]{0,3}(?:`{3,}|~{3,}).*$")
_RULE_LINES = re.compile(r"(?m)^[ \t]{0,3}(?:[-*_=][ \t]*){3,}$|^[ \t|:-]*-{3,}[ \t|:-]*$")
_IMAGES_LINKS = re.compile(r"!?\[([^\]\n]*)\]\([^)\n]*\)")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3}|~~|`+)(?=\S)(.+?)(?<=\S)\1")
_TABLE_BARS = re.compile(r"(?m)^\||\|$|(?<=\s)\|(?=\s)")


def plain_text(markdown: str) -> str:
    """`markdown` as the words a reader sees, for a one-line preview: headings' #, quote and
    list markers, fences, rules, emphasis and code marks and table bars removed, a link or
    image reduced to its text. Each pattern is one linear pass; whitespace is left for the
    caller to collapse."""
    text = _FENCE_LINES.sub("", markdown)
    text = _RULE_LINES.sub("", text)
    text = _LINE_MARKERS.sub("", text)
    text = _IMAGES_LINKS.sub(r"\1", text)
    text = _EMPHASIS.sub(r"\2", text)
    return _TABLE_BARS.sub(" ", text)
