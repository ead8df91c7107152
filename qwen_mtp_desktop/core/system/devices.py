"""Whether an OpenVINO device is present, asked before a model is loaded on it.

Otherwise the runtime's error for a missing device reads like a damaged model, and the app
would tell the user to re-export a model that is fine.
"""

from __future__ import annotations

from collections.abc import Sequence

from qwen_mtp_desktop.core.errors import UserFacingError

#: Virtual devices that pick among the real ones; OpenVINO checks what they name itself.
_VIRTUAL = ("AUTO", "MULTI", "HETERO", "BATCH")


def available_devices() -> list[str]:
    import openvino

    return [str(name) for name in openvino.Core().available_devices]


def missing_device_error(device: str, available: Sequence[str]) -> UserFacingError | None:
    """None when `device` is present (or virtual); else the error to show."""
    name = device.strip().upper()
    if not name or name.split(":")[0] in _VIRTUAL:
        return None
    present = {d.upper() for d in available} | {d.upper().split(".")[0] for d in available}
    if name in present:
        return None
    shown = device if device.isprintable() and len(device) <= 40 else repr(device[:40])
    return UserFacingError(
        f"The {shown} device is not present on this computer "
        f"(found: {', '.join(available) or 'none'}).",
        "Choose one of those devices (CPU always works), or install the device's driver.",
        code="DEVICE_UNAVAILABLE",
    )
