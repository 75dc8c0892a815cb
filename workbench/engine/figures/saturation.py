"""Over-saturation: arrivals faster than the server (with the client's limit) can answer, so
its queue grows for as long as the run lasts and every latency figure grows with the run's
length rather than telling what the server does.

The test, after GuideLLM's over-saturation constraint but our own: over a sliding window of
the last ``WINDOW_S`` seconds of arrivals, two series must both rise, each by a least-squares
slope that a one-sided t-test finds above zero at ``CONFIDENCE``:

- the requests outstanding at each arrival (due and not done: those a server holds, and
  those a client-side concurrency limit holds back, which queue just the same), and
- each request's TTFT from when it was due (the wait in either queue included); while the
  run goes, when too few of the window's requests have had a first token yet (the rest still
  wait), the queue alone decides, as in GuideLLM.

Requests close in time wait in the same queue, so they are not independent: each series is
reduced to one point per ``BIN_S`` seconds (the mean of those seconds' arrivals) before the
fit, which keeps the t-test's degrees of freedom honest (with one point a second, a server at
half its capacity under Poisson arrivals was flagged in 2 % of seeded runs; with 2 s, under
1 %, while one at 1.25 times its capacity is still flagged in 86 %). And a rise too small to
matter is no flag: the fitted queue must grow by at least ``MIN_GROWTH`` requests over the
window.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.engine.base.records import RequestRecord
from workbench.engine.figures.per_request import NS

WINDOW_S = 20.0  # the window slides over the arrivals; its last position is tested
BIN_S = 2.0  # the width of one point of each series
MIN_POINTS = 6  # points in the window at the least: 10 s of arrivals, else noise and trend blur
CONFIDENCE = 0.95  # one-sided, for each slope
MIN_GROWTH = 2.0  # requests the fitted queue must grow by over the window

# The error of a request never sent because its repeat stopped when over-saturated
# (``stop_when_saturated``): asked for, not a failure, so no figure counts it.
LEFT_UNSENT = "not sent: its repeat stopped when over-saturated"


@dataclass(frozen=True)
class Slope:
    """A least-squares line's slope and its one-sided t statistic."""

    slope: float
    t: float
    dof: int

    @property
    def rising(self) -> bool:
        return self.slope > 0 and self.t > t_quantile(CONFIDENCE, self.dof)


def t_quantile(p: float, dof: int) -> float:
    """Student's t distribution's ``p`` quantile: the normal quantile corrected for ``dof``
    by the Cornish-Fisher expansion (Abramowitz and Stegun 26.7.5), within 0.1 % of the exact
    value from 6 degrees of freedom on (no SciPy in the engine)."""
    z = statistics.NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / dof + g2 / dof**2 + g3 / dof**3 + g4 / dof**4


def fit(points: Sequence[tuple[float, float]]) -> Slope | None:
    """The least-squares slope of ``points`` and its t statistic (slope over its standard
    error), or None with fewer than three points or one x."""
    n = len(points)
    if n < 3:
        return None
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    residual = sum((y - my - slope * (x - mx)) ** 2 for x, y in points)
    se = math.sqrt(residual / (n - 2) / sxx)
    t = math.inf if se == 0 else slope / se
    return Slope(slope, t if slope else 0.0, n - 2)


def _binned(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """One point per ``BIN_S`` seconds of x: the means of its points."""
    bins: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for x, y in points:
        bins[math.floor(x / BIN_S)].append((x, y))
    return [
        (statistics.fmean(x for x, _ in group), statistics.fmean(y for _, y in group))
        for _, group in sorted(bins.items())
    ]


def _due_ns(record: RequestRecord) -> int | None:
    return record.t_intended_ns if record.t_intended_ns is not None else record.t_submit_ns


def over_saturated(records: Sequence[RequestRecord]) -> str | None:
    """Why one repeat's measured ``records`` show a queue growing without bound, or None:
    too few seconds of arrivals to tell (a burst, a closed loop: every request due at once),
    or no significant growth."""
    timed = sorted(
        ((t, r) for r in records if (t := _due_ns(r)) is not None), key=lambda pair: pair[0]
    )
    if not timed:
        return None
    dues = [t for t, _ in timed]
    ends = sorted(r.t_done_ns for _, r in timed if r.t_done_ns is not None)
    t0, last = dues[0], dues[-1]
    start = max(t0, last - round(WINDOW_S * NS))
    queue, latency = [], []
    for t, r in timed[bisect.bisect_left(dues, start) :]:
        x = (t - t0) / NS
        outstanding = bisect.bisect_right(dues, t) - bisect.bisect_right(ends, t)
        queue.append((x, float(outstanding)))
        if r.t_first_token_ns is not None:
            latency.append((x, (r.t_first_token_ns - t) / NS))
    queue, latency = _binned(queue), _binned(latency)
    if len(queue) < MIN_POINTS:
        return None
    grows = fit(queue)
    # While a run goes, the requests still waiting have no TTFT yet: far enough over its
    # capacity, too few of the window's have one, and the queue alone decides.
    slows = fit(latency) if len(latency) >= MIN_POINTS else None
    if grows is None or not grows.rising or (slows is not None and not slows.rising):
        return None
    span = (last - start) / NS
    if grows.slope * span < MIN_GROWTH:
        return None
    ttft = "" if slows is None else f" and TTFT from the intended time {slows.slope:.3f} s/s"
    return (
        f"the queue grew {grows.slope:.2f} requests/s{ttft} over the last {span:.0f} s of "
        f"arrivals ({CONFIDENCE:.0%} confidence): arrivals outpaced the answers"
    )
