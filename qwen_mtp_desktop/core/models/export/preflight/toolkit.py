"""The export toolkit: which versions are installed, which are needed, how to install them."""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import sys
from collections.abc import Mapping

from qwen_mtp_desktop.core.models.export.preflight.checklist import CheckItem
from qwen_mtp_desktop.core.system.environment import (
    EXPORT_PACKAGES,
    RUNTIME_PACKAGES,
    SUPPORTED_TRANSFORMERS,
    family_verdict,
    package_version,
)

#: optimum-intel series with the Qwen3.5 / Qwen3.5-MoE MTP exporter.
SUPPORTED_OPTIMUM_INTEL = "2.2"


MIN_NNCF = (3, 3)


#: Everything an export needs beyond the chat runtime (huggingface_hub: hub downloads).
TOOLKIT_PACKAGES = (*EXPORT_PACKAGES, "huggingface_hub")


#: pyproject's `export` extra, used when the installed metadata cannot be read (frozen app).
EXPORT_REQUIREMENTS = (
    "optimum-intel==2.2.*",
    "optimum>=2.3",
    "transformers==5.2.*",
    "nncf>=3.3",
    "torch>=2.9",
    "torchvision",
    "tokenizers",
    "safetensors",
    "huggingface_hub",
)


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split(".")[:3]:
        match = re.match(r"\d+", piece)
        parts.append(int(match.group()) if match else 0)
    return tuple(parts)


def toolkit_missing(versions: Mapping[str, str | None], *, hub: bool = False) -> list[str]:
    """Toolkit packages not installed (huggingface_hub only matters for hub sources)."""
    names = TOOLKIT_PACKAGES if hub else EXPORT_PACKAGES
    return [name for name in names if not versions.get(name)]


def check_toolkit(versions: Mapping[str, str | None], *, hub: bool = False) -> list[CheckItem]:
    """The export toolkit: installed, at the versions that export Qwen3.5 with MTP."""
    missing = toolkit_missing(versions, hub=hub)
    if missing:
        return [
            CheckItem(
                "toolkit",
                "fail",
                "Export toolkit",
                f"The export toolkit is not installed (missing {', '.join(missing)}).",
                "Click Install export toolkit, or run: "
                + shlex.join(install_command(versions=versions)),
            )
        ]
    items: list[CheckItem] = []
    intel = versions.get("optimum-intel") or ""
    if not intel.startswith(SUPPORTED_OPTIMUM_INTEL + "."):
        items.append(
            CheckItem(
                "toolkit",
                "fail",
                "Export toolkit",
                f"optimum-intel {intel} is installed; the Qwen3.5 MTP exporter is in "
                f"optimum-intel {SUPPORTED_OPTIMUM_INTEL}.x.",
                f"pip install 'optimum-intel=={SUPPORTED_OPTIMUM_INTEL}.*'",
            )
        )
    transformers = versions.get("transformers") or ""
    if not transformers.startswith(SUPPORTED_TRANSFORMERS + "."):
        items.append(
            CheckItem(
                "toolkit",
                "fail",
                "Export toolkit",
                f"transformers {transformers} is outside the Qwen3.5 exporter's range "
                f"{SUPPORTED_TRANSFORMERS}.x.",
                f"pip install 'transformers=={SUPPORTED_TRANSFORMERS}.*'",
            )
        )
    nncf = versions.get("nncf") or ""
    if _version_tuple(nncf) < MIN_NNCF:
        items.append(
            CheckItem(
                "toolkit",
                "fail",
                "Export toolkit",
                f"nncf {nncf} is too old for weight compression of this exporter.",
                "pip install 'nncf>=3.3'",
            )
        )
    if not items:
        items.append(
            CheckItem(
                "toolkit",
                "pass",
                "Export toolkit",
                f"optimum-intel {intel}, transformers {transformers}, nncf {nncf}, "
                f"torch {versions.get('torch')}.",
            )
        )
    verdict = family_verdict(dict(versions))
    items.append(
        CheckItem(
            "openvino_family",
            "pass" if verdict.ok else "fail",
            "OpenVINO packages",
            verdict.message[:1].upper() + verdict.message[1:] + ".",
            "" if verdict.ok else "Install matching versions (see the message).",
        )
    )
    return items


def installed_versions() -> dict[str, str | None]:
    names = (*RUNTIME_PACKAGES, *TOOLKIT_PACKAGES)
    return {name: package_version(name) for name in names}


def export_requirements() -> list[str]:
    """The `export` extra's requirements, from this app's installed metadata if readable."""
    try:
        requires = importlib.metadata.requires("qwen-mtp-desktop") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    found = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        if re.search(r"""extra\s*==\s*['"]export['"]""", marker):
            found.append(requirement.strip().replace(" ", ""))
    return found or list(EXPORT_REQUIREMENTS)


def install_command(
    python: str | None = None, *, versions: Mapping[str, str | None] | None = None
) -> list[str]:
    """`python -m pip install` of the export toolkit with the extra's pins.

    The installed OpenVINO packages are pinned to their exact versions so pip cannot move them
    out of their release family while it resolves the toolkit.
    """
    command = [python or sys.executable, "-m", "pip", "install", *export_requirements()]
    versions = versions if versions is not None else installed_versions()
    for name in RUNTIME_PACKAGES:
        version = versions.get(name)
        if version:
            command.append(f"{name}=={version}")
    return command
