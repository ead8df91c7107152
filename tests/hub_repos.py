"""Hub repos for `HubServer` tests (small generated files, safetensors written by hand), and
pointing the real `huggingface_hub` client at a `HubServer` for one test: `hub_env`."""

from __future__ import annotations

import hashlib
import json
import struct
import time
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from qwen_mtp_desktop.devtools.hub_server import HubServer

Tensor = tuple[str, list[int], bytes]  # (safetensors dtype, shape, raw little-endian bytes)


def safetensors_bytes(
    tensors: Mapping[str, Tensor], metadata: dict[str, str] | None = None
) -> bytes:
    """A safetensors file: 8-byte little-endian header length, JSON header (padded to 8), data."""
    header: dict[str, Any] = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for name, (dtype, shape, blob) in tensors.items():
        header[name] = {
            "dtype": dtype,
            "shape": shape,
            "data_offsets": [offset, offset + len(blob)],
        }
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blob for _, _, blob in tensors.values())


def f32(shape: list[int], seed: int) -> Tensor:
    """An F32 tensor of distinct, reproducible bytes."""
    count = 1
    for dim in shape:
        count *= dim
    return "F32", shape, struct.pack(f"<{count}f", *(seed + i * 0.5 for i in range(count)))


def write_repo(root: Path, repo_id: str, files: Mapping[str, bytes]) -> Path:
    """root/ORG/NAME with `files` ({path in repo: content}); returns the repo folder."""
    folder = root / repo_id
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return folder


def model_files(*, sharded: bool = False, big: bool = False) -> dict[str, bytes]:
    """A small checkpoint repo: config, a nested text file, weights with `mtp.*` tensors
    (one file, or two shards and `model.safetensors.index.json`), and with `big` a file over
    1 MiB that is LFS by size alone."""
    config = {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5"}
    files = {
        "config.json": json.dumps(config).encode(),
        "README.md": b"---\nlicense: apache-2.0\n---\n# tiny\n",
        "tokenizer/vocab.txt": b"\n".join(b"tok%d" % i for i in range(50)),
    }
    body = {"model.embed.weight": f32([16, 8], 1), "model.norm.weight": f32([8], 2)}
    mtp = {"mtp.fc.weight": f32([8, 16], 3), "mtp.norm.weight": f32([8], 4)}
    if sharded:
        shards = {"model-00001-of-00002.safetensors": body, "model-00002-of-00002.safetensors": mtp}
        weight_map = {name: shard for shard, tensors in shards.items() for name in tensors}
        total = sum(len(t[2]) for tensors in shards.values() for t in tensors.values())
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        files["model.safetensors.index.json"] = json.dumps(index).encode()
        files.update({shard: safetensors_bytes(tensors) for shard, tensors in shards.items()})
    else:
        files["model.safetensors"] = safetensors_bytes(body | mtp)
    if big:
        files["extra/big.dat"] = hashlib.sha256(b"big").digest() * (40 * 1024 + 3)
    return files


def hub_env(
    monkeypatch: pytest.MonkeyPatch, hub: HubServer, *, cache_dir: Path | None = None
) -> Path:
    """Point the real huggingface_hub client (and child processes) at `hub` for one test.

    huggingface_hub reads HF_ENDPOINT, HF_HUB_OFFLINE, the token file and cache locations into
    `huggingface_hub.constants` at import time, so setting the environment alone is too late
    in this process: the constants the client reads at call time are patched too (all undone
    with the test's monkeypatch; nothing is reloaded). Tests run with HF_HUB_OFFLINE=1
    (tests/conftest.py); this turns it off. No ambient token is sent: HF_TOKEN is unset and the
    token file points nowhere, so a test passes `token=` when it wants one.

    Returns the hub cache folder (default: `hf-cache` beside `hub.root`).
    """
    from huggingface_hub import constants
    from huggingface_hub.utils import _cache_manager, _detect_agent

    cache = cache_dir or hub.root.parent / "hf-cache"
    cache.mkdir(parents=True, exist_ok=True)
    for name in (
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_OIDC_RESOURCE",
        "HUGGINGFACE_CO_STAGING",
    ):
        monkeypatch.delenv(name, raising=False)
    env = {
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "TRANSFORMERS_OFFLINE": "0",
        "HF_HOME": str(cache / "home"),
        "HF_HUB_CACHE": str(cache),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    patches: dict[str, object] = {
        "ENDPOINT": hub.url,
        "HUGGINGFACE_CO_URL_TEMPLATE": hub.url + "/{repo_id}/resolve/{revision}/{filename}",
        "HF_HUB_OFFLINE": False,
        "HF_HUB_CACHE": str(cache),
        "HF_TOKEN_PATH": str(cache / "home" / "no-token"),
        "HF_STORED_TOKENS_PATH": str(cache / "home" / "no-stored-tokens"),
    }
    for name, setting in patches.items():
        monkeypatch.setattr(constants, name, setting)
    monkeypatch.setattr(_cache_manager, "HF_HUB_CACHE", str(cache))
    # huggingface_hub fetches an "agent harness" registry from the endpoint once per process
    # (for its User-Agent) and caches it in the user's HF_HOME: an empty one, for this test.
    monkeypatch.setattr(constants, "AGENT_HARNESSES_PATH", str(cache / "home" / "agents.json"))
    monkeypatch.setattr(_detect_agent, "_registry", {"standardEnvVars": [], "harnesses": {}})
    return cache


def skip_retry_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """huggingface_hub waits between retries (1 s, Retry-After + 1 s, backoff): record the
    waits instead of sleeping them, so fault tests stay fast. Returns the list of waits."""
    from huggingface_hub import file_download
    from huggingface_hub.utils import _http

    waits: list[float] = []
    fake = types.SimpleNamespace(
        **{n: getattr(time, n) for n in dir(time) if not n.startswith("_")}
    )
    fake.sleep = waits.append
    for module in (file_download, _http):
        monkeypatch.setattr(module, "time", fake)
    return waits


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
