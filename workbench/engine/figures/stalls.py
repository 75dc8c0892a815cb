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

A stall is then laid against the other requests' prompt processing, which the server's
``timings.prompt_ms`` places: llama-server (b11434) counts it from the prompt's first chunk
to its last, the other slots' steps between them included, so it ends at the request's first
token. The stall is the doing of the longest prompt (by the tokens the server processed) whose
processing covered at least half of it; where none did and a request in flight then has no
timings to place its prompt by (vLLM, SGLang, a failed stream), its cause is unknown.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workbench.engine.base.records import RequestKey, RequestRecord
from workbench.engine.base.spans import SpanIndex, covered_ns
from workbench.engine.figures.per_request import (
    NS,
    RequestMetrics,
    percentile,
    request_metrics,
    server_ms,
    token_count,
)

STALL_FACTOR = 3.0
STALL_FLOOR_S = 0.25
MIN_GAPS = 4
COVERED = 0.5  # of a stall, the share another prompt's processing must cover to be its cause
NEVER = 2**62  # the end of a request that never ended: after any clock reading


def stall_bound(gaps: Sequence[float]) -> float | None:
    """The longest gap of one stream that is not a stall; None where the stream has too few
    gaps to have a pace of its own."""
    if len(gaps) < MIN_GAPS:
        return None
    return max(STALL_FACTOR * statistics.median(gaps), STALL_FLOOR_S)


def stalled_gaps(gaps: Sequence[float]) -> list[float] | None:
    """The gaps of one stream that are stalls, in order; None where it is not judged."""
    bound = stall_bound(gaps)
    return None if bound is None else [gap for gap in gaps if gap > bound]


@dataclass(frozen=True)
class Prefill:
    """One request's prompt processing, as the server timed it and its first token ends it."""

    key: RequestKey
    start_ns: int
    end_ns: int
    processed: int  # prompt tokens the server processed (``timings.prompt_n``): not the cached

    def overlap_ns(self, start_ns: int, end_ns: int) -> int:
        return max(0, min(end_ns, self.end_ns) - max(start_ns, self.start_ns))


def prefill_of(record: RequestRecord) -> Prefill | None:
    """Where the server's timings place a request's prompt processing; None without them. A
    whole (not streamed) answer's first text came after its decoding too (``predicted_ms``)."""
    timings = record.timings or {}
    prompt_ms, processed = server_ms(timings.get("prompt_ms")), token_count(timings.get("prompt_n"))
    if record.t_submit_ns is None or record.t_first_token_ns is None:
        return None
    if prompt_ms is None or processed is None:
        return None
    end = record.t_first_token_ns
    if not record.streamed:
        end -= round((server_ms(timings.get("predicted_ms")) or 0.0) * 1e6)
    return Prefill(record.key, end - round(prompt_ms * 1e6), end, processed)


@dataclass(frozen=True)
class Stall:
    """One stall of a stream: from the chunk before it to the chunk after, and its cause."""

    stream: RequestKey  # the request whose stream stood still
    start_ns: int
    end_ns: int
    cause: RequestKey | None = None  # the request whose prompt processing held the stream
    covering: int = 0  # prompts whose processing covered it, the cause's among them
    unknown: bool = False  # no cause found, and the server did not time every prompt then

    @property
    def seconds(self) -> float:
        return (self.end_ns - self.start_ns) / NS


@dataclass(frozen=True)
class RequestStalls:
    """One request's stalls (None where its stream is not judged), and how long it waited
    for its first token while a longer prompt than its own was processed for another request:
    an upper bound on what such prompts added to its TTFT (None where the server timed no
    prompt of the repeat)."""

    stalls: tuple[Stall, ...] | None
    ttft_held_s: float | None = None

    @property
    def longest_s(self) -> float | None:
        return max((s.seconds for s in self.stalls or ()), default=None)

    @property
    def stalled_s(self) -> float | None:
        return None if self.stalls is None else sum(s.seconds for s in self.stalls)


def _held_s(record: RequestRecord, own: Prefill | None, prefills: SpanIndex[Prefill]) -> float:
    """Seconds of ``record``'s wait for its first token covered by the processing of prompts
    longer than its own (its own unknown: any), counted once where they overlap. Not as long:
    prompts sent together are processed in the same steps, and would hold each other."""
    if record.t_submit_ns is None or record.t_first_token_ns is None:
        return 0.0
    start, end = record.t_submit_ns, own.end_ns if own else record.t_first_token_ns
    spans = (
        (p.start_ns, p.end_ns)
        for p in prefills.overlapping(start, end)
        if p.key != record.key and (own is None or p.processed > own.processed)
    )
    return covered_ns(spans, start, end) / NS


def _attributed(
    start: int,
    end: int,
    own: RequestKey,
    prefills: SpanIndex[Prefill],
    unplaced: SpanIndex[RequestKey],
) -> Stall:
    covering = [
        p
        for p in prefills.overlapping(start, end)
        if p.key != own and p.overlap_ns(start, end) >= COVERED * (end - start)
    ]
    if covering:
        longest = max(covering, key=lambda p: (p.processed, p.overlap_ns(start, end)))
        return Stall(own, start, end, cause=longest.key, covering=len(covering))
    in_flight = any(key != own for key in unplaced.overlapping(start, end))
    return Stall(own, start, end, unknown=in_flight)


