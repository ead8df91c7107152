"""`qwen-mtp-desktop export` with the real exporter and the real runtime, on the tiny models.

Exports (each ~35-45 s here): dense fp16 from a hub id found in an offline HF cache (MTP head
INT8), dense int8 (MTP INT4), dense int4 (optimum's default MTP), MoE int4 (MTP uncompressed).
Every result must verify (IR precision per component, MTP greedy == plain greedy), carry a
complete manifest, and load in raw openvino_genai with the MTP draft model; the int4 ones also in
optimum-intel's OVModelForVisualCausalLM (in a subprocess, so this process never loads torch).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from qwen_mtp_desktop.core.models.folders.checksums import verify_checksums
from qwen_mtp_desktop.core.models.folders.manifest import MANIFEST_NAME, read_manifest
from tests.models import cached_checkpoint

pytestmark = pytest.mark.export

HUB_ID = "tiny-qwen/qwen35-dense"
COMMIT = "1234567890abcdef1234567890abcdef12345678"
# Runs the real CLI entry point; registers the export command if cli.py does not list it yet.
CLI = textwrap.dedent(
    """
    import sys
    from qwen_mtp_desktop import cli
    from qwen_mtp_desktop.commands import export
    sys.exit(cli.main(sys.argv[1:]))
    """
)


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, **(env or {})},
    )


@dataclass(frozen=True)
class Case:
    name: str
    moe: bool
    weight_format: str
    mtp: str
    expect_main: str
    expect_mtp: str
    hub: bool = False

    def args(self) -> list[str]:
        out = ["--weight-format", self.weight_format, "--mtp-weight-format", self.mtp]
        return out + (["--group-size", "16"] if "int4" in (self.weight_format, self.mtp) else [])


CASES = [
    Case("dense-hub-fp16-mtp-int8", False, "fp16", "int8", "FP16", "INT8", hub=True),
    Case("dense-int8-mtp-int4", False, "int8", "int4", "INT8", "INT4"),
    Case("dense-int4-mtp-default", False, "int4", "default", "INT4", "INT4"),
    Case("moe-int4-mtp-none", True, "int4", "none", "INT4", "FP16"),
]


@dataclass
class Exported:
    case: Case
    out: Path
    payload: dict[str, Any]
    stderr: str


@pytest.fixture(scope="module", params=CASES, ids=[c.name for c in CASES])
def exported(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[Exported]:
    case: Case = request.param
    root = tmp_path_factory.mktemp(case.name)
    checkpoint = cached_checkpoint(moe=case.moe)
    env: dict[str, str] = {"HF_HUB_OFFLINE": "1"}
    source = str(checkpoint)
    if case.hub:  # the hub-id path, offline, from a cache laid out like huggingface_hub's
        repo = root / "hf-home" / "hub" / f"models--{HUB_ID.replace('/', '--')}"
        shutil.copytree(checkpoint, repo / "snapshots" / COMMIT)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(COMMIT)
        env["HF_HOME"] = str(root / "hf-home")
        source = HUB_ID
    out = root / "models" / case.name
    result = run_cli("export", source, str(out), *case.args(), "--json", env=env)
    assert result.returncode == 0, result.stderr[-4000:] + result.stdout[-2000:]
    payload = json.loads(result.stdout)
    print(
        f"\nMEASURE {case.name}: {payload['seconds']:.1f} s, peak RSS "
        f"{payload['peak_rss_bytes'] / 1e9:.2f} GB, estimate "
        f"{payload['preflight']['estimate']}, size "
        f"{sum(p.stat().st_size for p in out.iterdir())}, stages {payload['stage_seconds']}"
    )
    yield Exported(case, out, payload, result.stderr)


def test_export_verifies(exported: Exported) -> None:
    payload, case = exported.payload, exported.case
    assert payload["status"] == "succeeded"
    verification = payload["verification"]
    assert verification["ok"], verification["items"]
    assert verification["precisions"]["language_model"].startswith(case.expect_main)
    assert verification["precisions"]["mtp"].startswith(case.expect_mtp)
    generation = verification["generation"]
    assert generation["equal"] and generation["tokens"] == 32
    assert (exported.out / "openvino_mtp_model.xml").is_file()
    assert (exported.out / "openvino_mtp_model.bin").is_file()
    # Progress reached the user: stages were printed on stderr.
    assert "Converting the MTP head" in exported.stderr
    # Nothing left beside the model.
    assert [p.name for p in exported.out.parent.iterdir()] == [exported.out.name]


def test_manifest_is_complete(exported: Exported) -> None:
    manifest = read_manifest(exported.out)
    assert manifest is not None
    case = exported.case
    if case.hub:
        assert (manifest.source, manifest.revision) == (HUB_ID, COMMIT)
    else:
        assert manifest.source == str(cached_checkpoint(moe=case.moe))
    assert manifest.options["weight_format"] == case.weight_format
    assert manifest.options["mtp_weight_format"] == case.mtp
    assert manifest.options["trust_remote_code"] is False
    for package in ("optimum-intel", "transformers", "nncf", "torch", "openvino"):
        assert manifest.versions.get(package), package
    for package in ("openvino-genai", "openvino-tokenizers"):
        assert manifest.versions.get(package), package
    assert manifest.duration_s and manifest.duration_s > 0
    assert manifest.peak_rss_bytes and manifest.peak_rss_bytes > 100 * 1024**2
    assert "openvino_mtp_model.bin" in manifest.files
    assert MANIFEST_NAME not in manifest.files
    assert [d.code for d in verify_checksums(exported.out)] == ["CHECKSUMS_OK"]


def test_loads_in_openvino_genai_with_mtp(exported: Exported) -> None:
    import openvino_genai

    device = "CPU"
    scheduler = openvino_genai.SchedulerConfig()
    scheduler.enable_prefix_caching = False
    pipe = openvino_genai.VLMPipeline(
        str(exported.out),
        device,
        draft_model=openvino_genai.draft_model(str(exported.out), device, mtp_mode=True),
        scheduler_config=scheduler,
    )
    config = pipe.get_generation_config()
    config.max_new_tokens = 8
    config.num_assistant_tokens = 1
    result = pipe.generate("Count from 1 to 5.", generation_config=config)
    assert len(result.texts) == 1


def test_loads_in_optimum_intel(exported: Exported) -> None:
    if exported.case.weight_format != "int4":
        pytest.skip("one load per architecture is enough (int4 dense and MoE)")
    code = textwrap.dedent(
        f"""
        from optimum.intel import OVModelForVisualCausalLM
        from transformers import AutoTokenizer
        model = OVModelForVisualCausalLM.from_pretrained({str(exported.out)!r})
        assert model.mtp is not None, "no MTP part"
        tokenizer = AutoTokenizer.from_pretrained({str(exported.out)!r})
        inputs = tokenizer("Count from 1 to 5.", return_tensors="pt")
        out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
        print("generated", out.shape[-1] - inputs["input_ids"].shape[-1])
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "generated 4" in result.stdout
