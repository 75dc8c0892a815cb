"""Arrival schedules: their mean rate and how bursty they are, on fixed seeds."""

from __future__ import annotations

import itertools
import statistics

import pytest

from workbench.engine.config.experiment import RequestsWorkload
from workbench.engine.measure.workload import arrival_offsets


def gaps(arrival: str, rate: float, n: int, seed: int = 3, burstiness: float = 1.0) -> list[float]:
    workload = RequestsWorkload(requests=n, arrival=arrival, rate=rate, burstiness=burstiness)
    offsets = arrival_offsets(workload, n, seed)
    assert offsets[0] == 0.0 and offsets == sorted(offsets)
    return [b - a for a, b in itertools.pairwise(offsets)]


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_arrivals_keep_the_mean_rate_at_any_burstiness(burstiness: float) -> None:
    """4,000 gaps at 10 requests/s: the mean gap is 0.1 s within 5 % (its standard error is
    under 1.6 % here), and the spread is the gamma's, 1 / sqrt(burstiness) of the mean."""
    drawn = gaps("gamma", 10.0, 4001, burstiness=burstiness)
    mean = statistics.fmean(drawn)
    assert mean == pytest.approx(0.1, rel=0.05)
    assert statistics.stdev(drawn) / mean == pytest.approx(burstiness**-0.5, rel=0.1)


def test_burstier_arrivals_bunch_up() -> None:
    """The same rate, burstier: more requests land within 10 ms of the one before."""
    close = {k: sum(g < 0.01 for g in gaps("gamma", 10.0, 2001, burstiness=k)) for k in (0.2, 5)}
    assert close[0.2] > 5 * close[5]


def test_poisson_is_gamma_of_burstiness_1() -> None:
    assert gaps("poisson", 4.0, 50, seed=9) == gaps("gamma", 4.0, 50, seed=9, burstiness=1.0)
