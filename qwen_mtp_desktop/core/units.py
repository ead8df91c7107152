"""Byte counts as people read them: one formatter for every panel, command and message."""

from __future__ import annotations


def format_bytes(size: int | None) -> str:
    """Decimal units, as file managers show them: 950 B, 12.3 KB, 1.4 MB, 2.05 GB."""
    if size is None:
        return "unknown"
    if size < 1000:
        return f"{size} B"
    value, unit = float(size), "B"
    for unit in ("KB", "MB", "GB", "TB"):  # noqa: B007 (the unit reached is the one shown)
        value /= 1000
        if value < 999.95:
            break
    # Two decimals for a few GB: "1.40 GB" vs "1.45 GB" matters when RAM is tight.
    return f"{value:.2f} {unit}" if unit in ("GB", "TB") and value < 10 else f"{value:.1f} {unit}"


__all__ = ["format_bytes"]
