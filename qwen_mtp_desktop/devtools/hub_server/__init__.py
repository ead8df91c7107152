"""A Hugging Face hub stand-in on 127.0.0.1, with faults on demand (tests and dev only).

The app downloads models with `huggingface_hub` and reads `mtp.*` tensors out of checkpoints
with HTTP range reads. No hub is reachable from the tests, so this server plays one: the real
client, pointed at it with `HF_ENDPOINT`, must work exactly as against huggingface.co, and a
test can make it fail in the ways networks and CDNs fail.

Repos are plain folders `root/ORG/NAME/...` (nested folders allowed, no git). Each has one
commit whose 40-hex id is a sha1 of its file names and contents; `main` and that id resolve
to it, and a changed file (size or mtime) makes a new one on the next request.

What it reproduces of the real hub (huggingface_hub 1.21's calls):

- `GET /api/models/ORG/NAME[/revision/REV]` (`model_info`, `repo_info`, `snapshot_download`):
  `id`, `sha`, `siblings` (with `?blobs=true`: `size`, `blobId`, `lfs`), `safetensors`
  parameter counts, `config` (`architectures`, `model_type`), `gated`, `private`; `expand`
  keeps only the listed properties, as on the hub.
- `GET /api/models/ORG/NAME/tree/REV[/PATH]?recursive=&expand=` (`list_repo_tree`), paged with
  a `Link: <...>; rel="next"` header like the hub's; `POST .../paths-info/REV`
  (`get_paths_info`); `GET .../refs` (`list_repo_refs`).
- `HEAD`/`GET /ORG/NAME/resolve/REV/PATH` (`hf_hub_download`, `get_hf_file_metadata`,
  `file_exists`, `get_safetensors_metadata`): `X-Repo-Commit`, `ETag` (the git blob sha1 of a
  small file, the quoted sha256 of an LFS file), `Content-Length`, `Accept-Ranges: bytes`;
  `Range: bytes=a-b`, `a-` and `-n` give 206 with `Content-Range`, an unsatisfiable range 416
  with `Content-Range: bytes */SIZE`.
- LFS files (`.bin .safetensors .gguf .onnx`, or over 1 MiB) answer the resolve URL with 302
  and `X-Linked-Etag`, `X-Linked-Size`, as the hub does, to an absolute `Location` on a second
  port of this server (`cdn_url`): another origin, like the hub's CDN. That choice matters to
  the client: on HEAD it follows relative redirects only (a renamed repo) and takes the
  metadata from the 302's headers, then GETs the CDN URL itself and drops the token because
  the host differs; a plain httpx GET follows the redirect and httpx drops the token the same
  way. A relative `Location` would have been followed on HEAD, to a response without
  `X-Repo-Commit`, which the client rejects.
- `GET /api/agent-harnesses`: the registry huggingface_hub fetches once per process (empty).
- Errors carry the hub's `X-Error-Code` so `hf_raise_for_status` raises the right class:
  `RepoNotFound` (401 without a token, 404 with one), `RevisionNotFound` (404),
  `EntryNotFound` (404, with `X-Repo-Commit`), `GatedRepo` (401 without a token, 403 with a
  token that has no access).

Every request is logged (method, path, range, status, body bytes sent, `Authorization`), and
faults fire on demand: see `HubServer.fault`. Other processes reach the same controls over
HTTP: `POST /_faults` (a fault's fields as JSON, or a list of them), `GET /_faults`,
`DELETE /_faults`, `GET /_log`, `DELETE /_log`.

Run `python -m qwen_mtp_desktop.devtools.hub_server ROOT [--port N]`: it prints its URL and
serves until interrupted.

Modules: `repos` (folders as hub repos: hashes, LFS), `faults` (faults, the request log),
`app` (the ASGI app: routes, headers, ranges, faults applied), `server` (`HubServer`).
"""

from __future__ import annotations

from .app import parse_range
from .faults import BODY_KINDS, FAULT_KINDS, Fault, FaultKind, RequestRecord
from .repos import LFS_SUFFIXES, LFS_THRESHOLD, HubFile, RepoState, build_state, lfs_pointer
from .server import HubServer

__all__ = [
    "BODY_KINDS",
    "FAULT_KINDS",
    "LFS_SUFFIXES",
    "LFS_THRESHOLD",
    "Fault",
    "FaultKind",
    "HubFile",
    "HubServer",
    "RepoState",
    "RequestRecord",
    "build_state",
    "lfs_pointer",
    "parse_range",
]
