"""What the export wizard shows of the exporter's output, and the log file that keeps all of it
(issue 28: torch's CUDA probing and the libraries' deprecation notes were shown to users)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.models.export.exporter_log import (
    KEPT_LOGS,
    ExportLog,
    continues_warning,
    hidden_lines,
)

#: The first lines of a real INT8 export of the demo checkpoint (paths shortened).
SAMPLE = (Path(__file__).parent / "data" / "exporter_log_sample.txt").read_text().splitlines()


def test_known_noise_and_python_warnings_are_hidden_the_rest_is_shown() -> None:
    shown = [line for line, hidden in zip(SAMPLE, hidden_lines(SAMPLE), strict=True) if not hidden]
    hidden = [line for line, flag in zip(SAMPLE, hidden_lines(SAMPLE), strict=True) if flag]
    for noise in ("No CUDA runtime", "`torch_dtype` is deprecated", "The fast path is not",
                  "`loss_type=None`", "AttentionInterface", "Could not infer whether",
                  "TracerWarning", "if position_ids.ndim"):  # fmt: skip
        assert any(noise in line for line in hidden), noise
        assert not any(noise in line for line in shown), noise
    # What the export is doing stays: progress and the compression summary.
    assert any(line.startswith("Loading weights: 100%") for line in shown)
    assert any(line.startswith("INFO:nncf:Statistics") for line in shown)
    assert any("Weight compression mode" in line for line in shown)


lines = st.lists(
    st.sampled_from(
        [*SAMPLE, "a", "  b", "x.py:1: UserWarning: w", "WARNING:n:m", "", "cuda probe"]
    ),
    max_size=40,
)


@given(lines, st.data())
def test_hiding_does_not_depend_on_batching(batch: list[str], data: st.DataObject) -> None:
    """Lines arrive in batches: flagging batch by batch equals flagging them all at once."""
    cut = data.draw(st.integers(0, len(batch)))
    first = hidden_lines(batch[:cut])
    rest = hidden_lines(batch[cut:], after_hidden=continues_warning(batch[:cut]))
    assert first + rest == hidden_lines(batch)


def test_the_log_file_keeps_every_line_and_only_the_newest_logs(tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    for index in range(KEPT_LOGS + 5):
        (folder / f"2020010{index:03d}-old.log").write_text("old")
    log = ExportLog(folder, "Qwen/Qwen3.5 0.8B")
    for line in SAMPLE:
        log.write(line)
    log.close()
    assert log.path is not None and log.path.parent == folder
    assert log.path.read_text().splitlines() == SAMPLE
    assert "/" not in log.path.name[len("20260101-000000-") :]
    assert len(list(folder.glob("*.log"))) == KEPT_LOGS
    log.write("after close")  # ignored, not an error


def test_a_log_that_cannot_be_written_never_stops_an_export(tmp_path: Path) -> None:
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    log = ExportLog(blocked / "exports", "x")
    log.write("line")
    log.close()
    assert log.path is None
