"""Generation stalls: a stream that stops while the server spends its steps on something else,
typically another request's long prompt processed beside it.

A stall is a gap between consecutive token chunks of one stream longer than ``STALL_FACTOR``
times that stream's own median gap and than ``STALL_FLOOR_S``. Each stream is held to its own
pace, so the rule holds on a slow CPU and a fast GPU alike, and it is client-side only, so it
holds for any server. Why 3: on the project's 2-core machine a stream decoding beside other
streams keeps every gap within 2.6 times its median, while a chunk of another request's
prompt processed beside it holds a gap 30 to 420 times its median
(``experiments/long-prompt-stalls.toml``). The floor keeps a busy machine's scheduling
hiccups (tens of milliseconds, many times a fast stream's median) from counting: a pause
shorter than a quarter of a second does not read as a frozen stream. A stream
with fewer than ``MIN_GAPS`` gaps has no pace to compare with and is not judged; one stalled
for more than half its gaps has a stall for its median, and its stalls go unseen.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.engine.figures.per_request import RequestMetrics, percentile

STALL_FACTOR = 3.0
STALL_FLOOR_S = 0.25
MIN_GAPS = 4


def stalled_gaps(gaps: Sequence[float]) -> list[float] | None:
    """The gaps of one stream that are stalls, in order; None where the stream has too few
    gaps to have a pace of its own."""
    if len(gaps) < MIN_GAPS:
        return None
    bound = max(STALL_FACTOR * statistics.median(gaps), STALL_FLOOR_S)
    return [gap for gap in gaps if gap > bound]


@dataclass(frozen=True)
class StallFigures:
    """A repeat's stalls over its judged streams (None each where no stream was judged;
    ``stall_p99_s`` and ``stall_max_s`` None where none stalled)."""

    stalled_stream_share: float | None = None
    stall_p99_s: float | None = None
    stall_max_s: float | None = None
    stalled_s: float | None = None  # stream-seconds, all streams together
    stalled_s_per_1k_prompt: float | None = None  # per 1,000 prompt tokens the server processed
    gaps_within_share: float | None = None  # gaps within each stream's stall bound


def stall_figures(metrics: Sequence[RequestMetrics]) -> StallFigures:
    """The figures of one repeat's successful requests."""
    judged = [(m.itl_s, s) for m in metrics if (s := stalled_gaps(m.itl_s)) is not None]
    if not judged:
        return StallFigures()
    stalls = [gap for _, stream in judged for gap in stream]
    stalled = sum(stalls)
    gaps = sum(len(itl) for itl, _ in judged)
    processed = sum(
        m.prompt_tokens - (m.cached_tokens or 0) for m in metrics if m.prompt_tokens is not None
    )
    return StallFigures(
        stalled_stream_share=sum(bool(s) for _, s in judged) / len(judged),
        stall_p99_s=percentile(stalls, 99),
        stall_max_s=max(stalls) if stalls else None,
        stalled_s=stalled,
        stalled_s_per_1k_prompt=1000 * stalled / processed if processed > 0 else None,
        gaps_within_share=1 - len(stalls) / gaps,
    )
