"""The steady state of a repeat: a closed loop's from when its requests in flight reach the
limit to its last send, an open loop's between the 10th and 90th percentile of its sends, a
burst's none; and the figures over it."""

from __future__ import annotations

import pytest

from tests.made_sessions import request
from workbench.engine.config.experiment import RequestsWorkload
from workbench.engine.figures.per_run import summarize_run
from workbench.engine.figures.steady_state import steady_window

NS = 1_000_000_000


def closed_loop() -> list:
    """Two in flight at most. The first request (the ramp-up) is slow to its first token;
    each later one goes when a place frees: request 2 when request 0 ends (1.6 s), request 3
    50 ms after request 1 ends (1.7 s)."""
    return [
        request(0, submit_s=0.0, ttft_s=0.5),  # chunks 0.5 .. 1.6 s
        request(1, submit_s=0.45),  # chunks 0.55 .. 1.65 s
        request(2, submit_s=1.6),  # chunks 1.7 .. 2.8 s
        request(3, submit_s=1.75),  # chunks 1.85 .. 2.95 s
    ]


def test_a_closed_loop_is_steady_from_its_limit_to_its_last_send():
    records = closed_loop()
    loop = RequestsWorkload(requests=4, concurrency=2)
    window = steady_window(records, loop)
    assert window is not None
    assert (window.start_ns, window.end_ns) == (round(0.45 * NS), round(1.75 * NS))
    run = summarize_run(records, None, loop)
    assert run.steady.steady_s == pytest.approx(1.3)
    assert run.steady.steady_requests == 3  # requests 1 to 3; request 0 went before the limit
    # Tokens inside the window: all of requests 0 and 1, the first of request 2's.
    assert run.steady.steady_agg_tok_s == pytest.approx(25 / 1.3)
    # The ramp-up's slow first token counts in the whole run only.
    assert run.steady.steady_ttft_p50_s == run.steady.steady_ttft_p90_s == pytest.approx(0.1)
    assert run.ttft_p90_s == pytest.approx(0.38)
    assert run.steady.steady_tpot_p50_ms == pytest.approx(100.0)


def test_a_closed_loop_that_never_reaches_its_limit_has_none():
    # One at a time (each takes 1.2 s): the limit of two is never reached.
    records = [request(i, submit_s=1.3 * i) for i in range(3)]
    assert steady_window(records, RequestsWorkload(requests=3, concurrency=2)) is None


def test_an_open_loop_is_steady_between_the_10th_and_90th_percentile_of_its_sends():
    # Sent a second apart; the first and the last find an empty or a draining server.
    records = [request(i, submit_s=float(i), ttft_s=0.2 if 0 < i < 10 else 0.9) for i in range(11)]
    for arrival in ("poisson", "gamma", "fixed"):
        load = RequestsWorkload(requests=11, arrival=arrival, rate=1.0)
        window = steady_window(records, load)
        assert window is not None
        assert (window.start_ns, window.end_ns) == (1 * NS, 9 * NS)
    run = summarize_run(records, None, RequestsWorkload(requests=11, arrival="poisson", rate=1))
    assert (run.steady.steady_s, run.steady.steady_requests) == (8.0, 9)
    assert run.steady.steady_ttft_p90_s == pytest.approx(0.2)
    assert run.ttft_p90_s == pytest.approx(0.9)
    # A token every 0.1 s: requests 1 to 7 whole inside the window, request 0's from 1.0 to
    # 2.0 s (11), request 8's from 8.2 to 9.0 s (9), none of request 9's (from 9.2 s).
    assert run.steady.steady_agg_tok_s == pytest.approx((7 * 12 + 11 + 9) / 8)


@pytest.mark.parametrize("concurrency", [0, 4, 10])
def test_a_burst_has_no_steady_state(concurrency):
    records = [request(i, submit_s=0.0, ttft_s=0.1 * (i + 1)) for i in range(4)]
    burst = RequestsWorkload(requests=4, concurrency=concurrency)
    assert steady_window(records, burst) is None
    run = summarize_run(records, None, burst)
    assert run.ttft_p50_s is not None
    steady = (
        run.steady.steady_s,
        run.steady.steady_requests,
        run.steady.steady_agg_tok_s,
        run.steady.steady_ttft_p50_s,
    )
    assert steady == (None, None, None, None)
    assert (run.steady.steady_ttft_p90_s, run.steady.steady_tpot_p50_ms) == (None, None)


def test_without_its_workload_a_repeat_has_no_steady_figures():
    assert summarize_run(closed_loop()).steady.steady_s is None
