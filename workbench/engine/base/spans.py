"""Time spans (``[start, end]`` in ns) laid over one another."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


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


class SpanIndex(Generic[T]):
    """Items with time spans, found by a stretch they overlap without looking at the rest:
    each span is filed in the buckets of ``width_ns`` it touches, so a look costs what lies
    near the stretch (a repeat of 100,000 requests stays linear, not quadratic). A span
    longer than ``MAX_BUCKETS`` buckets (damage, or hours of one request) is kept apart and
    looked at every time, so no span can fill memory with buckets."""

    MAX_BUCKETS = 10_000

    def __init__(self, spans: Iterable[tuple[int, int, T]], width_ns: int = 1_000_000_000):
        self.width = width_ns
        self.buckets: dict[int, list[tuple[int, int, T]]] = {}
        self.long: list[tuple[int, int, T]] = []
        for span in spans:
            first, last = span[0] // width_ns, span[1] // width_ns
            if last - first > self.MAX_BUCKETS:
                self.long.append(span)
                continue
            for bucket in range(first, last + 1):
                self.buckets.setdefault(bucket, []).append(span)

    def overlapping(self, start: int, end: int) -> list[T]:
        """The items whose spans overlap ``[start, end]`` for some time, each once."""
        found: dict[int, T] = {}
        first, last = start // self.width, end // self.width
        near = (
            itertools.chain.from_iterable(self.buckets.get(b, ()) for b in range(first, last + 1))
            if last - first <= self.MAX_BUCKETS
            else itertools.chain.from_iterable(self.buckets.values())
        )
        for a, b, item in itertools.chain(near, self.long):
            if a < end and b > start:
                found.setdefault(id(item), item)
        return list(found.values())
