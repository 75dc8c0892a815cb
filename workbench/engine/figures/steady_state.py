"""A repeat's steady state: the part of it where the load was what the experiment asked for,
the ramp-up at its start and the drain at its end left out, and the figures over it.

A whole-run figure mixes three regimes: the server filling up, the asked load, and the server
emptying once the last request is sent. How much of each is in it depends on the run's
length, so two runs of a different length do not compare. The window keeps the middle one:

- a closed loop (burst arrivals under a client-side concurrency limit below the request
  count) runs at its limit from when the requests in flight first reach it until the last
  request is sent; after that fewer and fewer are left;
- open-loop arrivals (Poisson, gamma, fixed) are steady between the 10th and the 90th
  percentile of the send times: the first tenth finds an empty server, the last tenth a
  server that no new arrivals will fill again;
- a burst (every request at once, no limit below the request count) never has a steady
  state: all of it is ramp-up and drain, so its figures are None.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.config.workloads import SentRequests
from workbench.engine.figures.per_request import NS, RequestMetrics, percentile, request_metrics

OPEN_LOOP_SPAN = (10.0, 90.0)  # percentiles of the send times that bound an open loop's window


@dataclass(frozen=True)
class SteadyWindow:
    """The steady state of one repeat, on the records' clock (``perf_counter_ns``)."""

    start_ns: int
    end_ns: int

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / NS

    def holds(self, t_ns: int | None) -> bool:
        return t_ns is not None and self.start_ns <= t_ns <= self.end_ns


@dataclass(frozen=True)
class SteadyFigures:
    """Throughput and latency over a repeat's steady state, and its bounds on the records'
    clock (the Gantt shades it): None each without one. Beside them, why its queue grew
    without bound (``saturation``), which the whole repeat tells."""

    steady_start_ns: int | None = None
    steady_end_ns: int | None = None
    steady_s: float | None = None
    steady_requests: int | None = None
    steady_agg_tok_s: float | None = None
    steady_ttft_p50_s: float | None = None
    steady_ttft_p90_s: float | None = None
    steady_tpot_p50_ms: float | None = None
    over_saturated: str | None = None


def _first_full(records: Sequence[RequestRecord], concurrency: int) -> int | None:
    """When the requests in flight (sent, not done) first numbered ``concurrency``."""
    events = sorted(
        [(r.t_submit_ns, 1) for r in records if r.t_submit_ns is not None]
        + [
            (r.t_done_ns, -1)
            for r in records
            if r.t_done_ns is not None and r.t_submit_ns is not None
        ]
    )  # a done and a send at one instant: the done first, so a place is not counted twice
    in_flight = 0
    for t_ns, step in events:
        in_flight += step
        if in_flight >= concurrency:
            return t_ns
    return None


def steady_window(
    records: Sequence[RequestRecord], workload: WorkloadSettings
) -> SteadyWindow | None:
    """The steady state of one repeat's measured ``records`` under ``workload``'s arrivals,
    or None: a burst, or a repeat too short or broken to have one."""
    sends = sorted(r.t_submit_ns for r in records if r.t_submit_ns is not None)
    if len(sends) < 2:
        return None
    if not workload.scheduled:
        if not isinstance(workload, SentRequests) or not workload.concurrency:  # all at once
            return None
        # A limit the requests never exceed is reached by the last send, if at all: no window.
        start, end = _first_full(records, workload.concurrency), sends[-1]
    else:
        low, high = (percentile([float(t) for t in sends], q) or 0.0 for q in OPEN_LOOP_SPAN)
        start, end = round(low), round(high)
    return SteadyWindow(start, end) if start is not None and end > start else None


def _tokens_in(window: SteadyWindow, record: RequestRecord, metrics: RequestMetrics) -> float:
    """The output tokens that arrived inside the window: the server's count shared evenly
    over the request's chunks (the chunks carry the times, the server the count)."""
    if not record.chunks:
        return 0.0
    per_chunk = metrics.output_tokens / len(record.chunks)
    return per_chunk * sum(window.holds(c.t_ns) for c in record.chunks)


def steady_figures(
    records: Sequence[RequestRecord], workload: WorkloadSettings | None
) -> SteadyFigures:
    """The figures over the steady state of one repeat's measured ``records``: throughput
    from the tokens that arrived inside it, latencies of the requests sent inside it.
    Without a workload (nothing to say what the arrivals were) or a window, all None."""
    window = steady_window(records, workload) if workload is not None else None
    if window is None:
        return SteadyFigures()
    sent = [r for r in records if window.holds(r.t_submit_ns)]
    pairs = [(r, m) for r in records if (m := request_metrics(r)) is not None]
    inside = [m for r, m in pairs if window.holds(r.t_submit_ns)]
    tokens = sum(_tokens_in(window, r, m) for r, m in pairs)
    ttft = [m.ttft_s for m in inside]
    tpot = percentile([m.tpot_s for m in inside if m.tpot_s is not None], 50)
    return SteadyFigures(
        steady_start_ns=window.start_ns,
        steady_end_ns=window.end_ns,
        steady_s=window.duration_s,
        steady_requests=len(sent),
        steady_agg_tok_s=tokens / window.duration_s,
        steady_ttft_p50_s=percentile(ttft, 50),
        steady_ttft_p90_s=percentile(ttft, 90),
        steady_tpot_p50_ms=None if tpot is None else tpot * 1000.0,
    )
