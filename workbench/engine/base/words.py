"""Words for counts, the same in the terminal, the window and the reports."""

from __future__ import annotations


def plural(count: int, noun: str) -> str:
    """``1 slot``, ``4 slots``: never ``1 slots`` nor ``(s)``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
