"""A download killed again and again resumes where it stopped: `models download` of a ready
OpenVINO export from a hub stand-in (qwen_mtp_desktop.devtools.hub_server) that trickles every
file, so the download takes a few seconds; the command runs as a child process that is killed
with SIGKILL at a random point (seeded) each time, then is left to finish.

Checked: after every kill the library shows no model (only the hidden `.NAME.downloading/`);
every restart resumes (a `.part` on disk is continued by a Range request from its size, files
already whole are not asked for again); the last run reports as resumed exactly the bytes the
last kill left on disk; and the placed folder is byte-identical to the source.

    .venv/bin/python benchmarks/download_resume.py [--model DIR] [--kills 20] [--seconds 4]
        [--seed 0]
    .venv/bin/python benchmarks/download_resume.py --smoke     # demo export, 3 kills; checks

`--model` defaults to the demo export; a full-size INT4 export (770 MB) needs `--seconds 60` or
so (the trickle is per connection, and each file is hashed after its last byte).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _args import at_least  # noqa: E402
from _smoke import SmokeCheck  # noqa: E402

from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME  # noqa: E402
from qwen_mtp_desktop.core.models.ready.download import (  # noqa: E402
    ALLOW_PATTERNS,
    PART,
    staging_dir,
)
from qwen_mtp_desktop.devtools.hub_server import HubServer  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO = REPO_ROOT / "resources" / "demo-model" / "openvino"
REPO_ID = "bench-org/resume-ov"
SMOKE_KILLS = 3
#: Kill points are drawn from this share of the model's bytes (not at the very ends).
KILL_SPAN = (0.03, 0.97)
POLL_S = 0.005


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError(f"must be above 0 seconds, got {text}")
    return value


@dataclass
class Disk:
    """What a download's staging folder holds: whole files and `.part` files, with sizes."""

    whole: dict[str, int] = field(default_factory=dict)
    parts: dict[str, int] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return sum(self.whole.values()) + sum(self.parts.values())


def on_disk(files_dir: Path) -> Disk:
    disk = Disk()
    try:
        entries = list(os.scandir(files_dir))
    except OSError:
        return disk
    for entry in entries:
        try:
            size = entry.stat().st_size
        except OSError:
            continue  # renamed from .part to its name between the listing and the stat
        if entry.name.endswith(PART):
            disk.parts[entry.name[: -len(PART)]] = size
        elif entry.is_file():
            disk.whole[entry.name] = size
    return disk


def link_tree(source: Path, target: Path) -> None:
    """`target` mirrors `source` with symbolic links (the hub serves them as files)."""
    for path in sorted(source.rglob("*")):
        if path.is_file():
            link = target / path.relative_to(source)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(path.resolve())


def wanted_files(model: Path) -> dict[str, int]:
    """The files of `model` a download fetches (the app's allow-list), with sizes."""
    return {
        p.relative_to(model).as_posix(): p.stat().st_size
        for p in sorted(model.rglob("*"))
        if p.is_file()
        and any(fnmatch.fnmatch(p.relative_to(model).as_posix(), pat) for pat in ALLOW_PATTERNS)
    }


def content_gets(hub: HubServer) -> list[tuple[str, str | None, int]]:
    """(file name, Range header, bytes sent) of every GET that sent file bytes, in order."""
    out = []
    for record in hub.requests:
        if record.method != "GET" or record.status not in (200, 206):
            continue
        if record.path.startswith("/cdn/") or "/resolve/" in record.path:
            out.append((record.path.rsplit("/", 1)[-1], record.range, record.bytes_sent))
    return out


def range_start(header: str | None) -> int:
    if not header:
        return 0
    return int(header.removeprefix("bytes=").split("-", 1)[0] or 0)


def child_env(hub: HubServer, work: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p
        ),
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "HF_HOME": str(work / "hf-home"),
        "QWEN_MTP_DESKTOP_HOME": str(work / "app-home"),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
    }
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        env.pop(name, None)
    return env


@dataclass
class Kill:
    number: int
    after_s: float
    disk: Disk
    target: int
    exited_early: bool = False
    placed: bool = False
    # Filled from the restart's requests:
    resumed_file: str | None = None
    resumed_from: int | None = None
    resumed: bool = False
    refetched: list[str] = field(default_factory=list)
    why: str = ""


