"""Reading what a server sends with a bound on everything, while it arrives: lines, events and
whole bodies. A server is untrusted input: a line that never ends, an event of a gigabyte or
an endless error page must cost a bounded amount of memory, and be refused as soon as it
passes its bound, not after it was read whole (httpx's `iter_lines` and `read` buffer without
limit).

- `iter_lines(byte_chunks)`: the lines of a byte stream, each at most `MAX_LINE_BYTES`;
- `iter_sse(lines)`: the data of each Server-Sent Event, each at most `MAX_EVENT_CHARS`;
- `read_limited(byte_chunks, limit)`: a body's first `limit` bytes, reading no further.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

#: Largest single SSE event accepted (our server's are well under 1 KiB).
MAX_EVENT_CHARS = 1024 * 1024
#: Longest line accepted (an event's data line can be as long as the event).
MAX_LINE_BYTES = MAX_EVENT_CHARS + 64


class TooLargeError(ValueError):
    """A line, an event or a body passed its bound; the message says which."""


#: SSE line ends are CRLF, LF or a lone CR.
_EOL = re.compile(rb"\r\n|\r|\n")


def iter_lines(chunks: Iterable[bytes], max_bytes: int = MAX_LINE_BYTES) -> Iterator[str]:
    """The lines of a byte stream (without their ends), decoded as UTF-8 (bad bytes replaced).
    TooLargeError as soon as a line passes `max_bytes`, ended or not: at most about
    `max_bytes` plus one network read is ever held."""
    pending = bytearray()
    scan = 0  # where the next search for a line end starts: bytes before it hold none
    for chunk in chunks:
        if not chunk:
            continue
        pending += chunk
        start = 0
        while True:
            found = _EOL.search(pending, scan)
            if found is None:
                scan = len(pending)
                break
            if found.group() == b"\r" and found.end() == len(pending):
                scan = found.start()  # maybe the first half of a CRLF split between reads
                break
            if found.start() - start > max_bytes:
                raise TooLargeError(f"a line longer than {max_bytes:,} bytes")
            yield pending[start : found.start()].decode("utf-8", "replace")
            start = scan = found.end()
        if start:
            del pending[:start]
            scan -= start
        if len(pending) > max_bytes:
            raise TooLargeError(f"a line longer than {max_bytes:,} bytes")
    if pending:  # the last line, ended by the end of the stream (or by a lone CR)
        yield pending.rstrip(b"\r").decode("utf-8", "replace")


def iter_sse(lines: Iterable[str], max_chars: int = MAX_EVENT_CHARS) -> Iterator[str]:
    """The data of each event in an SSE stream given line by line (without line ends).

    The SSE format: `field: value` lines, a blank line ends an event, `data` lines join with
    newlines, lines starting with ':' are comments, other fields (event, id, retry) are not
    needed here. TooLargeError as soon as one event passes `max_chars`.
    """
    data: list[str] = []
    size = 0
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
            data, size = [], 0
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name != "data":
            continue
        value = value[1:] if value.startswith(" ") else value
        size += len(value) + 1
        if size > max_chars:
            raise TooLargeError(f"an event longer than {max_chars:,} characters")
        data.append(value)
    if data:  # a stream cut without the final blank line: the event is still whole data
        yield "\n".join(data)


def read_limited(chunks: Iterable[bytes], limit: int) -> tuple[bytes, bool]:
    """(the first `limit` bytes of the stream, whether more followed). Stops reading at the
    first chunk past the limit, so an endless body costs one network read more than `limit`."""
    kept = bytearray()
    for chunk in chunks:
        kept += chunk
        if len(kept) > limit:
            return bytes(kept[:limit]), True
    return bytes(kept), False
