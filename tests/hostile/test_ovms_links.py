"""Class 9 (issue 29): OVMS deploy never carries a file from outside the model folder.

A downloaded model folder may hold symbolic links. Hypothesis adds links to a copy of the demo
export (new names, or in place of its own files) pointing at the user's private files
(absolute and relative), at files of the model itself (directly, through `..`, through another
link), at folders, devices, FIFOs, dangling and looping targets, and runs `deploy_ovms`.
Properties: a link whose target leaves the model folder makes the deploy fail with a message
naming the link and its target, and nothing is written; a deploy that succeeds holds no link
and no byte of the user's files, and every followed link gave its target's content. No hang
(FIFOs among the targets), the user's files and the model folder are unchanged.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.conftest import snapshot, touched
from tests.hostile.isolation import run_isolated
from tests.reliability import figures

EXAMPLES = 80

#: Names a link takes: new files, or the export's own files replaced by a link.
_NAMES = [
    "notes.txt",
    "weights.bin",
    "tokenizer_config.json",
    "openvino_mtp_model.bin",
    "chat_template.jinja",
    "preprocessor_config.json",
]
#: Where a link points ("outside" kinds must be refused).
_TARGETS = {
    "decoy_absolute": "outside",
    "decoy_relative": "outside",
    "decoy_folder": "folder",
    "inside_relative": "inside",
    "inside_absolute": "inside",
    "inside_dotdot": "inside",
    "chain_inside": "inside",
    "chain_outside": "outside",
    "dev_zero": "outside",
    "fifo_outside": "outside",
    "fifo_inside": "special",
    "dangling": "broken",
    "loop": "broken",
}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _make_link(model: Path, name: str, target: str, decoy: Path, scratch: Path) -> str:
    """Put a link called `name` in `model`; returns the name of the model file whose content
    it must deliver ("" when none)."""
    link = model / name
    if link.exists() or link.is_symlink():
        link.unlink()
    thesis = decoy / "Documents" / "thesis.txt"
    if target == "decoy_absolute":
        link.symlink_to(thesis)
    elif target == "decoy_relative":
        link.symlink_to(os.path.relpath(thesis, model))
    elif target == "decoy_folder":
        link.symlink_to(decoy / "Documents", target_is_directory=True)
    elif target == "inside_relative":
        link.symlink_to("config.json")
        return "config.json"
    elif target == "inside_absolute":
        link.symlink_to(model / "config.json")
        return "config.json"
    elif target == "inside_dotdot":
        link.symlink_to(Path("..") / model.name / "config.json")
        return "config.json"
    elif target == "chain_inside":
        hop = model / f".hop-{name}"  # one hop per link: two chains must not share it
        hop.symlink_to("config.json")
        link.symlink_to(hop.name)
        return "config.json"
    elif target == "chain_outside":
        hop = model / f".hop-{name}"
        hop.symlink_to(thesis)
        link.symlink_to(hop.name)
    elif target == "dev_zero":
        link.symlink_to("/dev/zero")
    elif target == "fifo_outside":
        fifo = scratch / "pipe"
        if not fifo.exists():
            os.mkfifo(fifo)
        link.symlink_to(fifo)
    elif target == "fifo_inside":
        fifo = model / ".pipe"
        if not fifo.exists():
            os.mkfifo(fifo)
        link.symlink_to(".pipe")
    elif target == "dangling":
        link.symlink_to(scratch / "missing")
    elif target == "loop":
        link.symlink_to(name)
    return ""


def links_case(examples: int, demo: str, decoy: str) -> dict[str, Any]:
    """Runs in the child: each example links into a fresh copy's state and deploys."""
    from qwen_mtp_desktop.core.models.ovms import OvmsDeployError, deploy_ovms

    work = Path(tempfile.mkdtemp(prefix="hostile-ovms-"))
    scratch = work / "scratch"
    scratch.mkdir()
    pristine = work / "pristine"
    shutil.copytree(demo, pristine, copy_function=os.link)  # hard links: fast, never written
    decoy_dir = Path(decoy)
    decoy_hashes = {_sha(p) for p in decoy_dir.rglob("*") if p.is_file()}
    counts = {"tried": 0, "refused": 0, "deployed": 0, "outside": 0}
    codes: set[str] = set()

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(
        links=st.lists(
            st.tuples(st.sampled_from(_NAMES), st.sampled_from(sorted(_TARGETS))),
            min_size=1,
            max_size=3,
            unique_by=lambda pair: pair[0],
        )
    )
    def case(links: list[tuple[str, str]]) -> None:
        counts["tried"] += 1
        model = work / "model"
        out = work / "repository"
        shutil.rmtree(model, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(pristine, model, copy_function=os.link)
        expected = {
            name: _make_link(model, name, target, decoy_dir, scratch) for name, target in links
        }
        kinds = {_TARGETS[target] for _name, target in links}
        try:
            deployment = deploy_ovms(model, out)
        except OvmsDeployError as exc:
            counts["refused"] += 1
            assert exc.message and exc.fix, exc
            assert not out.exists(), "a refused deploy left a repository"
            assert not list(work.glob(".repository.ovms-partial-*")), "staging left behind"
            if kinds & {"outside"}:
                counts["outside"] += 1
                codes.add(exc.code)
                if exc.code == "LINK_OUTSIDE":  # the message names the link and its target
                    assert "is a symbolic link to" in exc.message, exc.message
                    assert "outside the model folder" in exc.message, exc.message
            return
        counts["deployed"] += 1
        assert not kinds & {"outside", "special", "broken"}, (links, "deployed anyway")
        servable = deployment.servable_dir
        for path in out.rglob("*"):
            assert not path.is_symlink(), f"{path} is a link in the repository"
            if path.is_file():
                assert _sha(path) not in decoy_hashes, f"{path} carries a user file"
        for name, source in expected.items():
            if source:  # a followed link delivered its target's content
                assert _sha(servable / name) == _sha(pristine / source), name

    case()
    shutil.rmtree(work, ignore_errors=True)
    return {**counts, "codes": sorted(codes)}


class TestOvmsDeployLinks:
    @pytest.mark.subprocess
    def test_links_leaving_the_model_folder_are_refused(
        self, demo_model: Path, decoy: Path
    ) -> None:
        before = snapshot(decoy)
        demo_before = snapshot(demo_model)
        result = run_isolated(
            "tests.hostile.test_ovms_links:links_case",
            timeout_s=900,
            memory_mb=2048,
            examples=EXAMPLES,
            demo=str(demo_model),
            decoy=str(decoy),
        )
        files_touched = touched(before, snapshot(decoy)) + touched(
            demo_before, snapshot(demo_model)
        )
        assert result["tried"] >= EXAMPLES * 0.9
        assert result["refused"] > 0 and result["deployed"] > 0, result
        assert result["outside"] > 0, result
        # A link out is refused as such, or earlier, when the link is a file the app reads
        # (the folder is then not a usable model) or another link in it is broken.
        assert "LINK_OUTSIDE" in result["codes"], result
        assert set(result["codes"]) <= {"LINK_OUTSIDE", "NOT_REGULAR", "MODEL_NOT_USABLE"}, result
        assert files_touched == 0
        figures.record(
            "hostile",
            ovms_links_inputs=result["tried"],
            ovms_links_refused=result["refused"],
            ovms_links_deployed=result["deployed"],
            ovms_links_files_touched=files_touched,
        )

    def test_hugging_face_cache_snapshot_links_are_followed(
        self, demo_model: Path, tmp_path: Path
    ) -> None:
        """A snapshot of the HF cache links every file to ../../blobs/<hash>: that stays inside
        the cache's repository, so it deploys (with the content, not the links)."""
        from qwen_mtp_desktop.core.models.ovms import deploy_ovms

        repo = tmp_path / "hub" / "models--OpenVINO--demo"
        snapshot_dir = repo / "snapshots" / "0123abcd"
        (repo / "blobs").mkdir(parents=True)
        snapshot_dir.mkdir(parents=True)
        for source in demo_model.iterdir():
            blob = repo / "blobs" / _sha(source)
            if not blob.exists():
                os.link(source, blob)
            (snapshot_dir / source.name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
        deployment = deploy_ovms(snapshot_dir, tmp_path / "out")
        placed = deployment.servable_dir / "openvino_language_model.bin"
        assert not placed.is_symlink()
        assert _sha(placed) == _sha(demo_model / "openvino_language_model.bin")

    @pytest.mark.parametrize("relative", [False, True])
    def test_the_error_names_the_link_and_its_target(
        self, demo_copy: Path, decoy: Path, tmp_path: Path, relative: bool
    ) -> None:
        from qwen_mtp_desktop.core.models.ovms import OvmsDeployError, deploy_ovms

        secret = decoy / "notes.md"
        (demo_copy / "notes.md").symlink_to(
            os.path.relpath(secret, demo_copy) if relative else secret
        )
        with pytest.raises(OvmsDeployError) as caught:
            deploy_ovms(demo_copy, tmp_path / "out")
        assert caught.value.code == "LINK_OUTSIDE"
        assert f"notes.md is a symbolic link to {secret.resolve()}" in caught.value.message
        assert "Nothing was written" in caught.value.message
        assert "copy it into the model folder" in caught.value.fix
        assert not (tmp_path / "out").exists()
