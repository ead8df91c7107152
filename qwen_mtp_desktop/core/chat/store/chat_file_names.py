"""A file name for an exported chat, made from its title, that every OS accepts.

Titles come from the first message, so they can hold anything: slashes, `..`, control and bidi
characters, lone surrogates, names Windows reserves for devices (CON, COM1, ...), trailing dots
and spaces Windows drops, and more bytes than a file name may have. The name keeps the readable
part of the title and never leaves the folder the user chose.
"""

from __future__ import annotations

import re
import unicodedata

#: Characters Windows refuses in a name, and the path separators of every OS.
_FORBIDDEN = set('<>:"/\\|?*')
#: Device names Windows reserves with any extension, case-insensitive (¹²³ count as digits).
#: Windows reads the device name up to the first dot, ignoring spaces before it ("CON .txt").
_RESERVED = re.compile(r"^(con|prn|aux|nul|conin\$|conout\$|(com|lpt)[0-9¹²³]) *(\..*)?$", re.I)
#: Bytes for the whole name; 255 is the limit of ext4, APFS and NTFS (in UTF-16 units there,
#: which 255 UTF-8 bytes never exceed). Shorter, so the folder path has room too.
MAX_NAME_BYTES = 150
FALLBACK_STEM = "chat"


def _allowed(char: str) -> bool:
    if char in _FORBIDDEN:
        return False
    # Cc control, Cf format (bidi overrides, zero-width), Cs lone surrogates, Co/Cn unassigned.
    return unicodedata.category(char)[0] != "C"


def _cut_to_bytes(text: str, limit: int) -> str:
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", errors="ignore")


def export_filename(title: str, suffix: str) -> str:
    """`title` as a safe file name ending in `suffix` (".md", ".json")."""
    text = unicodedata.normalize("NFC", "".join(c if _allowed(c) else " " for c in title))
    # NFC can compose new characters; check once more, then fold runs of spaces.
    stem = " ".join("".join(c if _allowed(c) else " " for c in text).split())
    budget = MAX_NAME_BYTES - len(suffix.encode("utf-8"))
    stem = _cut_to_bytes(stem, budget)
    # Windows drops trailing dots and spaces; a leading dot hides the file, a leading "-"
    # reads as an option in a shell.
    stem = stem.strip(" .-")
    if not stem:
        stem = FALLBACK_STEM
    reserved = _RESERVED.match(stem + suffix)
    if reserved:
        # "CON.txt" is reserved too, whatever follows the dot: mark the device word itself.
        stem = stem[: reserved.end(1)] + "_" + stem[reserved.end(1) :]
    return stem + suffix
