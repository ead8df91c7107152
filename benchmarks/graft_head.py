"""Adding the MTP head to an export that lacks it (`models add-mtp`, core.models.ready.mtp_graft):
what the graft costs when the checkpoint is on a hub (HTTP range reads through HubSource, from a hub
stand-in on loopback: qwen_mtp_desktop.devtools.hub_server), and whether the grafted head is
the head optimum-intel exports from the same checkpoint.

Cost: `models add-mtp EXPORT --from ORG/CHECKPOINT --no-check --json` in a child process; bytes
read (against the checkpoint's size and against the least a graft can read: config, index, the
head shards' headers and the head's tensors), bytes the hub sent, peak RSS of the child
(wait4), wall time. Targets in a full run: at most 10 % of the checkpoint read, peak RSS under
1.5 GB, under 60 s.

Equivalence, against the export's own head:
(a) `last_hidden_state` of both MTP IRs on the same random inputs, one prefill call of P
    positions, with the app's exact numerics (f32 inference precision and no dynamic
    activation quantization, which the CPU plugin otherwise applies to compressed weights
    even under an f32 hint): the largest absolute difference, over all positions and over
    the first five. optimum's head stores RoPE's inv_freq as float16 where the graft
    keeps float32, so a phase error grows with the position even between identical weights.
    optimum's INT4 exports compress the head too (INT4, with INT8 for some layers), which the
    graft does not offer (fp16, int8, fp32): so the rows are the graft in its `auto` format
    (int8 for a compressed trunk: the closest it offers), in fp32 (the checkpoint's weights as
    they are), and, when optimum-intel is installed, the fp32 graft compressed with the
    export's own recorded settings through optimum's own weight compression call (nncf): the
    like-for-like comparison.
(b) greedy drafts through the app's decoder (core.models.export.child.check_generation, exact
    numerics, in child processes) for both folders at each depth: MTP output equal to plain
    decoding for both, the same tokens, the acceptance of each.

    .venv/bin/python benchmarks/graft_head.py --variant bigram   # /tmp/qwen35-fullsize pair
    .venv/bin/python benchmarks/graft_head.py --checkpoint CKPT_DIR --export EXPORT_DIR
    .venv/bin/python benchmarks/graft_head.py --smoke   # demo checkpoint (sharded BF16 copy)
                                                        # and demo export; checks

The full-size pairs come from `benchmarks/fullsize.py build --geometry 0.8b --work
/tmp/qwen35-fullsize` (random weights, real Qwen3.5-0.8B geometry, fp32 checkpoint, INT4
export).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from _args import at_least, whole_numbers  # noqa: E402
from _smoke import SmokeCheck  # noqa: E402

from qwen_mtp_desktop.core.models.ready.mtp_graft import MTP_STEM  # noqa: E402
from qwen_mtp_desktop.core.models.ready.tensor_source import (  # noqa: E402
    INDEX_NAME,
    FolderSource,
    locate,
)
from qwen_mtp_desktop.devtools.hub_server import HubServer  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_EXPORT = REPO_ROOT / "resources" / "demo-model" / "openvino"
DEMO_CHECKPOINT = REPO_ROOT / "resources" / "demo-model" / "checkpoint"
FULLSIZE_WORK = Path("/tmp/qwen35-fullsize")
REPO_ID = "bench-org/graft-source"
#: Full-run targets.
READ_SHARE_LIMIT = 0.10
RSS_LIMIT = 1.5e9
SECONDS_LIMIT = 60.0
#: Reads may exceed the least a graft needs by nearby ranges read as one (COALESCE_GAP) and
#: nothing else: a few headers' worth of slack.
READ_SLACK = 64 * 1024
EARLY = 5  # "the first five positions"


def log(message: str) -> None:
    print(message, flush=True)


# --- folders ---------------------------------------------------------------------------------


def mirror(source: Path, target: Path, *, skip_head: bool = False) -> Path:
    """`target` with `source`'s files: JSON copied (a graft rewrites the manifest), everything
    else linked (large IR weights are read only); without the MTP head with `skip_head`."""
    target.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        if not path.is_file() or (skip_head and path.name.startswith(MTP_STEM)):
            continue
        if path.suffix == ".json":
            shutil.copy2(path, target / path.name)
        else:
            (target / path.name).symlink_to(path.resolve())
    return target


def least_read(folder: Path) -> tuple[int, int, int]:
    """(the head's bytes, the least a graft reads, the checkpoint's safetensors bytes):
    config.json, the index, each head shard's 8-byte length and header, the head's tensors."""
    source = FolderSource(folder)
    layout = locate(source, "mtp.")
    head = sum(e.end - e.start for e in layout.entries.values())
    headers = 0
    for shard in {e.file for e in layout.entries.values()}:
        with (folder / shard).open("rb") as handle:
            headers += 8 + int.from_bytes(handle.read(8), "little")
    small = sum(
        (folder / name).stat().st_size
        for name in ("config.json", INDEX_NAME)
        if (folder / name).is_file()
    )
    total = sum(p.stat().st_size for p in folder.glob("*.safetensors"))
    return head, head + headers + small, total


# --- child processes -------------------------------------------------------------------------


def child_env(work: Path, hub: HubServer | None = None) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH")) if p
        ),
        "QWEN_MTP_DESKTOP_HOME": str(work / "app-home"),
        "HF_HOME": str(work / "hf-home"),
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
    }
    if hub is not None:
        env |= {"HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0"}
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH"):
        env.pop(name, None)
    return env


def run_measured(
    command: list[str], env: dict[str, str], cwd: Path
) -> tuple[int, str, str, float, int]:
    """(exit status, stdout, stderr, wall seconds, peak RSS in bytes) of one child process;
    the peak is the kernel's for that child alone (wait4)."""
    out, err = cwd / "child.out", cwd / "child.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        began = time.monotonic()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=stdout, stderr=stderr)
        _pid, status, usage = os.wait4(process.pid, 0)
        seconds = time.monotonic() - began
        process.returncode = os.waitstatus_to_exitcode(status)
    scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes on macOS, KiB on Linux
    return process.returncode, out.read_text(), err.read_text(), seconds, usage.ru_maxrss * scale


