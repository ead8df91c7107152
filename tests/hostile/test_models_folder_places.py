"""Class 16 (issue 29): the models folder is never a kernel pseudo-filesystem or the shared
temp folder itself, and a folder inside a temp folder comes with a warning.

Hypothesis builds the folder text from a place (/proc, /sys, /dev, /dev/shm, /sys/fs/cgroup,
/tmp, /var/tmp, Python's temp folder, a link in the user's files pointing at one of those, a
disk folder), a tail of path parts ("", "models", "self/fd", "..", ".", spaces) and spelling
(trailing slash, doubled slashes, `~` for the home folder when it lies there). Properties: a
folder that resolves into a pseudo-filesystem is refused with a message saying it belongs to
the kernel; a temp folder itself is refused; one inside a temp folder is accepted with a
warning that says it can disappear; the check creates nothing and never raises anything but
FolderChoiceError.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.conftest import snapshot, touched
from tests.reliability import figures

EXAMPLES = 300
_PLACES = ["/proc", "/sys", "/dev", "/dev/shm", "/sys/fs/cgroup", "/tmp", "/var/tmp", "temp",
           "link_proc", "link_tmp", "disk"]  # fmt: skip
_TAILS = ["", "models", "self/fd", "1/root", "a b/models", "..", ".", "x/../y"]


def _expected(folder: Path) -> str:
    """ "kernel", "temp_root", "temp_inside" or "other" for the resolved folder."""
    from qwen_mtp_desktop.core.models.data_folders import temp_folders
    from qwen_mtp_desktop.core.models.library import resolved

    real = resolved(folder)  # links followed; /proc/1/root refuses even that
    if any(real == r or r in real.parents for r in (Path("/proc"), Path("/sys"), Path("/dev"))):
        return "kernel"
    temps = temp_folders()
    if real in temps:
        return "temp_root"
    if any(t in real.parents for t in temps):
        return "temp_inside"
    return "other"


class TestModelsFolderPlaces:
    def test_pseudo_filesystems_and_temp_roots_are_refused(
        self, tmp_path: Path, decoy: Path
    ) -> None:
        from qwen_mtp_desktop.core.files.paths import app_paths
        from qwen_mtp_desktop.core.models.data_folders import (
            FolderChoiceError,
            apply_models_folder,
            choose_models_folder,
        )
        from qwen_mtp_desktop.core.settings.store import Settings

        paths = app_paths().ensure()
        disk = Path.home() / ".cache" / "qwen-mtp-hostile-disk"  # on the root file system
        (decoy / "link-proc").symlink_to("/proc/self", target_is_directory=True)
        (decoy / "link-tmp").symlink_to(tempfile.gettempdir(), target_is_directory=True)
        before = snapshot(decoy)
        outcomes: dict[str, int] = {}

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(
            place=st.sampled_from(_PLACES),
            tail=st.sampled_from(_TAILS),
            trailing=st.booleans(),
            doubled=st.booleans(),
        )
        def case(place: str, tail: str, trailing: bool, doubled: bool) -> None:
            base = {
                "temp": tempfile.gettempdir(),
                "link_proc": str(decoy / "link-proc"),
                "link_tmp": str(decoy / "link-tmp"),
                "disk": str(disk),
            }.get(place, place)
            text = base + ("/" + tail if tail else "")
            if doubled:
                text = text.replace("/", "//", 1)
            if trailing:
                text += "/"
            expected = _expected(Path(text))
            try:
                choice = choose_models_folder(text, paths)
            except FolderChoiceError as exc:
                outcome = "refused"
                message = str(exc)
                if expected == "kernel":
                    assert "kernel" in message, (text, message)
                elif expected == "temp_root":
                    assert "shared temporary folder" in message, (text, message)
            else:
                outcome = "warned" if choice.warning else "accepted"
                assert expected in ("temp_inside", "other"), (text, expected, choice)
                if expected == "temp_inside":
                    assert "can disappear" in choice.warning, (text, choice)
                    change = apply_models_folder(Settings(), choice.folder, paths,
                                                 warning=choice.warning)  # fmt: skip
                    assert change.message.endswith("Note: " + choice.warning)
                else:
                    assert choice.warning == "", (text, choice)
            if expected in ("kernel", "temp_root"):
                assert outcome == "refused", (text, expected)
            outcomes[f"{expected}:{outcome}"] = outcomes.get(f"{expected}:{outcome}", 0) + 1

        case()
        assert not disk.exists(), "the check created the folder"
        files_touched = touched(before, snapshot(decoy))
        assert files_touched == 0
        assert {"kernel:refused", "temp_root:refused", "temp_inside:warned"} <= set(outcomes)
        figures.record(
            "hostile",
            models_folder_inputs=sum(outcomes.values()),
            models_folder_outcomes=outcomes,
            models_folder_files_touched=files_touched,
        )

    def test_a_memory_file_system_is_named_in_the_warning(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No tmpfs can be mounted here, so the mount table says one is at `ram`."""
        from qwen_mtp_desktop.core.models import data_folders

        ram = Path(os.path.realpath(tmp_path)) / "ram"
        real = data_folders._mounts()
        monkeypatch.setattr(data_folders, "_mounts", lambda: [*real, (ram, "tmpfs")])
        monkeypatch.setattr(data_folders, "temp_folders", lambda: set())
        warning = data_folders.models_folder_warning(ram / "models")
        assert "kept in memory (tmpfs)" in warning and "next restart" in warning
        assert data_folders.models_folder_warning(tmp_path / "disk") == ""
