"""`models deploy-ovms` / `core.models.ovms` on real exports: the bundled demo model and the
tiny Qwen3.5-MoE export. The repository must be complete and consistent with the model, load with
the
openvino-genai calls OVMS's source makes, appear atomically, and never touch the user's files.

OVMS itself cannot run here; `load_like_ovms` follows
src/llm/language_model/continuous_batching/servable_initializer.cpp (model_server 7e4df0c7a):
paths resolved against the graph's folder, one SchedulerConfig from the node options, the draft
model from `draft_models_path` with the same scheduler settings, ContinuousBatchingPipeline.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import openvino_genai as ov_genai
import pytest

import qwen_mtp_desktop.cli as cli
from qwen_mtp_desktop.core.models.folders.inspection import inspect_model
from qwen_mtp_desktop.core.models.ovms import (
    STAGING_MARK,
    OvmsDeployError,
    OvmsOptions,
    deploy_ovms,
)
from tests.ovms_format import check_config, check_graph

REPO_ROOT = Path(__file__).resolve().parents[2]


def snapshot(folder: Path) -> dict[str, tuple[int, str]]:
    """name -> (size, sha256) of every file: what "the export is untouched" means."""
    return {
        p.name: (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def check_repository(out: Path, model_dir: Path, k: int | None) -> dict[str, Any]:
    """Check OUT against OVMS's format and against the model; return the graph's options."""
    (entry,) = check_config(json.loads((out / "config.json").read_text()))
    servable = out / entry["base_path"]  # relative to config.json (docs/mediapipe.md)
    assert servable.is_dir() and entry["name"] == servable.name
    options = check_graph((servable / "graph.pbtxt").read_text())
    assert (servable / options["models_path"]).resolve() == servable.resolve()

    # Complete: every file of the export, same bytes; plus the two generated files.
    source_files = {p.name for p in model_dir.iterdir() if p.is_file()}
    written = {p.name for p in servable.iterdir()}
    assert written == source_files | {"graph.pbtxt"}
    for name in source_files - {"generation_config.json"}:
        a, b = model_dir / name, servable / name
        assert a.samefile(b) or a.read_bytes() == b.read_bytes(), name

    report = inspect_model(model_dir, measure_memory=False)
    vlm = (model_dir / "openvino_text_embeddings_model.xml").is_file()
    assert options["pipeline_type"] == ("VLM_CB" if vlm else "LM_CB")
    generation = json.loads((servable / "generation_config.json").read_text())
    source_generation = json.loads((model_dir / "generation_config.json").read_text())
    if report.mtp_usable:
        draft = servable / options["draft_models_path"]
        assert (draft / "openvino_mtp_model.xml").is_file()
        assert options["draft_device"] == options["device"]
        assert options["enable_prefix_caching"] is False
        assert generation == source_generation | {"num_assistant_tokens": k}
    else:
        assert "draft_models_path" not in options and "draft_device" not in options
        assert generation == source_generation
    # Readable by OVMS's own user through a read-only mount.
    for path in [
        out / "config.json",
        servable / "graph.pbtxt",
        servable / "generation_config.json",
    ]:
        assert path.stat().st_mode & 0o004
    readme = (out / "README.md").read_text()
    assert "/v3/chat/completions" in readme and "docker run" in readme
    assert "What was and was not run here" in readme and "cannot run on this machine" in readme
    assert (out / "kserve.yaml").is_file()
    return options


def load_like_ovms(servable: Path) -> ov_genai.ContinuousBatchingPipeline:
    options = check_graph((servable / "graph.pbtxt").read_text())
    scheduler = ov_genai.SchedulerConfig()
    scheduler.cache_size = options.get("cache_size", 0)
    scheduler.enable_prefix_caching = options.get("enable_prefix_caching", False)
    scheduler.max_num_batched_tokens = options.get("max_num_batched_tokens", 256)
    scheduler.max_num_seqs = options.get("max_num_seqs", 256)
    scheduler.dynamic_split_fuse = options.get("dynamic_split_fuse", True)
    properties: dict[str, Any] = {}
    if "draft_models_path" in options:
        properties["draft_model"] = ov_genai.draft_model(
            str(servable / options["draft_models_path"]),
            options.get("draft_device", ""),
            scheduler_config=scheduler,
        )
    return ov_genai.ContinuousBatchingPipeline(
        str(servable / options["models_path"]), scheduler, options["device"], properties
    )


def test_demo_repository_is_complete_and_loads_like_ovms(demo_model: Path, tmp_path: Path) -> None:
    before = snapshot(demo_model)
    out = tmp_path / "ovms repo"
    result = deploy_ovms(demo_model, out, OvmsOptions(num_assistant_tokens=2))
    assert snapshot(demo_model) == before
    assert result.mtp and not result.moe and result.layout == "vlm"
    assert result.name == "demo-model"
    assert result.linked_files + result.copied_files == len(before) - 1  # not generation_config
    check_repository(out, demo_model, 2)

    servable = out / result.name
    config = ov_genai.GenerationConfig(str(servable / "generation_config.json"))
    assert config.num_assistant_tokens == 2
    config.max_new_tokens = 24
    prompt = "1 2 3 4 5 6"
    results = load_like_ovms(servable).generate([prompt], [config])
    metrics = results[0].extended_perf_metrics
    # Speculative decoding ran: only its metrics report drafts and acceptance.
    assert type(metrics).__name__ == "SDPerModelsPerfMetrics"
    assert metrics.get_num_accepted_tokens() > 0
    assert 0 < metrics.get_draft_acceptance_rate() <= 1

    plain_scheduler = ov_genai.SchedulerConfig()
    plain = ov_genai.ContinuousBatchingPipeline(str(demo_model), plain_scheduler, "CPU", {})
    plain_config = ov_genai.GenerationConfig(str(demo_model / "generation_config.json"))
    plain_config.max_new_tokens = 24
    expected = plain.generate([prompt], [plain_config])[0].m_generation_ids
    assert results[0].m_generation_ids == expected


@pytest.mark.export
@pytest.mark.export
def test_moe_repository_is_complete(moe_model: Path, tmp_path: Path) -> None:
    before = snapshot(moe_model)
    out = tmp_path / "moe"
    result = deploy_ovms(moe_model, out, OvmsOptions(num_assistant_tokens=4, name="qwen-moe"))
    assert snapshot(moe_model) == before
    assert result.moe and result.name == "qwen-moe"
    report = inspect_model(moe_model, measure_memory=False)
    assert result.mtp == report.mtp_usable
    check_repository(out, moe_model, 4)
    readme = (out / "README.md").read_text()
    assert "mixture of experts" in readme
    assert "MTP on a mixture-of-experts model in OVMS" in readme


def test_export_without_mtp_head_gets_a_plain_graph(demo_copy: Path, tmp_path: Path) -> None:
    for suffix in (".xml", ".bin"):
        (demo_copy / f"openvino_mtp_model{suffix}").unlink()
    result = deploy_ovms(demo_copy, tmp_path / "plain")
    assert not result.mtp and result.num_assistant_tokens is None
    check_repository(tmp_path / "plain", demo_copy, None)
    assert "MTP speculative decoding: off" in (tmp_path / "plain" / "README.md").read_text()


def test_non_empty_output_is_refused_and_left_alone(demo_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    with pytest.raises(OvmsDeployError) as caught:
        deploy_ovms(demo_model, out)
    assert caught.value.code == "OUT_NOT_EMPTY"
    assert "nothing was written or deleted" in caught.value.message
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert (out / "notes.txt").read_text() == "my notes"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]  # no staging left


def test_an_empty_output_folder_is_used(demo_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    deploy_ovms(demo_model, out)
    check_repository(out, demo_model, 3)


def test_output_filled_while_writing_is_not_replaced(demo_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "racy"
    out.mkdir()

    def user_writes(done: int, total: int) -> None:
        (out / "theirs.txt").write_text("written meanwhile")

    with pytest.raises(OvmsDeployError) as caught:
        deploy_ovms(demo_model, out, progress=user_writes)
    assert caught.value.code == "OUT_NOT_EMPTY"
    assert [p.name for p in out.iterdir()] == ["theirs.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["racy"]


KILLER = """
import os, signal, sys
from pathlib import Path
from qwen_mtp_desktop.core.models.ovms import deploy_ovms

