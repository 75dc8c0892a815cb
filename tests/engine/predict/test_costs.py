"""A step's cost as the calibration's coefficients say, never below none: a fit of a few
prompt lengths gave a prefill intercept of -11.4 ms (measured, a 60 s probe), which would
make a 1-token prompt take -4.4 ms."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workbench.engine.predict.costs import DecodeCost, MicroBatchCost, PrefillCost, StepCosts


def test_costs_add_up_as_their_coefficients_say():
    assert DecodeCost(5.0, 2.0, 0.01).step_ms(3, 100) == pytest.approx(5 + 6 + 1)
    assert DecodeCost(5.0, 2.0, 0.01).step_ms(0, 100) == 0.0
    # each of 10 tokens attends over the 1,000 cached and, on average, 5 of its own chunk
    assert PrefillCost(1.0, 0.5, 0.001).ms(10, 1000) == pytest.approx(1 + 10 * (0.5 + 1.005))
    assert PrefillCost(1.0, 0.5).ms(0) == 0.0


def test_a_negative_intercept_never_makes_a_step_take_less_than_none():
    fitted = PrefillCost(-11.4, 6.96)
    assert fitted.ms(1) == 0.0 and fitted.ms(64) == pytest.approx(-11.4 + 64 * 6.96)
    assert DecodeCost(-20.0, 8.0, 0.0).step_ms(1, 0) == 0.0


def test_a_small_chunk_attends_over_the_cache_at_its_own_dearer_cost():
    """A few dozen query rows cost more a token pair than a long prompt's (measured on the
    2-core machine, bench/chunk_attention.py: chunks of 32 to 63 tokens about twice a
    512-token chunk's): a chunk of at most ``small_chunk_tokens`` pays the dearer."""
    cost = PrefillCost(1.0, 0.5, 0.001, small_chunk_tokens=64, small_chunk_context_ms=0.003)
    assert cost.ms(64, 1000) == pytest.approx(1 + 64 * (0.5 + 0.003 * 1032))
    assert cost.ms(65, 1000) == pytest.approx(1 + 65 * (0.5 + 0.001 * 1032.5))
    # a measured small-chunk cost below the long prompt's never makes a chunk cheaper
    cheaper = PrefillCost(1.0, 0.5, 0.001, small_chunk_tokens=64, small_chunk_context_ms=0.0005)
    assert cheaper.ms(10, 1000) == PrefillCost(1.0, 0.5, 0.001).ms(10, 1000)


def test_each_micro_batch_costs_its_base_and_its_cache():
    """A chunk of 200 tokens after 1,000 at -ub 64: four micro-batches, starting on 1,000,
    1,064, 1,128 and 1,192 cached tokens."""
    each = MicroBatchCost(2.0, 0.01, 64)
    assert each.ms(200, 1000, 64) == pytest.approx(4 * 2.0 + 0.01 * (1000 + 1064 + 1128 + 1192))
    assert each.ms(200, 1000, 512) == pytest.approx(2.0 + 0.01 * 1000)
    assert each.ms(0, 1000, 64) == 0.0


def test_another_ub_pays_what_its_micro_batches_cost_besides_the_measured_ones():
    prefill = PrefillCost(1.0, 0.5, 0.001)
    costs = StepCosts(DecodeCost(5.0, 2.0, 0.01), prefill, ubatch_size=512)
    # not measured: the costs hold at their own -ub alone, and price it as measured
    assert costs.holds_at(512) and not costs.holds_at(64)
    assert costs.chunk_ms(2048, 0, 512) == prefill.ms(2048, 0)
    measured = replace(costs, micro_batch=MicroBatchCost(2.0, 0.01, 64))
    assert measured.holds_at(64) and measured.holds_at(2048)
    assert measured.chunk_ms(2048, 0, 512) == prefill.ms(2048, 0)
    each = measured.micro_batch
    assert each is not None
    for ubatch in (64, 128, 2048):
        besides = each.ms(2048, 100, ubatch) - each.ms(2048, 100, 512)
        assert measured.chunk_ms(2048, 100, ubatch) == pytest.approx(
            prefill.ms(2048, 100) + besides
        )
    assert (
        measured.chunk_ms(2048, 100, 64)
        > prefill.ms(2048, 100)
        > measured.chunk_ms(2048, 100, 2048)
    )
    # a chunk no larger than either -ub is one micro-batch at both: nothing besides
    assert measured.chunk_ms(48, 1000, 64) == prefill.ms(48, 1000)
