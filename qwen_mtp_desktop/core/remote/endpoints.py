"""The saved remote endpoints: name, base URL, model, and whether a key is kept for it.

The file (`remote_endpoints.json` in the config folder) holds no secrets: keys live in the OS
keychain (core.remote.keys). It is written atomically and read as untrusted input: a damaged
file or a bad entry is skipped with a note, never a crash, and the rest still loads.
"""

from __future__ import annotations

import ipaddress
import json
import re
import secrets
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from qwen_mtp_desktop.core.errors import UserFacingError
from qwen_mtp_desktop.core.files.fileio import atomic_write_text
from qwen_mtp_desktop.core.files.paths import app_paths
from qwen_mtp_desktop.core.files.safe_files import FileKind, UnsafeFileError, read_json_file

SCHEMA_VERSION = 1
FILE_NAME = "remote_endpoints.json"
#: How a remote model is named where a model folder would be (the chat store's model_dir).
REF_PREFIX = "remote:"
MAX_ENDPOINTS = 200
MAX_NAME_CHARS = 120
MAX_URL_CHARS = 2000
MAX_MODEL_CHARS = 500
_ID = re.compile(r"^[a-z0-9]{1,32}$")
_KIND = FileKind("The remote servers file", "Add the remote servers again in the model picker.")


class EndpointError(UserFacingError):
    """A base URL or endpoint entry the app cannot use."""

    code = "BAD_ENDPOINT"


@dataclass(frozen=True)
class RemoteEndpoint:
    """One OpenAI-compatible server and the model to chat with there."""

    id: str
    name: str
    base_url: str
    model: str
    #: Whether an API key is kept for it (in the keychain, or for this session only).
    has_key: bool = False

    @property
    def ref(self) -> Path:
        return remote_ref(self.id)


def new_id() -> str:
    return secrets.token_hex(6)


def remote_ref(endpoint_id: str) -> Path:
    """The stand-in for a model folder that names this endpoint (stored with a conversation)."""
    return Path(REF_PREFIX + endpoint_id)


def endpoint_id(model_dir: Path | str) -> str | None:
    """The endpoint id when `model_dir` names a remote model, else None."""
    text = str(model_dir)
    if not text.startswith(REF_PREFIX):
        return None
    ident = text[len(REF_PREFIX) :]
    return ident if _ID.match(ident) else None


def normalize_base_url(text: str) -> str:
    """`text` as a base URL the client can use: http(s), a host, no credentials, no query.
    A URL without a path gets `/v1` (the OpenAI convention; OVMS uses `/v3`, so give it)."""
    raw = text.strip()
    if not raw:
        raise EndpointError(
            "The server address is empty.", "Enter e.g. http://192.168.1.20:8000/v1"
        )
    if len(raw) > MAX_URL_CHARS or any(ord(c) < 33 or c == "\x7f" for c in raw):
        raise EndpointError(
            "The server address has spaces, control characters or is too long.",
            "Enter e.g. http://192.168.1.20:8000/v1",
        )
    if "://" not in raw:
        raw = "http://" + raw
    try:
        parts = urlsplit(raw)
        port = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        raise EndpointError(f"The server address is not a valid URL ({exc}).") from None
    if parts.scheme.lower() not in ("http", "https"):
        raise EndpointError(
            f"The server address must start with http:// or https://, not {parts.scheme}://."
        )
    if not parts.hostname:
        raise EndpointError(
            "The server address has no host name.", "Enter e.g. http://host:8000/v1"
        )
    if parts.username is not None or parts.password is not None:
        raise EndpointError(
            "The server address contains a user name or password.",
            "Remove it from the address and enter the API key in its own field.",
        )
    if parts.query or parts.fragment:
        raise EndpointError("The server address must not have a query (?...) or fragment (#...).")
    path = parts.path.rstrip("/") or "/v1"
    netloc = parts.netloc.lower() if port is None else parts.netloc
    return urlunsplit((parts.scheme.lower(), netloc, path, "", ""))


def is_this_machine(host: str) -> bool:
    """Whether `host` (a name or an IP address as written in a URL) is this computer:
    localhost, a loopback address, this computer's name or an address of one of its network
    interfaces. Nothing is looked up: any other name counts as another computer."""
    name = host.strip().strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name.split("%")[0])
    except ValueError:
        return bool(name) and name == socket.gethostname().lower().rstrip(".")
    mapped = getattr(address, "ipv4_mapped", None)
    if address.is_loopback or address.is_unspecified or (mapped and mapped.is_loopback):
        return True
    return address in _interface_addresses()


