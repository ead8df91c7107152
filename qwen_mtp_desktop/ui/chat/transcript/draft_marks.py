"""Drafted spans marked inside the rendered answer (the Drafts toggle), Markdown kept.

The engine reports which characters of the answer's source text came from accepted drafts;
the view shows rendered Markdown, whose text is the source's visible characters in the same
order with the markup (`**`, `#`, `](url)`, fences) left out. So each rendered character is
matched to the next equal source character at most LOOKAHEAD ahead (markup between two
visible characters is short); one that has no match nearby (a list number Qt draws itself)
stays unmarked and does not move the match on. The cost is linear in the answer's length:
each rendered character costs one bounded `str.find`, and the source is consumed once, in
order, across all the documents and code blocks of a message, also while it streams.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor, QTextDocument

#: How far ahead in the source a rendered character is looked for.
LOOKAHEAD = 200
#: Characters of a document that stand for no source character: block and line separators,
#: table cell and frame markers, an object (an image placeholder is text, not one of these).
_STRUCTURE = frozenset("\u2029\u2028\ufdd0\ufdd1\ufffc")
#: Consumed source kept before it is dropped from the buffer (amortises the trimming).
_TRIM_CHARS = 4096


class DraftMarks:
    """Tints the drafted characters of one message's rendered documents, in order.

    `feed()` the source text as it arrives, then `mark()` each document (or its part just
    rendered) in the order the source produced them. `ranges` is read as it grows.
    """

    def __init__(self, ranges: Sequence[tuple[int, int]], tint: QColor) -> None:
        self._ranges = ranges
        self._range = 0  # index of the first range that does not end before the match
        self._format = QTextCharFormat()
        self._format.setBackground(tint)
        self._pending: list[str] = []
        self._buffer = ""  # the source from `_base` on (the part not yet matched, mostly)
        self._base = 0
        self._next = 0  # the source position the next rendered character is looked for at
        #: Rendered characters matched to the source / left unmatched (for tests and logs).
        self.matched = 0
        self.unmatched = 0

    def feed(self, text: str) -> None:
        if text:
            self._pending.append(text)

    def _drafted(self, position: int) -> bool:
        ranges = self._ranges
        while self._range < len(ranges) and ranges[self._range][1] <= position:
            self._range += 1
        return self._range < len(ranges) and ranges[self._range][0] <= position

    @staticmethod
    def _opening_fence_end(buffer: str, at: int) -> int:
        """Where the fence line that opens the next code block ends (-1: none near). A code
        block right after another starts after the first one's closing fence, which is still
        ahead: a fence line followed, past blank lines, by another fence line is that closing
        one, so the search moves on (else the second block's info string, e.g. "py", could
        match its code's first letters)."""
        line_end = -1
        limit = at + LOOKAHEAD
        while at < limit:
            fences = (buffer.find("```", at, limit), buffer.find("~~~", at, limit))
            fence = min((f for f in fences if f >= 0), default=-1)
            end = buffer.find("\n", fence) if fence >= 0 else -1
            if end < 0:
                break
            line_end = end
            after = end + 1
            while after < len(buffer) and buffer[after] in " \t\n":
                after += 1
            if not buffer.startswith(("```", "~~~"), after):
                break
            at = after
        return line_end

    def mark(self, document: QTextDocument, start: int = 0, *, code: bool = False) -> int:
        """Tint the drafted characters of `document` from `start` on; returns how many.

        `code`: what follows is a fenced code block's code: the source's fence line (whose
        info string could match the code's first letters) is passed over first."""
        if self._pending:
            self._buffer += "".join(self._pending)
            self._pending = []
        buffer, base = self._buffer, self._base
        if code:
            line_end = self._opening_fence_end(buffer, self._next - base)
            if line_end >= 0:
                self._next = base + line_end + 1
        runs: list[tuple[int, int]] = []
        run_start = -1
        # Only the blocks from `start` on are read (block text has no separators, so each
        # character's position is the block's plus its index): the cost is the new text's.
        block = document.findBlock(start)
        while block.isValid():
            text, offset = block.text(), block.position()
            following = block.next()
            if not following.isValid():
                # Trailing white space (highlighted code ends with one) would match far ahead.
                text = text.rstrip()
            for index in range(max(start - offset, 0), len(text)):
                char = text[index]
                found = -1
                if char not in _STRUCTURE:
                    at = self._next - base
                    found = buffer.find(char, at, at + LOOKAHEAD)
                if found < 0:
                    self.unmatched += char not in _STRUCTURE
                    drafted = False
                else:
                    self.matched += 1
                    self._next = base + found + 1
                    drafted = self._drafted(base + found)
                if drafted and run_start < 0:
                    run_start = offset + index
                elif not drafted and run_start >= 0:
                    runs.append((run_start, offset + index))
                    run_start = -1
            if run_start >= 0:  # a run ends with its block
                runs.append((run_start, offset + len(text)))
                run_start = -1
            block = following
        consumed = self._next - base
        if consumed > _TRIM_CHARS and consumed > len(buffer) // 2:
            self._buffer, self._base = buffer[consumed:], self._next
        cursor = QTextCursor(document)
        for low, high in runs:
            cursor.setPosition(low)
            cursor.setPosition(high, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(self._format)
        return sum(high - low for low, high in runs)