def judge_restart(
    kill: Kill, gets: list[tuple[str, str | None, int]], sizes: dict[str, int]
) -> None:
    """Did the run after `kill` resume what the kill left on disk? A `.part` that holds the
    whole file (killed while checking it) needs no request: it is checked and kept."""
    disk = kill.disk
    complete = set(disk.whole) | {n for n, size in disk.parts.items() if size == sizes.get(n)}
    partial = {n: size for n, size in disk.parts.items() if 0 < size < sizes.get(n, 0)}
    kill.refetched = sorted({name for name, _r, _b in gets if name in complete})
    if not gets:
        kill.resumed = not partial and complete == set(sizes)
        kill.why = "" if kill.resumed else "the restart asked for no file bytes"
        return
    first_name, first_range, _ = gets[0]
    kill.resumed_file, kill.resumed_from = first_name, range_start(first_range)
    if kill.refetched:
        kill.why = f"whole files asked for again: {', '.join(kill.refetched)}"
    elif partial:
        name = next(iter(partial))
        ok = len(partial) == 1 and first_name == name and kill.resumed_from == partial[name]
        kill.resumed = ok
        if not ok:
            kill.why = (
                f"{name}.part held {partial[name]:,} bytes; the restart first asked for "
                f"{first_name} from byte {kill.resumed_from:,}"
            )
    elif disk.bytes > 0:
        kill.resumed = kill.resumed_from == 0
        kill.why = "" if kill.resumed else f"a new file asked for from byte {kill.resumed_from:,}"
    else:
        kill.why = "nothing was on disk to resume from"