def _interface_addresses() -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    import psutil

    found: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for addresses in psutil.net_if_addrs().values():
        for entry in addresses:
            try:
                found.add(ipaddress.ip_address(entry.address.split("%")[0]))
            except ValueError:  # a link-layer (MAC) address
                continue
    return found


def key_in_clear(base_url: str) -> str | None:
    """The host an API key would reach unencrypted (http:// to another computer), else None."""
    parts = urlsplit(base_url)
    host = parts.hostname
    if parts.scheme.lower() != "http" or not host or is_this_machine(host):
        return None
    return host


def key_in_clear_warning(host: str) -> str:
    return (
        f"The server {host} is reached over plain http://, so the API key crosses the network "
        "unencrypted: anyone on the way can read it. Use https://, or reach the server "
        "through an SSH tunnel or a VPN."
    )


def endpoints_file() -> Path:
    return app_paths().config_dir / FILE_NAME


def _text(value: object, limit: int) -> str | None:
    if not isinstance(value, str):
        return None
    value = value.strip()
    if not value or len(value) > limit or any(ord(c) < 32 or c == "\x7f" for c in value):
        return None
    return value


def _endpoint(raw: object) -> RemoteEndpoint | None:
    """One entry as read from the file, or None when any field is unusable."""
    if not isinstance(raw, dict):
        return None
    ident = raw.get("id")
    name = _text(raw.get("name"), MAX_NAME_CHARS)
    model = _text(raw.get("model"), MAX_MODEL_CHARS)
    url = raw.get("base_url")
    has_key = raw.get("has_key", False)
    if not (isinstance(ident, str) and _ID.match(ident)) or name is None or model is None:
        return None
    if not isinstance(url, str) or not isinstance(has_key, bool):
        return None
    try:
        base_url = normalize_base_url(url)
    except EndpointError:
        return None
    return RemoteEndpoint(ident, name, base_url, model, has_key)


@dataclass(frozen=True)
class LoadedEndpoints:
    endpoints: list[RemoteEndpoint]
    #: What was wrong with the file, in plain words (empty when nothing was).
    problems: list[str]


def load_endpoints(path: Path | None = None) -> LoadedEndpoints:
    """The saved endpoints. Never raises on content: bad entries are skipped and named."""
    path = path or endpoints_file()
    try:
        raw = read_json_file(path, kind=_KIND)
    except FileNotFoundError:
        return LoadedEndpoints([], [])
    except (UnsafeFileError, OSError) as exc:
        return LoadedEndpoints([], [f"{exc}"])
    items = raw.get("endpoints") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        return LoadedEndpoints([], [f"The remote servers file ({path}) has no endpoint list."])
    endpoints: list[RemoteEndpoint] = []
    skipped = 0
    seen: set[str] = set()
    for item in items[:MAX_ENDPOINTS]:
        endpoint = _endpoint(item)
        if endpoint is None or endpoint.id in seen:
            skipped += 1
            continue
        seen.add(endpoint.id)
        endpoints.append(endpoint)
    skipped += max(len(items) - MAX_ENDPOINTS, 0)
    problems = (
        [f"{skipped} damaged entr{'y' if skipped == 1 else 'ies'} in {path} were skipped."]
        if skipped
        else []
    )
    return LoadedEndpoints(endpoints, problems)


def save_endpoints(endpoints: list[RemoteEndpoint], path: Path | None = None) -> None:
    """Write the list atomically (readers see the old file or the new one)."""
    payload = {"schema_version": SCHEMA_VERSION, "endpoints": [asdict(e) for e in endpoints]}
    atomic_write_text(path or endpoints_file(), json.dumps(payload, indent=2) + "\n")


def check_endpoint(name: str, base_url: str, model: str) -> tuple[str, str, str]:
    """The fields as they will be saved, or EndpointError saying which is wrong."""
    url = normalize_base_url(base_url)
    model_text = _text(model, MAX_MODEL_CHARS)
    if model_text is None:
        raise EndpointError("Choose the model to chat with on that server.")
    name_text = _text(name, MAX_NAME_CHARS) or f"{model_text} @ {urlsplit(url).hostname}"
    return name_text[:MAX_NAME_CHARS], url, model_text
