"""Byte counts as people read them: one formatter for every panel, command and message."""

from __future__ import annotations

import re

NBSP = "\u00a0"
#: Joins "tok/" and "s": Qt breaks a line after a slash ("tok/" then "s" on the next line).
WORD_JOINER = "\u2060"
#: Between figures: the dot stays with the figure before it, so no line starts with "·".
FIGURE_SEPARATOR = f"{NBSP}{NBSP}·  "
# A number and its unit ("41.2 tok/s", "120 ms", "1.8 MB", "512 tokens"), and a label glued to
# its number ("TTFT 120 ms", "n=1" has no space): a line may break between figures, not inside.
_NUMBER_UNIT = re.compile(
    r"(?<=\d) (?=(?:tok/s|tokens?|chunks/s|chunks?|ms|s|B|KB|MB|GB|TB|GiB|MiB|%|×|x)(?![\w/]))"
)
_LABEL_NUMBER = re.compile(r"(?<=\bTTFT) (?=\d)")


def format_bytes(size: int | None) -> str:
    """Decimal units, as file managers show them: 950 B, 12.3 KB, 1.4 MB, 2.05 GB."""
    if size is None:
        return "unknown"
    if size < 1000:
        return f"{size} B"
    value, unit = float(size), "B"
    for unit in ("KB", "MB", "GB", "TB"):  # noqa: B007 (the unit reached is the one shown)
        value /= 1000
        if value < 999.95:
            break
    # Two decimals for a few GB: "1.40 GB" vs "1.45 GB" matters when RAM is tight.
    return f"{value:.2f} {unit}" if unit in ("GB", "TB") and value < 10 else f"{value:.1f} {unit}"


def count(number: int, noun: str) -> str:
    """ "1 token", "2 tokens", "1,024 tokens": a count with its noun in the right number."""
    return f"{number:,} {noun if number == 1 else noun + 's'}"


def duration(seconds: float, places: int = 1) -> str:
    """A time as people read it: "0.4 ms", "42 ms" below a tenth of a second (where "0.0 s"
    would say nothing), else seconds with `places` decimals ("1.3 s")."""
    if seconds < 0.01:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 0.1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.{places}f} s"


def ttft_text(seconds: float) -> str:
    """A time to first token, in milliseconds as the figures line shows it: "41 ms",
    "1,204 ms", and one decimal below 10 ms ("0.6 ms", not "0 ms", when the whole prompt
    was reused)."""
    milliseconds = seconds * 1000
    return f"{milliseconds:.1f} ms" if milliseconds < 10 else f"{milliseconds:,.0f} ms"


def keep_units(text: str) -> str:
    """`text` with a no-break space between each number and its unit, so a wrapped label never
    shows "41.2" at the end of one line and "tok/s" at the start of the next (nor "tok/" and
    "s" on two lines)."""
    text = _LABEL_NUMBER.sub(NBSP, _NUMBER_UNIT.sub(NBSP, text))
    for rate in ("tok/s", "chunks/s"):
        text = text.replace(rate, rate.replace("/", "/" + WORD_JOINER))
    return text


def plain_figures(text: str) -> str:
    """A figures line as plain text: `keep_units`' no-break spaces as spaces, its word joiners
    gone (what is read back, searched or compared)."""
    return text.replace(NBSP, " ").replace(WORD_JOINER, "")


def join_figures(parts: list[str]) -> str:
    """Figures on one line, "a  ·  b  ·  c", wrapping only after a dot, and the last two kept
    together so a wrapped line never ends in one figure alone ("· 0.1 s")."""
    if len(parts) >= 2:
        last = f"{parts[-2]}  ·  {parts[-1]}".replace(" ", NBSP)
        parts = [*parts[:-2], last]
    return FIGURE_SEPARATOR.join(parts)


__all__ = [
    "FIGURE_SEPARATOR",
    "NBSP",
    "WORD_JOINER",
    "count",
    "duration",
    "format_bytes",
    "join_figures",
    "keep_units",
    "plain_figures",
    "ttft_text",
]
