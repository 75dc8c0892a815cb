"""Over-saturation: a queue that grows for 20 s of arrivals is flagged; a flat one, a noisy
flat one and a closed loop are not."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from tests.made_sessions import request
from workbench.engine.base.records import RequestRecord
from workbench.engine.figures.saturation import fit, over_saturated, t_quantile

NS = 1_000_000_000
PREFILL_S = 0.05
TOKENS = 5
ITL_S = 0.05  # each request holds the server PREFILL_S + (TOKENS - 1) * ITL_S = 0.25 s


def served(arrivals: list[float], work: list[float] | None = None) -> list[RequestRecord]:
    """Requests due at ``arrivals`` (sent at once) to a server that answers one at a time,
    first come first served: each waits for the one before it, then takes its ``work``
    seconds (0.25 s each by default) to its last token."""
    work = work or [PREFILL_S + (TOKENS - 1) * ITL_S] * len(arrivals)
    records, free = [], 0.0
    for i, (due, busy) in enumerate(zip(arrivals, work, strict=True)):
        start = max(due, free)
        free = start + busy
        itl = (busy - PREFILL_S) / (TOKENS - 1)
        made = request(i, submit_s=due, ttft_s=start - due + PREFILL_S, tokens=TOKENS, itl_s=itl)
        records.append(replace(made, t_intended_ns=made.t_submit_ns))
    return records


def test_the_t_quantile_is_students():
    # Student's t table: 95 % one-sided at 6, 18 and 30 degrees of freedom, 99 % at 10.
    for p, dof, table in (
        (0.95, 6, 1.943),
        (0.95, 18, 1.734),
        (0.95, 30, 1.697),
        (0.99, 10, 2.764),
    ):
        assert t_quantile(p, dof) == pytest.approx(table, abs=0.001)


def test_a_line_fits_its_slope():
    line = fit([(x, 3.0 + 0.5 * x + (0.1 if x % 2 else -0.1)) for x in range(10)])
    assert line is not None and line.slope == pytest.approx(0.5, abs=0.02) and line.rising
    assert fit([(1.0, 2.0), (1.0, 3.0), (1.0, 4.0)]) is None  # one x: no slope


def test_a_slope_is_rising_only_above_its_noise():
    clear = fit([(x, 0.2 * x + (0.1 if x % 2 else -0.1)) for x in range(10)])
    noisy = fit([(x, 0.2 * x + (2.0 if x % 2 else -2.0)) for x in range(10)])
    assert clear is not None and clear.rising
    assert noisy is not None and noisy.slope > 0 and not noisy.rising


def test_a_server_that_slows_down_without_a_queue_is_not_flagged():
    # Every request is answered at once (TTFT flat), but each takes longer than the one
    # before: more are in flight as the run goes, yet none waits.
    records = [
        request(i, submit_s=i / 5, ttft_s=PREFILL_S, tokens=TOKENS, itl_s=0.05 + 0.01 * i / 5)
        for i in range(100)
    ]
    records = [replace(r, t_intended_ns=r.t_submit_ns) for r in records]
    assert over_saturated(records) is None


def test_arrivals_above_capacity_for_20_s_are_flagged():
    # 5 requests/s for 20 s at a server that answers 4 a second: the queue grows 1 a second.
    records = served([i / 5 for i in range(100)])
    why = over_saturated(records)
    assert why is not None and "queue grew 1.0" in why and "last 20 s" in why
    assert "and TTFT from the intended time 0.25" in why


def test_arrivals_below_capacity_are_not_flagged():
    assert over_saturated(served([i / 2 for i in range(40)])) is None  # 2 a second, steady


@pytest.mark.parametrize("seed", range(20))
def test_noisy_arrivals_below_capacity_are_not_flagged(seed):
    # Poisson arrivals at 2 a second, each request's work drawn around 0.25 s: the queue
    # comes and goes (half the server's capacity) but does not grow.
    rng = random.Random(seed)
    arrivals, t = [], 0.0
    for _ in range(60):
        arrivals.append(t)
        t += rng.expovariate(2.0)
    work = [PREFILL_S + rng.expovariate(1 / 0.2) + 0.001 for _ in arrivals]
    records = served(arrivals, work)
    assert max(r.t_first_token_ns - r.t_submit_ns for r in records) > 0.3 * NS  # it queued
    assert over_saturated(records) is None


def test_a_growing_queue_of_a_noisy_overload_is_flagged():
    rng = random.Random(7)
    arrivals, t = [], 0.0
    while t < 20.0:
        arrivals.append(t)
        t += rng.expovariate(6.0)  # 6 a second at a server that answers 4
    assert over_saturated(served(arrivals)) is not None


def test_a_run_far_over_capacity_is_flagged_before_its_waiting_requests_have_a_ttft():
    # 20 requests/s for 12 s at a server that answers 4 a second, seen at 12 s: the first
    # 48 have been answered (due in the first 2.4 s), the other 192 still wait.
    records = served([i / 20 for i in range(240)])
    for r in records[48:]:
        r.t_first_token_ns = r.t_last_token_ns = r.t_done_ns = None
        r.chunks, r.ok = [], False
    why = over_saturated(records)
    assert why is not None and "TTFT" not in why and "queue grew" in why


def test_too_short_a_run_a_burst_and_a_closed_loop_are_not_flagged():
    assert over_saturated(served([i / 5 for i in range(50)])) is None  # 10 s of arrivals
    assert over_saturated(served([0.0] * 100)) is None  # every request due at once
    assert over_saturated([]) is None
