"""The server's own latency histograms over a watch (vLLM's and SGLang's: the queue, TTFT,
the inter-token latency, E2E), as percentiles of what the server observed between the
watch's first poll and its last: the difference of their cumulative buckets. These are the
server's own measures, not the workbench's, and are said to be so.

A percentile within a bucket is interpolated linearly between its bounds, as Prometheus'
``histogram_quantile`` does; one that falls in the last, unbounded bucket is that bucket's
lower bound (a floor, not a value)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from workbench.engine.base.server_kinds import Buckets, ServerKind

FACTS = {"queue": "queue", "ttft": "TTFT", "itl": "ITL", "e2e": "E2E"}


@dataclass(frozen=True)
class Latency:
    """One histogram over the watch: how many the server observed and their percentiles, in
    seconds."""

    fact: str
    observed: int
    p50: float | None
    p90: float | None
    p99: float | None


def bucket_percentile(buckets: Buckets, q: float) -> float | None:
    """The ``q``-th percentile (0 to 100) of cumulative ``buckets``; None when empty."""
    bounds = sorted(buckets)
    if not bounds or buckets[bounds[-1]] <= 0:
        return None
    rank = buckets[bounds[-1]] * q / 100.0
    lower, below = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank and count > below:
            if math.isinf(le):
                return lower
            return lower + (le - lower) * (rank - below) / (count - below)
        lower, below = (le if not math.isinf(le) else lower), count
    return lower


def difference(last: Buckets, first: Buckets) -> Buckets:
    """What was observed between two snapshots (a restarted server's counts start again:
    then the last snapshot alone)."""
    found = {le: last[le] - first.get(le, 0.0) for le in last}
    return last if any(v < 0 for v in found.values()) else found


def latencies(
    kind: ServerKind | None, first: dict[str, Buckets], last: dict[str, Buckets]
) -> list[Latency]:
    """Each of ``kind``'s latency histograms the server gave, over the watch."""
    found = []
    for fact, names in kind.latencies if kind else ():
        name = next((n for n in names if n in last), None)
        if name is None:
            continue
        seen = difference(last[name], first.get(name, {}))
        total = max(seen.values(), default=0.0)
        found.append(
            Latency(
                fact,
                round(total),
                *(bucket_percentile(seen, q) for q in (50, 90, 99)),
            )
        )
    return found