def progress(done, total):
    if done * 2 >= total:
        os.kill(os.getpid(), signal.SIGKILL)

deploy_ovms(Path(sys.argv[1]), Path(sys.argv[2]), progress=progress)
"""


@pytest.mark.subprocess
def test_killed_mid_write_leaves_no_repository(demo_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "killed"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, str(demo_model), str(out)], env=env, timeout=120
    )
    assert proc.returncode == -9
    assert not out.exists()
    (staging,) = tmp_path.iterdir()
    assert staging.name.startswith(".killed.ovms-partial-")  # hidden, and named as partial
    assert (staging / STAGING_MARK).is_file()
    assert not (staging / "config.json").exists()  # OVMS could not start from it
    # The next run succeeds and clears the marked leftover.
    deploy_ovms(demo_model, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["killed"]
    check_repository(out, demo_model, 3)


def test_other_file_system_gets_copies(demo_model: Path, tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == demo_model.stat().st_dev:
        pytest.skip("no second file system here to force copies")
    out = shm / f"qwen-ovms-test-{os.getpid()}"
    try:
        result = deploy_ovms(demo_model, out)
        assert result.linked_files == 0 and result.copied_files > 0
        check_repository(out, demo_model, 3)
        assert "0 model files are hard links" in (out / "README.md").read_text()
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_cli_writes_and_refuses(
    demo_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    code = cli.main(
        [
            "models",
            "deploy-ovms",
            str(demo_model),
            str(out),
            "--num-assistant-tokens",
            "1",
            "--json",
        ]
    )
    assert code == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["schema_version"] == 1 and payload["num_assistant_tokens"] == 1
    assert payload["out"] == str(out) and payload["mtp"] is True
    check_repository(out, demo_model, 1)

    assert cli.main(["models", "deploy-ovms", str(demo_model), str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: The output folder") and "not empty" in err
    assert "Traceback" not in err

    assert cli.main(["models", "deploy-ovms", str(tmp_path / "nope"), str(tmp_path / "x")]) == 2
    assert "does not exist" in capsys.readouterr().err

    unrelated = tmp_path / "not a model"
    unrelated.mkdir()
    (unrelated / "readme.txt").write_text("hello")
    assert cli.main(["models", "deploy-ovms", str(unrelated), str(tmp_path / "y")]) == 1
    assert "not a model the app can read" in capsys.readouterr().err
    assert not (tmp_path / "y").exists()

    code = cli.main(
        ["models", "deploy-ovms", str(demo_model), str(tmp_path / "z"), "--name", "a b"]
    )
    assert code == 1
    assert "cannot be an OVMS model name" in capsys.readouterr().err

    out = tmp_path / "text"
    assert cli.main(["models", "deploy-ovms", str(demo_model), str(out)]) == 0
    text = capsys.readouterr().out
    assert "OVMS repository written" in text and "docker run" in text
    assert "Not run here" in text and "Not confirmed from OVMS's sources" in text


@pytest.mark.subprocess
def test_a_running_writers_staging_folder_is_left_alone(demo_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "shared"
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        staging = tmp_path / ".shared.ovms-partial-0000live"
        staging.mkdir()
        (staging / STAGING_MARK).write_text(f"{writer.pid} still writing\n")
        deploy_ovms(demo_model, out)
        assert (staging / STAGING_MARK).is_file()  # another run's work in progress
        check_repository(out, demo_model, 3)
    finally:
        writer.kill()
        writer.wait()


def test_symlinked_or_file_output_is_refused(demo_model: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OvmsDeployError, match="symbolic link"):
        deploy_ovms(demo_model, link)
    file = tmp_path / "a file"
    file.write_text("mine")
    with pytest.raises(OvmsDeployError, match="is not a folder"):
        deploy_ovms(demo_model, file)
    assert file.read_text() == "mine" and not any(target.iterdir())
    with pytest.raises(OvmsDeployError, match="inside the model folder"):
        deploy_ovms(demo_model, demo_model / "ovms")
