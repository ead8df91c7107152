"""What each of the Models panel's findings is called on screen: one place that turns a stable
code (CHECKSUMS_OK, CHECKSUM_MISMATCH, ...) into words. The code itself is for support and
stays in the row's tooltip; a code missing here falls back to its severity's word."""

from __future__ import annotations

from qwen_mtp_desktop.core.models.folders.report import Diagnostic

#: Findings that report a check passed: shown with the green tick, not as a note.
PASSED_CODES = frozenset({"CHECKSUMS_OK"})

#: A finding's heading: what was found, in a few words a user reads at a glance.
FINDING_HEADINGS: dict[str, str] = {
    "CHECKSUMS_OK": "Files intact",
    "CHECKSUMS_CANCELLED": "Check stopped",
    "CHECKSUMS_UNAVAILABLE": "Cannot be verified",
    "CHECKSUM_FILE_MISSING": "File missing",
    "CHECKSUM_MISMATCH": "File changed or damaged",
    "VERIFY_FAILED": "Check could not run",
    "CHAT_TEMPLATE": "Chat template problem",
    "NO_CHAT_TEMPLATE": "No chat template",
    "CONFIG_INVALID": "Settings file unreadable",
    "CONFIG_MISSING": "Settings file missing",
    "INSPECTION_FAILED": "Folder could not be read",
    "IR_CORRUPT": "Model file damaged",
    "IR_INCOMPLETE": "Model files incomplete",
    "UNREADABLE": "File cannot be read",
    "NOT_REGULAR": "Not an ordinary file",
    "SYMLINK_LOOP": "Link points to itself",
    "NOT_FOUND": "Folder not found",
    "NOT_A_MODEL": "Not a model folder",
    "NOT_QWEN35": "Not a Qwen3.5 model",
    "MANIFEST_INVALID": "Export record unreadable",
    "MEMORY_TIGHT": "Memory is tight",
    "TOO_LARGE_FOR_MEMORY": "Too large for this computer",
    "MTP_MISSING": "No MTP head",
    "MTP_NOT_COMPRESSED_LIKE_MAIN": "MTP head compressed differently",
    "MTP_ROPE_QUANTIZED": "MTP head may draft less well",
    "RUNTIME_FAMILY_MISMATCH": "Exported with other versions",
    "TEXT_ONLY_EXPORT": "Text-only export",
    "TOKENIZER_MISSING": "Tokenizer missing",
    "VISION_INCOMPLETE": "Image input unavailable",
}

#: The heading of a finding this table does not name yet.
SEVERITY_HEADINGS = {"error": "Problem", "warning": "Warning", "info": "Note"}


def finding_heading(diagnostic: Diagnostic) -> str:
    """The words shown above a finding's message (never its code)."""
    return FINDING_HEADINGS.get(diagnostic.code) or SEVERITY_HEADINGS[diagnostic.severity]
