"""The Host header, read strictly (RFC 9110 / 3986: `host [ ":" port ]`).

While the server listens on loopback it answers only requests addressed to a loopback name,
so a web page that rebinds its own DNS name to 127.0.0.1 cannot reach the model. That check is
only as good as the parser: a lenient one took "localhost:80@evil.example" or
"[::1]evil.example" for localhost. Here anything that is not exactly a host name, an IPv4
address or a bracketed IPv6 address, with at most a numeric port, is no host at all.
"""

from __future__ import annotations

import ipaddress
import re

#: A DNS name: dot-separated labels of letters, digits and inner hyphens (a trailing dot is
#: the fully qualified form of the same name).
_NAME = re.compile(
    r"(?=.{1,253}\.?\Z)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)*"
    r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.?\Z"
)
_PORT = re.compile(r"[0-9]{1,5}\Z")


def host_name(header: str) -> str | None:
    """The host of a Host header, lower-case, without its port or brackets ("[::1]:80" ->
    "::1", "LocalHost." -> "localhost"); None when the header is not a valid host."""
    if not header or header != header.strip() or not header.isascii():
        return None
    text = header.lower()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[1:end], text[end + 1 :]
        try:
            if ipaddress.ip_address(host).version != 6:
                return None
        except ValueError:
            return None
        host = str(ipaddress.ip_address(host))
    else:
        host, colon, port = text.partition(":")
        rest = colon + port
        if not _NAME.match(host):
            return None
        host = host.rstrip(".")
    if rest and (not rest.startswith(":") or not _PORT.match(rest[1:]) or int(rest[1:]) > 65535):
        return None
    return host
