"""Words for counts, the same in the terminal, the window and the reports."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """``1 slot``, ``4 slots``, ``2,286 polls``: never ``1 slots`` nor ``(s)``, and a count
    of thousands grouped by commas, as the rest of the figures are written."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"