def run(
    model: Path, kills: int, seconds: float, seed: int, check: SmokeCheck
) -> tuple[list[Kill], bool]:
    source_files = wanted_files(model)
    total = sum(source_files.values())
    rate = total / seconds
    rng = random.Random(seed)
    points = sorted(int(rng.uniform(*KILL_SPAN) * total) for _ in range(kills))
    with tempfile.TemporaryDirectory(prefix="download-resume-") as tmp:
        work = Path(tmp)
        link_tree(model, work / "hub" / REPO_ID)
        destination = work / "library" / "resumed-model"
        destination.parent.mkdir()
        files_dir = staging_dir(destination) / "files"
        command = [sys.executable, "-m", "qwen_mtp_desktop", "models", "download", REPO_ID]
        command += ["--to", str(destination), "--json"]
        with HubServer(work / "hub") as hub:
            hub.repo_state(REPO_ID)  # hash the files now, not inside the first run
            hub.fault("*", "slow", bytes_per_second=rate, times=None)
            env = child_env(hub, work)
            print(
                f"{model}: {len(source_files)} files, {total:,} bytes, trickled at "
                f"{rate / 1e6:.2f} MB/s ({seconds:g} s a whole download); {kills} kills at "
                f"random points (seed {seed})"
            )
            done: list[Kill] = []
            served = 0
            for number, point in enumerate(points, start=1):
                before = on_disk(files_dir).bytes
                target = max(point, before + 1)  # every run writes something before its kill
                hub.clear_requests()
                began = time.monotonic()
                process = subprocess.Popen(
                    command,
                    cwd=work,
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                exited = False
                while on_disk(files_dir).bytes < target:
                    if process.poll() is not None:
                        exited = True
                        break
                    time.sleep(POLL_S)
                if not exited:
                    process.send_signal(signal.SIGKILL)
                process.wait()
                kill = Kill(number, time.monotonic() - began, on_disk(files_dir), target, exited)
                kill.placed = destination.exists()
                gets = content_gets(hub)
                served += sum(sent for *_rest, sent in gets)
                if done:
                    judge_restart(done[-1], gets, source_files)
                done.append(kill)
                if exited:
                    break
            hub.clear_requests()
            hub.clear_faults()  # the last run at full speed
            began = time.monotonic()
            final = subprocess.run(
                command, cwd=work, env=env, capture_output=True, text=True, check=False
            )
            final_s = time.monotonic() - began
            gets = content_gets(hub)
            served += sum(sent for *_rest, sent in gets)
            if done:
                judge_restart(done[-1], gets, source_files)
        result: dict[str, Any] = {}
        if final.returncode == 0:
            result = json.loads(final.stdout)
        print()
        for kill in done:
            if kill.exited_early:
                print(f"kill {kill.number:2d}: the run finished before its kill point")
                continue
            where = (
                f"asked for {kill.resumed_file} from byte {kill.resumed_from:,}"
                if kill.resumed_file is not None
                else "asked for nothing"
            )
            complete_part = [
                n for n, size in kill.disk.parts.items() if size == source_files.get(n)
            ]
            if kill.resumed_file is not None and kill.resumed_from == 0:
                where += " (a new file; the whole ones kept)"
            in_part = f"{sum(kill.disk.parts.values()):,} in a .part"
            if complete_part:
                in_part += " that was whole: killed while it was checked"
            verdict = "resumed" if kill.resumed else f"NOT resumed ({kill.why})"
            print(
                f"kill {kill.number:2d} after {kill.after_s:5.2f} s: {kill.disk.bytes:,} bytes on "
                f"disk ({len(kill.disk.whole)} whole files, {in_part}); the restart {where}: "
                f"{verdict}"
            )
        identical, differences = compare(model, destination, source_files)
        killed = [k for k in done if not k.exited_early]
        resumes = sum(k.resumed for k in killed)
        last = killed[-1].disk.bytes if killed else 0
        print()
        if final.returncode != 0:
            print(f"the last run failed (exit {final.returncode}): {final.stderr.strip()[-400:]}")
        else:
            print(
                f"last run: {final_s:.2f} s at full speed, fetched {result['fetched_bytes']:,} "
                f"bytes, resumed {result['resumed_bytes']:,} (the last kill left {last:,})"
            )
        print(f"bytes served over all runs: {served:,} ({served / total:.3f}x the model)")
        if differences:
            print("differences: " + "; ".join(differences[:5]))
        print(
            f"{len(killed)} kills, {resumes} resumes, byte-identical: "
            + ("yes" if identical else "no")
        )

        check.require(len(killed) == kills, f"{len(killed)} kills, expected {kills}")
        check.require(resumes == len(killed), f"{len(killed) - resumes} restarts did not resume")
        check.require(not any(k.placed for k in killed), "a killed run left a placed model")
        check.require(final.returncode == 0, f"the last run exited {final.returncode}")
        if result:
            check.require(
                result["resumed_bytes"] == last,
                f"the last run resumed {result['resumed_bytes']:,} bytes; {last:,} were on disk",
            )
            check.require(
                result["fetched_bytes"] + result["resumed_bytes"] == total,
                "fetched + resumed bytes are not the model's size",
            )
        check.require(identical, "the placed folder differs from the source")
        check.require(not staging_dir(destination).exists(), "the staging folder was left")
        check.positive("bytes served", served)
        check.require(served < 2 * total, f"{served:,} bytes served for a {total:,}-byte model")
        return done, identical


def compare(source: Path, placed: Path, wanted: dict[str, int]) -> tuple[bool, list[str]]:
    """Every file the download wants is byte-identical; the folder holds nothing else but
    the manifest a download writes when the repo has none."""
    if not placed.is_dir():
        return False, [f"{placed} was not placed"]
    problems = []
    have = {p.relative_to(placed).as_posix() for p in placed.rglob("*") if p.is_file()}
    for name in wanted:
        if name not in have:
            problems.append(f"{name} missing")
            continue
        with (source / name).open("rb") as a, (placed / name).open("rb") as b:
            while True:
                x, y = a.read(1 << 22), b.read(1 << 22)
                if x != y:
                    problems.append(f"{name} differs")
                    break
                if not x:
                    break
    extra = sorted(have - set(wanted) - ({MANIFEST_NAME} - set(wanted)))
    problems += [f"unexpected {name}" for name in extra]
    return not problems, problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=DEMO, help="an exported model folder")
    parser.add_argument("--kills", type=at_least(1), default=20, help="kills before the end")
    parser.add_argument(
        "--seconds",
        type=positive_seconds,
        default=4.0,
        help="how long a whole download takes at the trickle's rate",
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the kill points")
    parser.add_argument("--smoke", action="store_true", help=f"demo, {SMOKE_KILLS} kills; checks")
    args = parser.parse_args(argv)
    if not (args.model / "openvino_language_model.xml").is_file():
        parser.error(f"{args.model} is not an exported model folder")
    if not hasattr(signal, "SIGKILL"):
        parser.error("needs a system with SIGKILL (Linux, macOS)")
    model, kills = (DEMO, SMOKE_KILLS) if args.smoke else (args.model, args.kills)
    check = SmokeCheck("download_resume.py")
    run(model.resolve(), kills, args.seconds, args.seed, check)
    if args.smoke:
        return check.finish()
    if check.problems:
        print("FAILED: " + "; ".join(check.problems), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
