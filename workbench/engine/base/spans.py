"""Time spans (``[start, end]`` in ns) laid over one another."""

from __future__ import annotations

from collections.abc import Iterable


def covered_ns(spans: Iterable[tuple[int, int]], start: int, end: int) -> int:
    """How much of ``[start, end]`` the ``spans`` cover, each moment counted once where
    they overlap (prompts processed in the same steps share their time)."""
    total, reached = 0, start
    for a, b in sorted((max(start, a), min(end, b)) for a, b in spans):
        a = max(a, reached)
        if b > a:
            total += b - a
            reached = b
    return total
