from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from qwen_mtp_desktop.core import environment
from qwen_mtp_desktop.core.environment import (
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
