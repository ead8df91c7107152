"""A link as the user must see it before opening it: the real target, nothing spoofable.

Model output can hide the target of a link: bidirectional overrides reorder what is shown,
zero-width and control characters hide parts, and look-alike letters (Cyrillic "а") fake a
hostname. The confirmation shows the host in punycode (the form the browser connects to) next
to its Unicode form, and every invisible or control character as a visible \\u escape.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from urllib.parse import urlsplit

#: Categories never shown raw: controls, format (bidi, zero-width), separators, private use,
#: unassigned and surrogates.
_HIDDEN = {"Cc", "Cf", "Zl", "Zp", "Co", "Cn", "Cs"}
MAX_SHOWN = 400


def visible(text: str, *, limit: int = MAX_SHOWN) -> str:
    """`text` with every control, format or non-space whitespace character as \\uXXXX."""
    out: list[str] = []
    for char in text[:limit]:
        if unicodedata.category(char) in _HIDDEN or (char.isspace() and char != " "):
            out.append(f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}")
        else:
            out.append(char)
    if len(text) > limit:
        out.append(f"… ({len(text) - limit:,} more characters)")
    return "".join(out)


def ascii_host(host: str) -> str | None:
    """The hostname as the browser resolves it (IDNA/punycode), None if it is not valid."""
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return None


@dataclass(frozen=True)
class LinkTarget:
    scheme: str
    host: str  # as written, made visible
    ascii_host: str | None  # punycode, None when invalid
    address: str  # the whole link, made visible

    @property
    def host_is_deceptive(self) -> bool:
        """The written host differs from what the browser connects to (non-ASCII letters, or
        hidden characters), so the user must read the punycode form."""
        return self.ascii_host is None or self.ascii_host.lower() != self.host.lower()

    def describe(self) -> str:
        lines = [f"Address: {self.address}"]
        if self.ascii_host is None:
            lines.append(f"Host: {self.host} (not a valid host name)")
        elif self.host_is_deceptive:
            lines.append(
                f"Host: {self.ascii_host}  (the answer writes it as {self.host}; the "
                "punycode form is the real one)"
            )
        else:
            lines.append(f"Host: {self.ascii_host}")
        return "\n".join(lines)


def link_target(url: str) -> LinkTarget:
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        parts, host = None, ""
    scheme = parts.scheme.lower() if parts is not None else ""
    punycode = ascii_host(host) if host else None
    address = url
    if parts is not None and punycode is not None and host and host in parts.netloc.lower():
        # The address as the browser sends it: the host in punycode, never look-alike letters.
        start = parts.netloc.lower().index(host)
        netloc = parts.netloc[:start] + punycode + parts.netloc[start + len(host) :]
        address = parts._replace(netloc=netloc).geturl()
    return LinkTarget(scheme, visible(host, limit=255), punycode, visible(address))
