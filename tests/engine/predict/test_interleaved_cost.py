"""The cost of a step that holds a prompt beside generating tokens: fitted as a term of its
own from the prompts the server processed while others generated, used by the scheduler
model for such a step, and absent (0) from a calibration stored before it existed."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from tests.engine.predict.test_calibration import (
    COSTS,
    calibration,
    group,
    probe_like,
    slowed,
)
from tests.made_sessions import NS
from workbench.engine.base.errors import ImportFileError
from workbench.engine.base.records import RequestRecord
from workbench.engine.predict.calibration import ChatTokens, fit_costs, load, save
from workbench.engine.predict.costs import DecodeCost, PrefillCost, StepCosts
from workbench.engine.predict.describe import describe
from workbench.engine.predict.scheduler_model import Request, ServerShape, predict

EXTRA_MS = -6.0  # the generating tokens cost 6 ms less in the prompt's batch than alone


def beside_two(at_s: float, extra_ms: float = EXTRA_MS) -> list[RequestRecord]:
    """Two requests generating when a 256-token prompt arrives: its step holds their
    tokens too, so its prompt_ms is its prompt's cost, their step's and ``extra_ms``, and
    their decode takes that step's time besides their own steps."""
    pair = group(at_s, 2, 16, 24)
    first_s = pair[0].t_first_token_ns / NS
    (prompt,) = group(first_s + 0.05 - COSTS.request_overhead_ms / 1000, 1, 256, 1)
    context = 2 * (16 + 24 / 2)  # what the pair hold on average while they generate
    prompt_ms = prompt.timings["prompt_ms"] + COSTS.decode.step_ms(2, context) + extra_ms
    start = prompt.t_first_token_ns - round(prompt.timings["prompt_ms"] * 1e6)
    first = start + round(prompt_ms * 1e6)
    prompt = replace(
        prompt,
        t_first_token_ns=first,
        t_last_token_ns=first,
        t_done_ns=first,
        timings={**prompt.timings, "prompt_ms": prompt_ms},
    )
    return [prompt, *slowed(pair, prompt_ms)]


def test_the_interleaved_steps_cost_is_fitted_apart_from_the_prompts():
    fit = fit_costs(probe_like() + beside_two(2000.0) + beside_two(3000.0))
    assert fit.costs.interleaved_ms == pytest.approx(EXTRA_MS, abs=1e-6)
    assert fit.costs.prefill.per_token_ms == pytest.approx(COSTS.prefill.per_token_ms, rel=1e-6)
    assert fit.quality.prefill_worst_error < 1e-6


def test_without_a_prompt_beside_generating_steps_there_is_none_to_fit():
    assert fit_costs(probe_like()).costs.interleaved_ms == 0.0


FLAT = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 1.0))


@pytest.mark.parametrize(("extra_ms", "step_ms"), [(0.0, 60.0), (-4.0, 56.0), (-30.0, 50.0)])
def test_a_step_of_prompt_and_generating_tokens_pays_the_interleaved_cost(extra_ms, step_ms):
    """A 50-token prompt arriving while another generates: its step is that one's 10 ms,
    its own 50 and the interleaved cost, never less than the dearer part alone (50 ms)."""
    costs = replace(FLAT, interleaved_ms=extra_ms)
    generating, late = Request(0.0, 10, 20), Request(0.015, 50, 1)
    first, second = predict([generating, late], ServerShape(2, 4096), costs)
    # the first's prompt takes 10 ms, then steps of 10 ms; the second arrives in the second
    # step and its prompt rides in the third, which ends at 0.03 + its cost
    assert second.first_token_s == pytest.approx(0.02 + step_ms / 1000)
    assert first.token_times_s[2] == pytest.approx(second.first_token_s)


def test_describe_says_the_interleaved_cost():
    made = calibration()
    made = replace(made, costs=replace(made.costs, interleaved_ms=-3.25))
    assert any("-3.2 ms" in line and "beside generating" in line for line in describe(made))


def test_a_calibration_stored_before_the_interleaved_cost_and_chat_tokens_loads(tmp_path):
    """A file written by the workbench before these fields existed reads as none of each:
    no interleaved cost (its fit had none) and no chat tokens per message."""
    path = save(calibration(template_tokens=30), tmp_path)
    document = json.loads(path.read_text())
    del document["costs"]["interleaved_ms"], document["chat"]
    path.write_text(json.dumps(document))
    older = load(path)
    assert older.costs.interleaved_ms == 0.0 and older.chat is None
    assert older.template_tokens == 30


def test_the_chat_tokens_read_back_and_are_checked(tmp_path):
    chat = ChatTokens(prompt=30, system_prompt=14, exchange=11, opening=24, system_opening=8)
    made = calibration(chat=chat)
    made = replace(made, costs=replace(made.costs, interleaved_ms=-2.5))
    path = save(made, tmp_path)
    assert load(path) == made
    document = json.loads(path.read_text())
    del document["chat"]["exchange"]
    path.write_text(json.dumps(document))
    with pytest.raises(ImportFileError, match=r"chat\.exchange"):
        load(path)