def check_generation(
    model_dir: Path, depth: int, max_new_tokens: int, env: dict[str, str], cwd: Path
) -> dict[str, Any]:
    """core.models.export.child.check_generation in a child process (a fresh process per model, as
    the app runs it): MTP at `depth` against plain decoding, greedy, exact numerics."""
    from qwen_mtp_desktop.core.models.export.progress import read_markers

    child = "qwen_mtp_desktop.core.models.export.child"
    command = [sys.executable, "-m", child, "check-generation"]
    command += [str(model_dir), "--num-assistant-tokens", str(depth)]
    command += ["--max-new-tokens", str(max_new_tokens)]
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    markers = read_markers(done.stdout.splitlines())
    results = [m["result"] for m in markers if m.get("event") == "generation"]
    if results and isinstance(results[-1], dict):
        return results[-1]
    errors = [str(m.get("message")) for m in markers if m.get("event") == "error"]
    tail = done.stderr.strip().splitlines()[-3:]
    return {"equal": False, "error": "; ".join(errors) or " | ".join(tail) or "no result"}


# --- (a) the heads' hidden states ------------------------------------------------------------


def head_output(xml: Path, inputs: dict[str, Any]) -> Any:
    """The head's output with the app's exact numerics: f32 inference and no dynamic
    activation quantization (which the CPU plugin applies to matmuls with compressed weights
    even under an f32 hint: it alone moved the INT4 head's outputs by 0.047 here)."""
    import openvino as ov

    from qwen_mtp_desktop.core.engine.runtime import EXACT_NUMERICS

    core = ov.Core()
    compiled = core.compile_model(core.read_model(str(xml)), "CPU", dict(EXACT_NUMERICS))
    request = compiled.create_infer_request()
    return request.infer(inputs)[compiled.output("last_hidden_state")][0].copy()


def random_inputs(hidden: int, positions: int, seed: int = 0) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return {
        "hidden_states": rng.standard_normal((1, positions, hidden)).astype(np.float32),
        "inputs_embeds": rng.standard_normal((1, positions, hidden)).astype(np.float32),
        "attention_mask": np.ones((1, positions), np.int64),
        "position_ids": np.arange(positions, dtype=np.int64)[None],
        "beam_idx": np.zeros(1, np.int32),
    }


