"""Copies of an exported model whose MTP head is randomised: drafts are (almost) always
rejected, but speculative decoding must still reproduce plain decoding. Tests and benchmarks
use it as the "MTP loses" model. Needs only numpy and openvino (no export toolkit)."""

from __future__ import annotations

import shutil
from pathlib import Path

MTP_STEM = "openvino_mtp_model"


def make_broken_mtp_copy(source: Path, target: Path, seed: int = 0) -> Path:
    """Copy `source` to `target` and replace every weight matrix of its MTP IR with noise of
    the same scale. Returns `target`."""
    import numpy as np
    import openvino as ov

    shutil.copytree(source, target)
    xml = target / f"{MTP_STEM}.xml"
    model = ov.Core().read_model(xml)
    rng = np.random.default_rng(seed)
    replaced = 0
    for op in model.get_ordered_ops():
        # Only the named weight matrices: norms' eps, RoPE frequencies and scales stay sane.
        if op.get_type_name() != "Constant" or ".weight" not in op.get_friendly_name():
            continue
        data = op.get_data()
        if data.ndim < 2 or data.dtype.kind != "f":
            continue
        scale = float(np.abs(data).mean()) or 0.02
        noise = (rng.standard_normal(data.shape) * scale * 4).astype(data.dtype)
        op.output(0).replace(ov.op.Constant(noise).output(0))
        replaced += 1
    if replaced < 5:
        raise RuntimeError(f"{xml} has no float weight matrices to randomise")
    staged = target / "mtp-random.xml"
    ov.save_model(model, staged, compress_to_fp16=False)
    del model
    staged.replace(xml)
    staged.with_suffix(".bin").replace(xml.with_suffix(".bin"))
    (target / "qwen_mtp_export.json").unlink(missing_ok=True)  # its checksums no longer hold
    return target
