"""Prompt lengths drawn for a configuration's requests: their spread and their seeds."""

from __future__ import annotations

import statistics

import pytest

from workbench.engine.config.experiment import RequestsWorkload
from workbench.engine.measure.sized_prompts import MIN_DRAWN_TOKENS, input_lengths


def lengths(count: int = 2000, **settings: object) -> list[int]:
    return input_lengths(RequestsWorkload(**settings), count)


def test_fixed_and_unset_lengths() -> None:
    assert lengths(3, input_tokens=512) == [512, 512, 512]
    assert lengths(2, input_tokens=512, input_spread="normal") == [512, 512]  # no spread given
    assert lengths(2) == [0, 0]  # prompts as written


def test_uniform_lengths_stay_in_their_range_with_the_asked_mean() -> None:
    drawn = lengths(input_tokens=1000, input_spread="uniform", input_spread_tokens=400)
    assert min(drawn) >= 600 and max(drawn) <= 1400
    assert statistics.fmean(drawn) == pytest.approx(1000, rel=0.02)
    assert statistics.pstdev(drawn) == pytest.approx(800 / 12**0.5, rel=0.05)


def test_normal_lengths_have_the_asked_mean_and_deviation() -> None:
    drawn = lengths(input_tokens=2048, input_spread="normal", input_spread_tokens=256)
    assert statistics.fmean(drawn) == pytest.approx(2048, rel=0.01)
    assert statistics.stdev(drawn) == pytest.approx(256, rel=0.05)


def test_a_wide_spread_never_draws_a_prompt_too_short_to_hold_a_question() -> None:
    drawn = lengths(input_tokens=100, input_spread="normal", input_spread_tokens=200)
    assert min(drawn) == MIN_DRAWN_TOKENS
    shared = lengths(input_tokens=300, input_spread="normal", input_spread_tokens=400,
                     shared_prefix_tokens=200)  # fmt: skip
    assert min(shared) == 200 + MIN_DRAWN_TOKENS


def test_every_configuration_of_a_sweep_draws_the_same_lengths() -> None:
    """Request k draws from seed + k whatever its global index: configurations compare."""
    spread = {"input_tokens": 800, "input_spread": "uniform", "input_spread_tokens": 300}
    assert lengths(8, **spread) == lengths(8, **spread)
    assert lengths(8, **spread) != lengths(8, seed=7, **spread)
    assert len(set(lengths(8, **spread))) > 1
