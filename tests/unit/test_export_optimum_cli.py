"""The export entry point's pure parts: argv handling, per-submodel configs, progress hooks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from qwen_mtp_desktop.core.models.export import optimum_cli
from qwen_mtp_desktop.core.models.export.command import export_command
from qwen_mtp_desktop.core.models.export.optimum_cli import (
    MARKER,
    MTP_ROPE_IGNORED_SCOPE,
    _hook_nncf_track,
    mtp_quantization_config,
    ov_model_name,
    part_name,
    pipeline_configs,
    split_mtp_option,
)
from qwen_mtp_desktop.core.models.export.options import ExportOptions

XMLS = [
    "openvino_detokenizer.xml",
    "openvino_language_model.xml",
    "openvino_mtp_model.xml",
    "openvino_text_embeddings_model.xml",
    "openvino_tokenizer.xml",
    "openvino_vision_embeddings_merger_model.xml",
    "openvino_vision_embeddings_model.xml",
    "openvino_vision_embeddings_pos_model.xml",
]
INT4 = {"bits": 4, "sym": False, "group_size": 16, "ratio": 1.0, "group_size_fallback": "ignore"}


def _args(**values: Any) -> SimpleNamespace:
    base = {"sym": False, "group_size": None, "ratio": None, "group_size_fallback": None}
    base.update(values)
    return SimpleNamespace(**base)


def test_split_mtp_option() -> None:
    assert split_mtp_option(["export", "openvino", "--mtp-weight-format", "int8", "out"]) == (
        "int8",
        ["export", "openvino", "out"],
    )
    assert split_mtp_option(["--mtp-weight-format=none", "x"]) == ("none", ["x"])
    assert split_mtp_option(["x"]) == ("default", ["x"])
    with pytest.raises(SystemExit):
        split_mtp_option(["--mtp-weight-format", "int2"])
    with pytest.raises(SystemExit):
        split_mtp_option(["--mtp-weight-format"])


def test_names() -> None:
    assert part_name("/tmp/out/openvino_language_model.xml") == "language_model"
    assert part_name("openvino_mtp_model.xml") == "mtp"
    assert part_name("lm_model") == "language_model"
    assert part_name("vision_embeddings_merger_model") == "vision_embeddings_merger"
    assert ov_model_name("openvino_language_model.xml") == "lm_model"
    assert ov_model_name("openvino_mtp_model.xml") == "mtp_model"
    assert (
        ov_model_name("openvino_vision_embeddings_pos_model.xml") == "vision_embeddings_pos_model"
    )


def test_command_carries_the_mtp_choice() -> None:
    options = ExportOptions(weight_format="int8", mtp_weight_format="int4")
    command = export_command("/src", Path("/out"), options, python="py")
    assert command[-3:] == ["--mtp-weight-format", "int4", "/out"]
    for fmt in ("int4", "fp16"):  # optimum-intel's own choice keeps RoPE in full precision
        default = export_command("/src", Path("/out"), ExportOptions(weight_format=fmt))
        assert "--mtp-weight-format" not in default
    # ... but not for INT8: there the default is the main model's settings with RoPE kept.
    int8 = export_command("/src", Path("/out"), ExportOptions(weight_format="int8"))
    assert int8[-3:] == ["--mtp-weight-format", "same", "/out"]


def test_mtp_configs() -> None:
    args = _args(group_size=16)
    same = mtp_quantization_config("same", INT4, args)
    assert same is not None and same["bits"] == 4 and same["group_size"] == 16
    assert same["ignored_scope"] == MTP_ROPE_IGNORED_SCOPE
    assert mtp_quantization_config("none", INT4, args) is None
    assert mtp_quantization_config("same", None, args) is None  # fp16 main: fp16 head
    int8 = mtp_quantization_config("int8", INT4, args)
    assert int8 is not None and (int8["bits"], int8["group_size"]) == (8, -1)
    # INT4 head on an INT8 model: its own INT4 config, RoPE-safe fallback by default.
    int4 = mtp_quantization_config("int4", {"bits": 8, "sym": False}, _args())
    assert int4 is not None
    assert (int4["bits"], int4["group_size"], int4["group_size_fallback"]) == (4, 128, "ignore")
    # INT4 head on an INT4 model keeps the model's settings.
    again = mtp_quantization_config("int4", INT4, args)
    assert again is not None and again["group_size"] == 16


def test_pipeline_configs_name_each_submodel() -> None:
    int8 = {"bits": 8}
    configs = pipeline_configs(XMLS, INT4, int8)
    assert configs["lm_model"] is INT4
    assert configs["mtp_model"] is int8
    assert set(configs) == {
        "lm_model",
        "mtp_model",
        "text_embeddings_model",
        "vision_embeddings_model",
        "vision_embeddings_merger_model",
        "vision_embeddings_pos_model",
    }
    assert configs["text_embeddings_model"] == {"bits": 8, "sym": True, "weight_only": True}
    # MTP "none": everything but the head.
    assert "mtp_model" not in pipeline_configs(XMLS, INT4, None)
    # fp16 main + INT8 head: only the head is compressed.
    assert pipeline_configs(XMLS, None, int8) == {"mtp_model": int8}
    assert pipeline_configs(XMLS, None, None) == {}


class FakeTrack:
    """The shape of nncf.common.logging.track_progress.track."""

    def __init__(
        self,
        sequence: list[int] | None = None,
        description: str = "Applying Weight Compression",
        total: float | None = None,
        weights: list[float] | None = None,
    ) -> None:
        self.sequence = sequence
        self.description = description
        self.weights = weights
        self.total = sum(weights) if weights is not None else total

    def __enter__(self) -> FakeTrack:
        return self

    def __exit__(self, *args: object) -> None:
        pass

    def __iter__(self) -> Iterator[int]:
        with self:
            yield from self.sequence or []

    def update(self, advance: float, **kwargs: Any) -> None:
        pass


def _markers(text: str) -> list[dict[str, Any]]:
    return [
        json.loads(line[len(MARKER) :]) for line in text.splitlines() if line.startswith(MARKER)
    ]


def test_nncf_hook_reports_weighted_fractions(capsys: pytest.CaptureFixture[str]) -> None:
    _hook_nncf_track(FakeTrack)
    _hook_nncf_track(FakeTrack)  # idempotent
    items = list(FakeTrack(list(range(4)), weights=[1.0, 1.0, 2.0, 4.0]))
    assert items == [0, 1, 2, 3]
    fractions = [m["fraction"] for m in _markers(capsys.readouterr().out)]
    assert fractions[-1] == 1.0
    assert fractions == sorted(fractions)
    assert fractions[0] == pytest.approx(0.125)


def test_nncf_hook_update_path(capsys: pytest.CaptureFixture[str]) -> None:
    _hook_nncf_track(FakeTrack)
    with FakeTrack(total=10) as bar:
        for _ in range(10):
            bar.update(advance=1)
    markers = _markers(capsys.readouterr().out)
    assert markers[-1] == {
        "event": "progress",
        "fraction": 1.0,
        "label": "Applying Weight Compression",
    }


def test_emit_is_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    optimum_cli.emit("stage", stage="converting", part="mtp")
    out = capsys.readouterr().out
    assert out == '[qmtp] {"event":"stage","stage":"converting","part":"mtp"}\n'