def compress_like_export(fp32_xml: Path, export: Path, out_xml: Path) -> str | None:
    """The fp32 graft compressed with the export's recorded head settings through optimum's
    own weight-compression call; None when done, else why not."""
    try:
        config = json.loads((export / "openvino_config.json").read_text())
        settings = config["quantization_config"]["quantization_configs"]["mtp_model"]
    except (OSError, ValueError, KeyError, TypeError):
        return "the export records no compression settings for its head"
    try:
        import openvino as ov
        from optimum.intel.openvino.quantization import _weight_only_quantization
    except ImportError as exc:
        return f"optimum-intel is not installed ({exc.name})"
    model = ov.Core().read_model(str(fp32_xml))
    compressed = _weight_only_quantization(model, dict(settings))
    ov.save_model(compressed, str(out_xml), compress_to_fp16=False)
    return None


def compare_heads(
    export: Path,
    grafts: list[tuple[str, Path]],
    positions: int,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the export head's output scale, one row per graft: max |diff| all / early)."""
    import numpy as np

    from qwen_mtp_desktop.core.models.ir import read_ir

    reference_xml = export / f"{MTP_STEM}.xml"
    hidden = json.loads((export / "config.json").read_text())
    hidden = (hidden.get("text_config") or hidden)["hidden_size"]
    inputs = random_inputs(hidden, positions)
    theirs = head_output(reference_xml, inputs)
    scale = {
        "max": float(np.abs(theirs).max()),
        "rms": float(np.sqrt(np.mean(theirs.astype(np.float64) ** 2))),
        "precision": read_ir(reference_xml).precision_summary,
    }
    rows = []
    for label, xml in grafts:
        ours = head_output(xml, inputs)
        diff = np.abs(ours.astype(np.float64) - theirs)
        rows.append(
            {
                "label": label,
                "precision": read_ir(xml).precision_summary,
                "max": float(diff.max()),
                "early": float(diff[:EARLY].max()),
                "mean": float(diff.mean()),
            }
        )
    return scale, rows


# --- the run ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, help="the source checkpoint folder")
    parser.add_argument("--export", type=Path, help="optimum's export of it, with its head")
    parser.add_argument(
        "--variant",
        choices=("agree", "bigram", "random"),
        default="agree",
        help="without --checkpoint/--export: the full-size pair of this variant",
    )
    parser.add_argument("--geometry", default="0.8b", help="the full-size pair's geometry")
    parser.add_argument("--work", type=Path, default=FULLSIZE_WORK, help="fullsize.py's --work")
    parser.add_argument("--positions", type=at_least(EARLY), default=32, help="prefill length")
    parser.add_argument("--depths", type=whole_numbers(1, 8), default="1,2,3")
    parser.add_argument("--max-new-tokens", type=at_least(2), default=32)
    parser.add_argument("--smoke", action="store_true", help="demo checkpoint and export; checks")
    args = parser.parse_args(argv)
    if args.smoke:
        checkpoint, export, positions = DEMO_CHECKPOINT, DEMO_EXPORT, 24
        depths, tokens = [1, 2, 3], 32
    else:
        stem = f"qwen3.5-{args.geometry}-{args.variant}"
        checkpoint = args.checkpoint or args.work / f"{stem}-ckpt"
        export = args.export or args.work / f"{stem}-int4"
        positions, depths, tokens = args.positions, args.depths, args.max_new_tokens
    if (
        not (export / "openvino_language_model.xml").is_file()
        or not (export / f"{MTP_STEM}.xml").is_file()
    ):
        parser.error(
            f"{export} is not an exported model with an MTP head (build the full-size pairs "
            "with benchmarks/fullsize.py build, or give --export)"
        )
    if not (checkpoint / "config.json").is_file() or not any(checkpoint.glob("*.safetensors")):
        parser.error(f"{checkpoint} is not a checkpoint folder (config.json, *.safetensors)")
    check = SmokeCheck("graft_head.py")
    with tempfile.TemporaryDirectory(prefix="graft-head-") as tmp:
        run(checkpoint.resolve(), export.resolve(), Path(tmp), args.smoke, positions, depths,
            tokens, check)  # fmt: skip
    if args.smoke:
        return check.finish()
    if check.problems:
        print("FAILED:\n  - " + "\n  - ".join(check.problems), file=sys.stderr)
        return 1
    return 0


def run(
    checkpoint: Path,
    export: Path,
    work: Path,
    smoke: bool,
    positions: int,
    depths: list[int],
    tokens: int,
    check: SmokeCheck,
) -> None:
    from qwen_mtp_desktop.core.models.ready.mtp_graft import graft

    repo = work / "hub" / REPO_ID
    if smoke:
        from tests.checkpoint_files import sharded_checkpoint

        sharded_checkpoint(repo, shards=3, bf16=True, source=checkpoint)
        what = f"{checkpoint} as 3 BF16 shards"
    else:
        repo.mkdir(parents=True)
        for path in sorted(checkpoint.iterdir()):
            if path.is_file():
                (repo / path.name).symlink_to(path)
        what = str(checkpoint)
    head_bytes, least, total = least_read(repo)
    headless = mirror(export, work / "grafted", skip_head=True)
    reference = mirror(export, work / "export")
    log(f"checkpoint: {what}, {total:,} bytes of safetensors, of which the head {head_bytes:,}")
    log(f"export: {export}")

    # Cost: the app's command in a child process, reading from the hub stand-in.
    with HubServer(work / "hub") as hub:
        began = time.monotonic()
        hub.repo_state(REPO_ID)  # the stand-in hashes the files once, before the clock starts
        log(f"hub stand-in ready in {time.monotonic() - began:.1f} s (hashing its files)")
        hub.clear_requests()
        command = [sys.executable, "-m", "qwen_mtp_desktop", "models", "add-mtp"]
        command += [str(headless), "--from", REPO_ID, "--no-check", "--json"]
        status, stdout, stderr, wall, rss = run_measured(command, child_env(work, hub), work)
        files = (".safetensors", "/config.json", "/" + INDEX_NAME)
        sent = [
            r.bytes_sent
            for r in hub.requests
            if r.method == "GET" and r.status in (200, 206) and r.path.endswith(files)
        ]
    check.require(status == 0, f"models add-mtp exited {status}: {stderr.strip()[-300:]}")
    if status != 0:
        return
    result = json.loads(stdout)
    read, share = result["bytes_read"], result["bytes_read"] / total
    log("")
    log(f"graft ({result['weight_format']} weights, {result['head_bytes']:,} bytes of head IR):")
    log(
        f"  bytes read: {read:,} = {100 * share:.2f} % of the checkpoint, in "
        f"{result['requests']} range requests; the least a graft can read: {least:,} "
        f"(+{read - least:,}); the hub sent {sum(sent):,} in {len(sent)} responses"
    )
    log(f"  peak RSS of the graft process: {rss / 1e6:.0f} MB")
    log(f"  wall time: {wall:.2f} s for the process ({result['seconds']:.2f} s in the graft)")
    check.positive("bytes read", read)
    check.positive("peak RSS", rss)
    check.positive("wall time", wall)
    check.require(read <= least + READ_SLACK, f"read {read:,} bytes; at most {least:,} needed")
    if not smoke:
        for name, met, target in (
            ("bytes read", share <= READ_SHARE_LIMIT, f"<= {READ_SHARE_LIMIT:.0%} of checkpoint"),
            ("peak RSS", rss < RSS_LIMIT, f"< {RSS_LIMIT / 1e9:.1f} GB"),
            ("wall time", wall < SECONDS_LIMIT, f"< {SECONDS_LIMIT:.0f} s"),
        ):
            log(f"  target {name} {target}: {'met' if met else 'NOT met'}")
            check.require(met, f"{name} target ({target}) not met")

    # (a) the grafted head against the export's, same inputs.
    fp32 = mirror(export, work / "grafted-fp32", skip_head=True)
    graft(fp32, FolderSource(checkpoint), weight_format="fp32")  # the weights as they are
    grafts = [
        (f"graft {result['weight_format']} (auto)", headless / f"{MTP_STEM}.xml"),
        ("graft fp32", fp32 / f"{MTP_STEM}.xml"),
    ]
    from qwen_mtp_desktop.core.models.ir import read_ir

    export_precision = read_ir(export / f"{MTP_STEM}.xml").dominant_precision or ""
    like_export = None  # the like-for-like row: the graft in the export head's own format
    if export_precision.startswith("INT"):
        like_export = work / "grafted-fp32-compressed" / f"{MTP_STEM}.xml"
        like_export.parent.mkdir()
        why = compress_like_export(fp32 / f"{MTP_STEM}.xml", export, like_export)
        if why is None:
            grafts.append(("graft fp32, compressed as the export was", like_export))
        else:
            log(f"(no like-for-like compressed row: {why})")
            like_export = None
    elif export_precision == "FP16":
        fp16 = mirror(export, work / "grafted-fp16", skip_head=True)
        graft(fp16, FolderSource(checkpoint), weight_format="fp16")
        like_export = fp16 / f"{MTP_STEM}.xml"
        grafts.append(("graft fp16 (the export's format)", like_export))
    scale, rows = compare_heads(export, grafts, positions)
    log("")
    log(
        f"(a) last_hidden_state, one prefill of {positions} positions, exact numerics (f32, no "
        f"dynamic quantization), the same random inputs; the export's head "
        f"({scale['precision']}): max |x| {scale['max']:.3g}, RMS {scale['rms']:.3g}"
    )
    for row in rows:
        log(
            f"  {row['label']:<42} [{row['precision']}]: max |diff| {row['max']:.3g} "
            f"(positions 0-{EARLY - 1}: {row['early']:.3g}), mean {row['mean']:.3g}"
        )
    log(
        "  note: optimum's head stores RoPE inv_freq as float16 (the graft: float32), a phase "
        "error that grows with the position"
    )
    if smoke:
        log(
            "  note: the auto graft read the BF16 copy; the export and the other grafts, the fp32 "
            "checkpoint: BF16 rounding is most of the auto row's difference"
        )
    if scale["max"] == 0:
        log(
            "  note: the export's head outputs all zeros on these inputs (the agree variant: "
            "its final norm weight is -1, and Qwen3.5's RMSNorm multiplies by 1 + weight), so "
            "this comparison cannot tell heads apart; the bigram variant's can"
        )
    if export_precision.startswith("INT"):
        log(
            f"  note: the export's head is {export_precision}-compressed; the graft offers fp16, "
            "int8 and fp32, and auto picks int8 for a compressed trunk: the closest format"
        )
    for row in rows:
        check.require(math.isfinite(row["max"]), f"{row['label']}: the difference is not finite")
    same_format = rows[-1] if like_export is not None else None
    if same_format is not None:
        # Same weights, same format: only the RoPE frequencies' float16 and rounding may
        # separate them.
        limit = 0.001 * max(scale["max"], 1e-6)
        log(
            f"  like-for-like row within 0.1 % of the export head's largest value ({limit:.3g}): "
            + ("yes" if same_format["max"] <= limit else "NO")
        )
        check.require(same_format["max"] <= limit, f"{same_format['label']}: heads differ")

    # (b) drafts through the app's decoder.
    log("")
    log(f"(b) greedy, exact numerics, {tokens} new tokens, the app's decoder (check_generation):")
    env = child_env(work)
    for depth in depths:
        theirs = check_generation(reference, depth, tokens, env, work)
        ours = check_generation(headless, depth, tokens, env, work)
        same = ours.get("mtp_tokens") == theirs.get("mtp_tokens") and "mtp_tokens" in ours
        log(
            f"  n={depth}: export head MTP == plain: {_yes(theirs)}, acceptance "
            f"{_rate(theirs)}; graft ({result['weight_format']}) MTP == plain: {_yes(ours)}, "
            f"acceptance {_rate(ours)}; same MTP tokens: {'yes' if same else 'no'}"
        )
        for who, found in (("export head", theirs), ("graft", ours)):
            check.require(found.get("equal") is True, f"n={depth}: {who}: {found.get('error')}")
            check.fraction(f"n={depth}: {who} acceptance", found.get("acceptance_rate"))
        check.require(same, f"n={depth}: the graft's MTP tokens differ from the export head's")


def _yes(found: dict[str, Any]) -> str:
    if "error" in found:
        return f"FAILED ({found['error']})"
    return "yes" if found.get("equal") else f"NO (first difference at {found['first_difference']})"


def _rate(found: dict[str, Any]) -> str:
    rate = found.get("acceptance_rate")
    return f"{rate:.3f}" if isinstance(rate, int | float) else "-"


if __name__ == "__main__":
    sys.exit(main())
