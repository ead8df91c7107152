from __future__ import annotations

import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core.system import environment
from qwen_mtp_desktop.core.system.environment import (
    export_toolkit_status,
    family_verdict,
    release_family,
)


def test_release_family_parsing() -> None:
    assert release_family("2026.4.1") == "2026.4"
    assert release_family("2026.4.1.0") == "2026.4"
    assert release_family("2025.10.0.0rc1") == "2025.10"
    assert release_family("1.2.3") is None
    assert release_family(None) is None


@given(st.integers(2000, 2999), st.integers(0, 20), st.integers(0, 9), st.integers(0, 9))
def test_release_family_property(year: int, release: int, patch: int, build: int) -> None:
    assert release_family(f"{year}.{release}.{patch}.{build}") == f"{year}.{release}"


def _versions(ov: str | None, genai: str | None, tok: str | None) -> dict[str, str | None]:
    return {"openvino": ov, "openvino-genai": genai, "openvino-tokenizers": tok}


def test_family_verdict() -> None:
    ok = family_verdict(_versions("2026.4.1", "2026.4.1.0", "2026.4.1.0"))
    assert ok.ok and ok.family == "2026.4"
    mixed = family_verdict(_versions("2026.4.1", "2026.3.0.0", "2026.4.1.0"))
    assert not mixed.ok and "different release families" in mixed.message
    assert "openvino-genai 2026.3.0.0" in mixed.message
    missing = family_verdict(_versions("2026.4.1", None, "2026.4.1.0"))
    assert not missing.ok and "missing openvino-genai" in missing.message


def test_export_toolkit_status() -> None:
    full = {
        "optimum-intel": "2.2.0",
        "optimum": "2.3.0",
        "transformers": "5.2.0",
        "nncf": "3.4.0",
        "torch": "2.14.1",
    }
    assert export_toolkit_status(full)[0] == "export toolkit installed"
    status, notes = export_toolkit_status({**full, "torch": None})
    assert status == "export toolkit not installed" and "torch" in notes[0]
    status, notes = export_toolkit_status({**full, "transformers": "5.5.1"})
    assert "unsupported transformers" in status and "5.2" in notes[0]


def test_doctor_on_this_machine() -> None:
    report = environment.doctor()
    assert report.runtime_usable, report.problems
    assert report.release_family.family == "2026.4"
    assert any(d.name == "CPU" for d in report.devices)
    assert set(report.dirs) == {"data", "config", "cache", "logs"}


def test_missing_display_libraries_are_read_from_ldd() -> None:
    from qwen_mtp_desktop.core.system.environment import display_libraries_note, missing_from_ldd

    text = (
        "\tlinux-vdso.so.1 (0x00007ffd)\n"
        "\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f84)\n"
        "\tlibxcb-icccm.so.4 => not found\n"
        "\tlibxcb-keysyms.so.1 => not found\n"
        "\tlibweird.so.9 => not found\n"
        "\tlibxcb-icccm.so.4 => not found\n"
    )
    missing = missing_from_ldd(text)
    assert missing == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libweird.so.9"]
    note = display_libraries_note(missing)
    assert "sudo apt install libxcb-icccm4 libxcb-keysyms1." in note
    assert "provide libweird.so.9" in note


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux xcb plugin only")
def test_doctor_checks_the_real_xcb_plugin() -> None:
    """What doctor reports missing is exactly what the dynamic loader cannot load."""
    import ctypes

    from qwen_mtp_desktop.core.system.environment import (
        XCB_LIBRARY_PACKAGES,
        doctor,
        missing_display_libraries,
        xcb_plugin,
    )

    assert xcb_plugin() is not None
    missing = missing_display_libraries()
    assert missing is not None
    for name in missing:
        with pytest.raises(OSError):
            ctypes.CDLL(name)
    # Every library the plugin needs is one docs/user-guide.md and the note can name a package for.
    assert set(missing) <= set(XCB_LIBRARY_PACKAGES)
    report = doctor()
    assert report.missing_display_libraries == missing
    assert any("xcb plugin needs" in note for note in report.notes) == bool(missing)
