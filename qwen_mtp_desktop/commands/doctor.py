"""`doctor`: versions, OpenVINO release family, devices and folders."""

from __future__ import annotations

import argparse
import json
from typing import Any

from qwen_mtp_desktop.commands import EXIT_FAILED, EXIT_OK


def _cmd_doctor(args: argparse.Namespace) -> int:
    from qwen_mtp_desktop.core.system.environment import doctor

    report = doctor()
    if args.json:
        print(json.dumps(report.to_json_dict(), indent=2))
        return EXIT_OK if report.runtime_usable else EXIT_FAILED
    width = max(len(name) for name in report.versions)
    print(f"Qwen MTP Desktop {report.app_version} on {report.platform}")
    for name, version in report.versions.items():
        print(f"  {name:<{width}}  {version or 'not installed'}")
    print(f"OpenVINO release family: {report.release_family.message}")
    devices = ", ".join(f"{d.name} ({d.full_name})" for d in report.devices) or "none"
    print(f"Devices: {devices}")
    print(f"Export toolkit: {report.export_toolkit}")
    if report.missing_display_libraries is not None:
        missing = report.missing_display_libraries
        print(
            "Desktop window (X11): "
            + ("libraries found" if not missing else f"missing {', '.join(missing)}")
        )
    for label, folder in report.dirs.items():
        print(f"{label.capitalize()} dir: {folder}")
    for note in report.notes:
        print(f"note: {note}")
    if report.runtime_usable:
        print("Chat runtime: usable")
        return EXIT_OK
    print("Chat runtime: NOT usable")
    for problem in report.problems:
        print(f"problem: {problem}")
    return EXIT_FAILED


def register(commands: Any) -> None:
    doctor = commands.add_parser("doctor", help="check the runtime, versions and devices")
    doctor.add_argument("--json", action="store_true", help="print one JSON object")
    doctor.set_defaults(func=_cmd_doctor)
