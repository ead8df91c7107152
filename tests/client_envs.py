"""Virtual environments of real agent client libraries (openai-agents, pydantic-ai, instructor,
langchain-openai, litellm, llm; and the Node `openai` client where node and npm are installed),
for the conformance tests that run them against `serve`.

They are not the app's dependencies, so they live apart from `.venv`: one environment per pinned
requirements file under tests/agent_clients/, built on first use with `python -m venv` and pip
(PyPI) in `.cache/clients/<name>-<hash of the file>`, and reused while the file is unchanged. A
lock makes concurrent test runs build it once; a marker written last means a half-built
environment (a killed install) is built again, never used. The Node client is installed the
same way with `npm ci` from tests/agent_clients/node/package-lock.json, in
`.cache/clients/node-<hash of the lock>`."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "tests" / "agent_clients"
CACHE = ROOT / ".cache" / "clients"
#: A cold install of the larger environment took 1.5 min on this project's 2-core machines.
INSTALL_TIMEOUT_S = 1200


class ClientEnvError(RuntimeError):
    pass


def env_dir(name: str) -> Path:
    """Where the environment for tests/agent_clients/requirements-NAME.txt lives."""
    requirements = _requirements(name)
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:16]
    return CACHE / f"{name}-{digest}"


def client_python(name: str) -> Path:
    """The Python of the environment for requirements-NAME.txt, built first if missing.
    Raises ClientEnvError saying what failed and what to do."""
    target = env_dir(name)
    python = target / "bin" / "python"
    done = target / ".complete"
    if done.is_file():
        return python
    CACHE.mkdir(parents=True, exist_ok=True)
    with _locked(CACHE / f"{target.name}.lock"):
        if done.is_file():  # another run built it while this one waited
            return python
        shutil.rmtree(target, ignore_errors=True)
        started = time.monotonic()
        _run([sys.executable, "-m", "venv", str(target)], name)
        _run(
            [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
             "-r", str(_requirements(name))],
            name,
        )  # fmt: skip
        done.write_text(f"built in {time.monotonic() - started:.0f} s\n")
        _remove_stale(name, keep=target)
    return python


def node_modules() -> Path:
    """The node_modules folder of tests/agent_clients/node/package-lock.json, installed first if
    missing. Raises ClientEnvError saying what failed and what to do."""
    lock = REQUIREMENTS / "node" / "package-lock.json"
    target = CACHE / f"node-{hashlib.sha256(lock.read_bytes()).hexdigest()[:16]}"
    done = target / ".complete"
    if done.is_file():
        return target / "node_modules"
    npm = shutil.which("npm")
    if npm is None:
        raise ClientEnvError("npm is not installed")
    CACHE.mkdir(parents=True, exist_ok=True)
    with _locked(CACHE / f"{target.name}.lock"):
        if not done.is_file():
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            shutil.copy2(lock, target / "package-lock.json")
            shutil.copy2(lock.with_name("package.json"), target / "package.json")
            command = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefix",
                       str(target)]  # fmt: skip
            _run(command, "node", f"`cd {target} && npm ci --ignore-scripts && touch .complete`")
            done.write_text("installed\n")
            for old in CACHE.glob("node-*"):
                if old != target and old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
    return target / "node_modules"


def _requirements(name: str) -> Path:
    path = REQUIREMENTS / f"requirements-{name}.txt"
    if not path.is_file():
        raise ClientEnvError(f"no client requirements file {path}")
    return path


def _run(command: list[str], name: str, by_hand: str | None = None) -> None:
    try:
        result = subprocess.run(
            command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as error:
        what = f"{command[2:4]} took over {error.timeout} s"
        raise ClientEnvError(_advice(name, what, by_hand)) from None
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise ClientEnvError(_advice(name, f"exit {result.returncode}:\n{tail}", by_hand))


def _advice(name: str, what: str, by_hand: str | None = None) -> str:
    if by_hand is None:
        requirements = _requirements(name).relative_to(ROOT)
        target = env_dir(name).relative_to(ROOT)
        by_hand = (
            f"`python -m venv {target} && {target}/bin/pip install -r {requirements} && "
            f"touch {target}/.complete`"
        )
    return (
        f"Installing the {name} agent client libraries failed ({what}).\n"
        "They come from PyPI (the Node client from the npm registry): check that pip (npm) can "
        "reach it (proxy, index settings), then run the tests again (a half-built environment "
        f"is rebuilt). To build it by hand: {by_hand}. To leave these tests out: "
        "`-m 'not subprocess'`."
    )


def _remove_stale(name: str, keep: Path) -> None:
    """Environments of earlier versions of the file (about 0.5 GB each) go once a new one is
    built."""
    for old in CACHE.glob(f"{name}-*"):
        if old != keep and old.is_dir():
            shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
