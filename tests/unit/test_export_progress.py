"""The exporter-output parser, on lines recorded from real exports of the tiny fixtures."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.models.export.options import ExportOptions
from qwen_mtp_desktop.core.models.export.process_group import _split_lines
from qwen_mtp_desktop.core.models.export.progress import (
    ProgressEvent,
    ProgressParser,
    expected_compressions,
    read_markers,
    stage_plan,
)

# `python -m qwen_mtp_desktop.core.models.export.optimum_cli export openvino --task
# image-text-to-text
#  --weight-format int4 --group-size 16 --group-size-fallback ignore` on the dense fixture
# (stdout and stderr merged, tqdm's \r frames split into lines, long lines cut).
RECORDED_INT4 = """\
[qmtp] {"event":"stage","stage":"loading"}
`torch_dtype` is deprecated! Use `dtype` instead!
The fast path is not available because one of the required library is not installed.
Loading weights:   0%|          | 0/76 [00:00<?, ?it/s]
Loading weights:   1%|▏         | 1/76 [00:00<00:00, 7037.42it/s, Materializing param=model.x]
Loading weights:  51%|█████▏    | 39/76 [00:00<00:00, 1599.05it/s, Materializing param=model.y]
Loading weights: 100%|██████████| 76/76 [00:00<00:00, 2169.09it/s, Materializing param=model.z]
[qmtp] {"event":"stage","stage":"converting","part":"language_model"}
`loss_type=None` was set in the config but it is unrecognized.
/x/modeling_qwen3_5.py:1348: TracerWarning: Converting a tensor to a Python boolean might cause
  if position_ids.ndim == 3 and position_ids.shape[0] == 4:
[qmtp] {"event":"stage","stage":"converting","part":"vision_embeddings"}
[qmtp] {"event":"stage","stage":"converting","part":"vision_embeddings_merger"}
[qmtp] {"event":"stage","stage":"converting","part":"text_embeddings"}
[qmtp] {"event":"stage","stage":"converting","part":"vision_embeddings_pos"}
[qmtp] {"event":"stage","stage":"converting","part":"mtp"}
[qmtp] {"event":"stage","stage":"tokenizer"}
[qmtp] {"event":"stage","stage":"compressing"}
Could not infer whether the model was already converted or not to the OpenVINO IR.
[qmtp] {"event":"stage","stage":"compressing","part":"lm_model"}
INFO:nncf:Statistics of the bitwidth distribution:
│ int4_asym, group size 16  │ 78% (31 / 35)               │ 100% (31 / 31)                         │
[qmtp] {"event":"progress","fraction":0.2115,"label":"Applying Weight Compression"}
[qmtp] {"event":"progress","fraction":1.0,"label":"Applying Weight Compression"}
Applying Weight Compression ━━━━━━━━━━━━━━━━━━━━━━━━━━━ 100% • 0:00:00 • 0:00:00
[qmtp] {"event":"stage","stage":"compressing","part":"text_embeddings_model"}
[qmtp] {"event":"progress","fraction":1.0,"label":"Applying Weight Compression"}
[qmtp] {"event":"stage","stage":"compressing","part":"vision_embeddings_model"}
[qmtp] {"event":"stage","stage":"compressing","part":"vision_embeddings_merger_model"}
[qmtp] {"event":"stage","stage":"compressing","part":"vision_embeddings_pos_model"}
[qmtp] {"event":"stage","stage":"compressing","part":"mtp_model"}
WARNING:nncf:Group-wise quantization with group size 16 can't be applied to some nodes.
[qmtp] {"event":"progress","fraction":0.5,"label":"Applying Weight Compression"}
[qmtp] {"event":"progress","fraction":1.0,"label":"Applying Weight Compression"}
[qmtp] {"event":"stage","stage":"saving"}
[qmtp] {"event":"done"}
"""

# The same export through plain optimum-cli (no markers): only tqdm and rich lines.
RECORDED_RAW = """\
Loading weights:  50%|█████     | 38/76 [00:00<00:00, 1581.59it/s, Materializing param=a]
Loading weights: 100%|██████████| 76/76 [00:00<00:00, 2169.09it/s, Materializing param=b]
INFO:nncf:Statistics of the bitwidth distribution:
Applying Weight Compression ━━━━━━━━━━━━━━━━━━━━━━━━━━━ 100% • 0:00:00 • 0:00:00
"""


def _feed(parser: ProgressParser, text: str) -> list[ProgressEvent]:
    events = []
    for line in text.splitlines():
        event = parser.feed(line)
        if event is not None:
            events.append(event)
    return events


def test_recorded_int4_export_walks_every_stage_in_order() -> None:
    options = ExportOptions.recommended("int4", group_size=16)
    parser = ProgressParser(stage_plan(options, download=False), expected_compressions(options))
    events = _feed(parser, RECORDED_INT4)
    stages = []
    for event in events:
        if not stages or stages[-1] != event.stage:
            stages.append(event.stage)
    assert stages == ["loading", "converting", "tokenizer", "compressing", "saving"]
    labels = [e.label for e in events]
    assert "Converting the language model" in labels
    assert "Converting the MTP head" in labels
    assert "Compressing weights: MTP head" in labels
    assert "Compressing weights: language model" in labels
    assert "Converting the tokenizer" in labels
    # Loading reports tqdm's fraction, compression nncf's.
    assert any(e.stage == "loading" and e.fraction == 0.51 for e in events)
    assert any(e.stage == "compressing" and e.fraction == 0.2115 for e in events)
    overall = [e.overall for e in events]
    assert overall == sorted(overall), "the bar never goes back"
    assert 0 < overall[-1] < 1  # verifying and finishing are still to come


def test_finish_reaches_one() -> None:
    parser = ProgressParser(stage_plan(ExportOptions(weight_format="fp16"), download=False))
    _feed(parser, RECORDED_INT4)
    assert parser.enter("verifying").label == "Verifying the export"
    assert parser.finish().overall == 1.0


def test_raw_optimum_output_still_moves_the_bar() -> None:
    options = ExportOptions.recommended("int4")
    parser = ProgressParser(stage_plan(options, download=False), expected_compressions(options))
    events = _feed(parser, RECORDED_RAW)
    assert [e.stage for e in events] == ["loading", "loading", "compressing"]
    assert events[1].fraction == 1.0
    assert events[2].fraction == 1.0


def test_download_events_carry_bytes() -> None:
    options = ExportOptions.recommended("int4")
    parser = ProgressParser(stage_plan(options, download=True), expected_compressions(options))
    event = parser.feed('[qmtp] {"event":"download","done":1048576,"total":4194304}')
    assert event is not None
    assert event.stage == "downloading"
    assert event.fraction == 0.25
    assert (event.done_bytes, event.total_bytes) == (1048576, 4194304)
    assert event.label == "Downloading: 1.0 MB of 4.2 MB"  # decimal units, as everywhere
    assert 0 < event.overall < 0.25


def test_stage_plans() -> None:
    assert stage_plan(ExportOptions(weight_format="fp16"), download=False) == [
        "loading",
        "converting",
        "tokenizer",
        "saving",
        "verifying",
        "finishing",
    ]
    fp16_mtp8 = ExportOptions(weight_format="fp16", mtp_weight_format="int8")
    assert "compressing" in stage_plan(fp16_mtp8, download=True)
    assert stage_plan(fp16_mtp8, download=True)[0] == "downloading"
    assert expected_compressions(fp16_mtp8) == 1
    assert expected_compressions(ExportOptions(weight_format="int4")) == 6
    assert expected_compressions(ExportOptions(weight_format="int4", mtp_weight_format="none")) == 5
    assert expected_compressions(ExportOptions(weight_format="fp16")) == 0


def test_read_markers_ignores_noise() -> None:
    lines = ["hello", '[qmtp] {"event":"snapshot","path":"/p"}', "[qmtp] {broken", "[qmtp] [1]"]
    assert read_markers(lines) == [{"event": "snapshot", "path": "/p"}]


def test_split_lines_handles_carriage_returns() -> None:
    lines, rest = _split_lines(b"a 1%\rb 2%\rdone\r\nnext\npartial")
    assert lines == [b"a 1%", b"b 2%", b"done", b"next"]
    assert rest == b"partial"


@given(st.lists(st.text(max_size=200), max_size=50))
def test_parser_never_raises_on_arbitrary_output(lines: list[str]) -> None:
    options = ExportOptions.recommended("int4")
    parser = ProgressParser(stage_plan(options, download=True), expected_compressions(options))
    last = 0.0
    for line in lines:
        event = parser.feed(line)
        if event is not None:
            assert 0.0 <= event.overall <= 1.0
            assert event.overall >= last
            last = event.overall


@given(st.lists(st.sampled_from(RECORDED_INT4.splitlines()), max_size=60))
def test_parser_is_monotonic_on_shuffled_real_lines(lines: list[str]) -> None:
    parser = ProgressParser(stage_plan(ExportOptions.recommended("int4"), download=False))
    overall = [e.overall for e in (parser.feed(line) for line in lines) if e is not None]
    assert overall == sorted(overall)
    assert all(0 <= value <= 1 for value in overall)


def test_python_warnings_in_the_exporter_log_are_recognised() -> None:
    from qwen_mtp_desktop.core.models.export.progress import python_warning_lines

    lines = [
        "Loading checkpoint shards: 100%",
        "/x/torch/jit/_trace.py:165: TracerWarning: Converting a tensor to a Python boolean",
        "  if a.grad is not None:",
        "WARNING:nncf:Layer skipped",
        "Exporting the MTP model",
        "    indented but not after a warning",
        "",
    ]
    assert python_warning_lines(lines) == [False, True, True, True, False, False, False]
    assert python_warning_lines(["  source line"], after_warning=True) == [True]


@given(
    st.lists(st.sampled_from(["a", "  b", "x.py:1: UserWarning: w", "WARNING:n:m", ""])), st.data()
)
def test_python_warning_flags_do_not_depend_on_batching(
    lines: list[str], data: st.DataObject
) -> None:
    """Lines arrive in batches: flagging batch by batch equals flagging them all at once."""
    from qwen_mtp_desktop.core.models.export.progress import python_warning_lines

    cut = data.draw(st.integers(0, len(lines)))
    first = python_warning_lines(lines[:cut])
    rest = python_warning_lines(lines[cut:], after_warning=bool(first) and first[-1])
    assert first + rest == python_warning_lines(lines)