def repeat_stalls(
    records: Sequence[RequestRecord], metrics: Mapping[RequestKey, RequestMetrics]
) -> dict[RequestKey, RequestStalls]:
    """Each successful request of one repeat (``records`` share a server and a clock;
    ``metrics`` holds those of its successful requests) with its stalls attributed."""
    placed = {r.key: p for r in records if (p := prefill_of(r)) is not None}
    prefills = SpanIndex((p.start_ns, p.end_ns, p) for p in placed.values())
    # a request without timings is in flight from when it was sent to when it was done
    # (to ever, where it never was)
    unplaced = SpanIndex(
        (r.t_submit_ns, r.t_done_ns or NEVER, r.key)
        for r in records
        if r.key not in placed and r.t_submit_ns is not None
    )
    out = {}
    for record in records:
        m = metrics.get(record.key)
        if m is None:
            continue
        bound = stall_bound(m.itl_s)
        stalls = None
        if bound is not None:
            times = [c.t_ns for c in record.chunks]
            stalls = tuple(
                _attributed(a, b, record.key, prefills, unplaced)
                for a, b in itertools.pairwise(times)
                if (b - a) / NS > bound
            )
        held = _held_s(record, placed.get(record.key), prefills) if placed else None
        out[record.key] = RequestStalls(stalls, held)
    return out


@dataclass(frozen=True)
class StallFigures:
    """A repeat's stalls over its judged streams (None each where no stream was judged;
    ``stall_p99_s`` and ``stall_max_s`` None where none stalled), and what caused them."""

    stalled_stream_share: float | None = None
    stall_p99_s: float | None = None
    stall_max_s: float | None = None
    stalled_s: float | None = None  # stream-seconds, all streams together
    stalled_s_per_1k_prompt: float | None = None  # per 1,000 prompt tokens the server processed
    gaps_within_share: float | None = None  # gaps within each stream's stall bound
    stalled_by_prompts_share: float | None = None  # of the stalled time, with a prompt its cause
    # where a prompt caused the longest stall: its length, its TTFT, the streams it stalled,
    # and the prompts processed with it then (itself included)
    stall_cause_tokens: int | None = None
    stall_cause_ttft_s: float | None = None
    stall_cause_streams: int | None = None
    stall_cause_prompts: int | None = None
    ttft_held_max_s: float | None = None  # the longest wait a longer prompt's processing held


def stall_figures(
    records: Sequence[RequestRecord], metrics: Mapping[RequestKey, RequestMetrics]
) -> StallFigures:
    """The figures of one repeat: its requests and the metrics of its successful ones."""
    per = repeat_stalls(records, metrics)
    held = [s.ttft_held_s for s in per.values() if s.ttft_held_s is not None]
    judged = {k: s.stalls for k, s in per.items() if s.stalls is not None}
    if not judged:
        return StallFigures(ttft_held_max_s=max(held, default=None))
    stalls = [stall for stream in judged.values() for stall in stream]
    lengths = [stall.seconds for stall in stalls]
    stalled = sum(lengths)
    gaps = sum(len(metrics[k].itl_s) for k in judged)
    processed = sum(
        m.prompt_tokens - (m.cached_tokens or 0)
        for m in metrics.values()
        if m.prompt_tokens is not None
    )
    caused = [stall for stall in stalls if stall.cause is not None]
    longest = max(stalls, key=lambda stall: stall.seconds, default=None)
    worst = longest.cause if longest is not None else None
    cause = metrics.get(worst) if worst is not None else None
    return StallFigures(
        stalled_stream_share=sum(bool(s) for s in judged.values()) / len(judged),
        stall_p99_s=percentile(lengths, 99),
        stall_max_s=max(lengths) if lengths else None,
        stalled_s=stalled,
        stalled_s_per_1k_prompt=1000 * stalled / processed if processed > 0 else None,
        gaps_within_share=1 - len(stalls) / gaps,
        stalled_by_prompts_share=sum(s.seconds for s in caused) / stalled if stalled else None,
        stall_cause_tokens=cause.prompt_tokens if cause is not None else None,
        stall_cause_ttft_s=cause.ttft_s if cause is not None else None,
        stall_cause_streams=(
            sum(any(s.cause == worst for s in stream) for stream in judged.values())
            if worst is not None
            else None
        ),
        stall_cause_prompts=longest.covering if worst is not None else None,
        ttft_held_max_s=max(held, default=None),
    )


def session_stalls(records: Sequence[RequestRecord]) -> dict[RequestKey, RequestStalls]:
    """``repeat_stalls`` of every repeat of ``records`` (warm-ups apart: they ran alone)."""
    repeats: dict[tuple[int, int], list[RequestRecord]] = {}
    for r in records:
        if not r.warmup:
            repeats.setdefault((r.config_index, r.repeat), []).append(r)
    out: dict[RequestKey, RequestStalls] = {}
    for group in repeats.values():
        metrics = {r.key: m for r in group if (m := request_metrics(r)) is not None}
        out.update(repeat_stalls(group, metrics))
    return out


def found_stalls(records: Sequence[RequestRecord]) -> tuple[Stall, ...]:
    """Every stall of ``records`` (a configuration's), stream by stream."""
    return tuple(
        stall for found in session_stalls(records).values() for stall in found.stalls or ()
    )


def causes(stalls: Sequence[Stall], numbers: Mapping[RequestKey, int]) -> list[str]:
    """What stalled a stream, each once in the order its stalls came: the number of a request
    whose prompt did (as every view numbers it), ``unknown``, or ``none``."""
    said = [
        str(numbers[s.cause]) if s.cause is not None else ("unknown" if s.unknown else "none")
        for s in stalls
    ]
    return list(dict.fromkeys(said))
