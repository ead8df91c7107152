"""The hub stand-in (devtools.hub_server) as the real huggingface_hub client and raw httpx see
it: downloads, metadata, ranges, the hub's errors, private and gated repos, and each fault."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from huggingface_hub import HfApi, constants, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile, RepoFolder

from qwen_mtp_desktop.devtools.hub_server import HubServer, parse_range
from tests.hub_repos import (
    hub_env,
    model_files,
    sha256_of,
    skip_retry_waits,
    write_repo,
)

TINY = "acme/tiny"
SHARDED = "acme/sharded"
REPOS = {TINY: model_files(big=True), SHARDED: model_files(sharded=True)}
WEIGHTS = REPOS[TINY]["model.safetensors"]
CONFIG = REPOS[TINY]["config.json"]


def git_blob(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def is_lfs(path: str, content: bytes) -> bool:
    return path.endswith(".safetensors") or len(content) > 1 << 20


@pytest.fixture(scope="module")
def shared_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubServer]:
    """One server for the module (repos hashed once); `hub` resets it for each test."""
    root = tmp_path_factory.mktemp("hub") / "repos"
    for repo_id, files in REPOS.items():
        write_repo(root, repo_id, files)
    with HubServer(root) as hub:
        yield hub


@pytest.fixture
def hub(shared_hub: HubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> HubServer:
    shared_hub.reset()
    hub_env(monkeypatch, shared_hub, cache_dir=tmp_path / "hf-cache")
    return shared_hub


# --- serving ---------------------------------------------------------------------------------


@pytest.mark.parametrize("pinned", [False, True], ids=["main", "sha"])
def test_snapshot_download_is_byte_identical(hub: HubServer, tmp_path: Path, pinned: bool) -> None:
    sha = hub.repo_sha(TINY)
    folder = Path(
        snapshot_download(
            TINY, revision=sha if pinned else "main", cache_dir=tmp_path / "dl", token="hf_user"
        )
    )
    assert folder.name == sha
    got = {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }
    assert got == REPOS[TINY]
    # LFS files come from the CDN origin, without the token, as from the hub's CDN.
    cdn = [r for r in hub.requests if r.cdn]
    assert sorted(r.path.rsplit("/", 1)[-1] for r in cdn) == ["big.dat", "model.safetensors"]
    assert all(r.authorization is None and r.status == 200 for r in cdn)
    assert all(r.authorization == "Bearer hf_user" for r in hub.requests if not r.cdn)


def test_model_info_tree_and_paths_info(hub: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    api = HfApi()
    info = api.model_info(TINY, files_metadata=True)
    assert info.sha == hub.repo_sha(TINY)
    assert info.config == {"architectures": ["Qwen3_5ForCausalLM"], "model_type": "qwen3_5"}
    assert info.safetensors is not None and info.safetensors.total == 16 * 8 + 8 + 8 * 16 + 8
    siblings = {s.rfilename: s for s in info.siblings or []}
    assert set(siblings) == set(REPOS[TINY])
    for path, content in REPOS[TINY].items():
        sibling = siblings[path]
        assert sibling.size == len(content)
        if is_lfs(path, content):
            assert sibling.lfs is not None
            assert (sibling.lfs.sha256, sibling.lfs.size) == (
                hashlib.sha256(content).hexdigest(),
                len(content),
            )
        else:
            assert sibling.lfs is None and sibling.blob_id == git_blob(content)
    assert api.model_info(TINY, expand=["sha"]).siblings is None  # expand: only those fields

    monkeypatch.setattr(hub, "tree_page_size", 2)  # pages followed through the Link header
    tree = list(api.list_repo_tree(TINY, recursive=True))
    assert {e.path for e in tree if isinstance(e, RepoFile)} == set(REPOS[TINY])
    assert {e.path for e in tree if isinstance(e, RepoFolder)} == {"extra", "tokenizer"}
    assert sum("/tree/" in r.path for r in hub.requests) == 4  # 7 entries, 2 a page
    top = [e.path for e in api.list_repo_tree(TINY)]
    assert "tokenizer/vocab.txt" not in top and "tokenizer" in top

    found = api.get_paths_info(TINY, ["config.json", "tokenizer", "missing.txt"])
    assert [(type(e), e.path) for e in found] == [
        (RepoFile, "config.json"),
        (RepoFolder, "tokenizer"),
    ]


def test_safetensors_metadata_single_file_and_sharded(hub: HubServer) -> None:
    api = HfApi()
    single = api.get_safetensors_metadata(TINY)
    assert not single.sharded
    tensors = single.files_metadata["model.safetensors"].tensors
    assert tensors["mtp.fc.weight"].shape == [8, 16] and tensors["mtp.fc.weight"].dtype == "F32"
    sharded = api.get_safetensors_metadata(SHARDED)
    assert sharded.sharded
    assert sharded.weight_map["mtp.fc.weight"] == "model-00002-of-00002.safetensors"
    assert sharded.parameter_count == {"F32": 16 * 8 + 8 + 8 * 16 + 8}
    # The headers were read with range requests, not whole downloads.
    assert all(r.range for r in hub.requests if r.cdn)


def test_range_reads_and_headers(hub: HubServer) -> None:
    url = hub.file_url(TINY, "model.safetensors")
    size = len(WEIGHTS)
    with httpx.Client(follow_redirects=True) as http:
        part = http.get(url, headers={"Range": "bytes=8-23"})
        assert part.status_code == 206 and part.content == WEIGHTS[8:24]
        assert part.headers["Content-Range"] == f"bytes 8-23/{size}"
        assert http.get(url, headers={"Range": "bytes=100-"}).content == WEIGHTS[100:]
        assert http.get(url, headers={"Range": "bytes=-10"}).content == WEIGHTS[-10:]
        assert http.get(url, headers={"Range": "bytes=0-999999"}).content == WEIGHTS
        whole = http.get(url)
        assert whole.status_code == 200 and whole.content == WEIGHTS
        past = http.get(url, headers={"Range": f"bytes={size}-"})
        assert past.status_code == 416 and past.headers["Content-Range"] == f"bytes */{size}"
        small = http.get(hub.file_url(TINY, "config.json"), headers={"Range": "bytes=2-5"})
        assert small.status_code == 206 and small.content == CONFIG[2:6]
        assert small.url == hub.file_url(TINY, "config.json")  # small files: no redirect

        lfs = http.head(url, follow_redirects=False)
        sha256 = hashlib.sha256(WEIGHTS).hexdigest()
        assert lfs.status_code == 302 and lfs.headers["Location"].startswith(hub.cdn_url)
        assert lfs.headers["X-Linked-Etag"] == lfs.headers["ETag"] == f'"{sha256}"'
        assert lfs.headers["X-Linked-Size"] == str(size)
        assert lfs.headers["X-Repo-Commit"] == hub.repo_sha(TINY)
        head = http.head(hub.file_url(TINY, "config.json"))
        assert head.headers["ETag"] == f'"{git_blob(CONFIG)}"'
        assert head.headers["Content-Length"] == str(len(CONFIG))
        assert head.headers["Accept-Ranges"] == "bytes"
    ranged = [r for r in hub.requests if r.cdn and r.range == "bytes=8-23"]
    assert [(r.status, r.bytes_sent) for r in ranged] == [(206, 16)]
    # httpx follows the 302 to the CDN origin and, another origin, without the token.
    httpx.get(url, headers={"Authorization": "Bearer hf_user"}, follow_redirects=True)
    assert [r.authorization for r in hub.requests[-2:]] == ["Bearer hf_user", None]


def test_parse_range() -> None:
    assert parse_range(None, 10) is None
    assert parse_range("bytes=2-4", 10) == (2, 4)
    assert parse_range("bytes=2-", 10) == (2, 9)
    assert parse_range("bytes=-3", 10) == (7, 9)
    assert parse_range("bytes=5-2", 10) is None  # invalid: ignored, whole body
    assert parse_range("bytes=0-1,4-5", 10) is None  # several ranges: ignored


def test_missing_repo_revision_and_file_raise_the_hub_errors(
    hub: HubServer, tmp_path: Path
) -> None:
    api = HfApi()
    cache = tmp_path / "dl"
    with pytest.raises(RepositoryNotFoundError) as anonymous:
        api.model_info("acme/nope")
    with pytest.raises(RepositoryNotFoundError) as authenticated:
        api.model_info("acme/nope", token="hf_user")
    assert (anonymous.value.response.status_code, authenticated.value.response.status_code) == (
        401,
        404,
    )
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("acme/nope", "config.json", cache_dir=cache)
    with pytest.raises(RevisionNotFoundError):
        api.model_info(TINY, revision="v9")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download(TINY, "config.json", revision="v9", cache_dir=cache)
    with pytest.raises(RevisionNotFoundError):
        snapshot_download(TINY, revision="0" * 40, cache_dir=cache)
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(TINY, "nope.json", cache_dir=cache)
    assert api.file_exists(TINY, "config.json") and not api.file_exists(TINY, "nope.json")


def test_private_and_gated_repos(hub: HubServer, tmp_path: Path) -> None:
    api = HfApi()
    hub.set_access(TINY, private=True, tokens={"hf_ok"})
    with pytest.raises(RepositoryNotFoundError):
        api.model_info(TINY)
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download(TINY, "config.json", cache_dir=tmp_path / "dl", token="hf_bad")
    assert api.model_info(TINY, token="hf_ok").private is True

    hub.set_access(TINY, gated=True, tokens={"hf_ok"})
    assert api.model_info(TINY).gated == "manual"  # listed to anyone, files only with access
    with pytest.raises(GatedRepoError) as anonymous:
        hf_hub_download(TINY, "config.json", cache_dir=tmp_path / "dl")
    with pytest.raises(GatedRepoError) as refused:
        hf_hub_download(TINY, "config.json", cache_dir=tmp_path / "dl", token="hf_bad")
    assert (anonymous.value.response.status_code, refused.value.response.status_code) == (401, 403)
    path = hf_hub_download(TINY, "model.safetensors", cache_dir=tmp_path / "dl", token="hf_ok")
    assert Path(path).read_bytes() == WEIGHTS


def test_a_fresh_server_stops_cleanly_and_sees_changed_files(tmp_path: Path) -> None:
    folder = write_repo(tmp_path / "repos", "acme/live", {"a.txt": b"one"})
    with HubServer(tmp_path / "repos") as hub:
        before = hub.repo_sha("acme/live")
        assert httpx.get(f"{hub.url}/api/models/acme/live").json()["sha"] == before
        (folder / "a.txt").write_bytes(b"two!")
        after = httpx.get(f"{hub.url}/api/models/acme/live").json()["sha"]
        assert after != before and re.fullmatch(r"[0-9a-f]{40}", after)
        url = hub.url
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=2)


@pytest.mark.subprocess
def test_command_line_prints_its_url_and_serves(tmp_path: Path) -> None:
    write_repo(tmp_path / "repos", "acme/cli", {"config.json": b"{}"})
    command = [
        sys.executable,
        "-m",
        "qwen_mtp_desktop.devtools.hub_server",
        str(tmp_path / "repos"),
    ]
    process = subprocess.Popen([*command, "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url)
        assert httpx.get(f"{url}/acme/cli/resolve/main/config.json").content == b"{}"
    finally:
        process.terminate()
        assert process.wait(10) == 0


# --- faults ----------------------------------------------------------------------------------


def test_drop_fails_the_download_and_a_second_call_completes(
    hub: HubServer, tmp_path: Path
) -> None:
    fault = hub.fault("model.safetensors", "drop", after_bytes=100)
    with pytest.raises(httpx.TransportError):  # a reset mid-body is not retried by the client
        hf_hub_download(TINY, "model.safetensors", cache_dir=tmp_path / "dl")
    path = hf_hub_download(TINY, "model.safetensors", cache_dir=tmp_path / "dl")
    assert Path(path).read_bytes() == WEIGHTS and fault.fired == 1
    gets = [(r.fault, r.bytes_sent) for r in hub.requests if r.cdn]
    assert gets == [("drop", 100), (None, len(WEIGHTS))]


def test_truncated_body_is_resumed_with_a_range(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = skip_retry_waits(monkeypatch)
    # The client keeps only whole chunks (10 MiB) of a broken body: a smaller file would be
    # fetched again from byte 0. Small chunks, to see the Range it resumes with.
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 100)
    hub.fault("model.safetensors", "truncate", after_bytes=300)
    path = hf_hub_download(TINY, "model.safetensors", cache_dir=tmp_path / "dl")
    assert Path(path).read_bytes() == WEIGHTS
    gets = [(r.fault, r.range, r.status, r.bytes_sent) for r in hub.requests if r.cdn]
    assert gets == [("truncate", None, 200, 300), (None, "bytes=300-", 206, len(WEIGHTS) - 300)]
    assert waits == [1]  # http_get's pause before resuming


def test_flipped_byte_is_not_caught_by_the_client(hub: HubServer, tmp_path: Path) -> None:
    fault = hub.fault("model.safetensors", "flip", offset=len(WEIGHTS) - 5)
    url = hub.file_url(TINY, "model.safetensors")
    head = httpx.get(url, headers={"Range": "bytes=0-99"}, follow_redirects=True)
    assert head.content == WEIGHTS[:100] and fault.fired == 0  # the byte was not in the range
    path = Path(hf_hub_download(TINY, "model.safetensors", cache_dir=tmp_path / "dl"))
    served = path.read_bytes()
    assert fault.fired == 1 and len(served) == len(WEIGHTS)
    assert [i for i, (a, b) in enumerate(zip(served, WEIGHTS, strict=True)) if a != b] == [
        len(WEIGHTS) - 5
    ]
    (sibling,) = [s for s in HfApi().model_info(TINY, files_metadata=True).siblings or []
                  if s.rfilename == "model.safetensors"]  # fmt: skip
    assert sibling.lfs is not None and sha256_of(path) != sibling.lfs.sha256


def test_rate_limit_then_success(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = skip_retry_waits(monkeypatch)
    hub.fault("config.json", "rate_limit", retry_after=3, methods=["GET"])
    path = hf_hub_download(TINY, "config.json", cache_dir=tmp_path / "dl")
    assert Path(path).read_bytes() == CONFIG
    assert [r.status for r in hub.requests if r.method == "GET"] == [429, 200]
    assert waits == [4.0]  # the hub's RateLimit header's t=3, plus the client's 1 s margin
    hub.fault("config.json", "rate_limit", methods=["HEAD"])  # HEAD: retried at once
    hf_hub_download(TINY, "config.json", cache_dir=tmp_path / "dl2")
    assert [r.status for r in hub.requests if r.method == "HEAD"][-2:] == [429, 200]


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors(
    hub: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    skip_retry_waits(monkeypatch)
    hub.fault("config.json", "status", status=status, methods=["GET"])
    with pytest.raises(HfHubHTTPError) as error:  # a download GET is not retried on 5xx
        hf_hub_download(TINY, "config.json", cache_dir=tmp_path / "dl")
    assert error.value.response.status_code == status
    hub.fault("config.json", "status", status=status, methods=["HEAD"])  # metadata: retried
    assert Path(hf_hub_download(TINY, "config.json", cache_dir=tmp_path / "dl")).read_bytes() == (
        CONFIG
    )
    assert [r.status for r in hub.requests].count(status) == 2


def test_file_that_grows_after_head(hub: HubServer, tmp_path: Path) -> None:
    hub.fault("config.json", "grow", extra_bytes=10)
    with pytest.raises(OSError, match="Consistency check failed"):
        hf_hub_download(TINY, "config.json", cache_dir=tmp_path / "dl")
    hub.fault("config.json", "grow", extra_bytes=10)
    url = hub.file_url(TINY, "config.json")
    assert httpx.head(url).headers["Content-Length"] == str(len(CONFIG))
    grown = httpx.get(url)
    assert len(grown.content) == len(CONFIG) + 10 and grown.content.startswith(CONFIG)


def test_slow_trickle(hub: HubServer) -> None:
    hub.fault("model.safetensors", "slow", bytes_per_second=8000)
    started = time.monotonic()
    body = httpx.get(hub.file_url(TINY, "model.safetensors"), follow_redirects=True).content
    assert body == WEIGHTS and time.monotonic() - started >= len(WEIGHTS) / 8000 * 0.8


def test_faults_times_glob_repo_and_api_paths(hub: HubServer) -> None:
    always = hub.fault("*.json", "status", status=502, times=None, repo=SHARDED)
    url = hub.file_url(SHARDED, "model.safetensors.index.json")
    assert [httpx.get(url).status_code for _ in range(3)] == [502, 502, 502]
    assert httpx.get(hub.file_url(TINY, "config.json")).status_code == 200  # other repo
    assert always.fired == 3
    hub.clear_faults()
    hub.fault("/api/models/*", "truncate", after_bytes=5)  # "/": the request path
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(f"{hub.url}/api/models/{TINY}")
    with pytest.raises(ValueError, match="unknown fault kind"):
        hub.fault("*", "explode")  # type: ignore[arg-type]


def test_control_endpoint(hub: HubServer) -> None:
    with httpx.Client(base_url=hub.url) as http:
        made = http.post("/_faults", json={"path": "config.json", "kind": "status", "status": 502})
        assert made.status_code == 200 and made.json()[0]["kind"] == "status"
        assert http.get(f"/{TINY}/resolve/main/config.json").status_code == 502
        assert http.get("/_faults").json()[0]["fired"] == 1
        assert [r["status"] for r in http.get("/_log").json()] == [502]
        assert http.post("/_faults", json=[{"kind": "nope"}]).status_code == 400
        assert http.delete("/_faults").json() == [] and hub.faults == []
        assert http.delete("/_log").json() == [] and hub.requests == []
