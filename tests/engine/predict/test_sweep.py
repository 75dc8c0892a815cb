"""An experiment predicted configuration by configuration: its requests as a run would send
them (warm-ups one at a time, then each repeat), through the scheduler model, summarised as a
measured run is, with every ``concurrency.csv`` column."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workbench.engine.analysis.export import concurrency_columns, concurrency_row
from workbench.engine.base.errors import ExperimentError
from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.predict.calibration import ChatTokens
from workbench.engine.predict.costs import DecodeCost, MicroBatchCost, PrefillCost, StepCosts
from workbench.engine.predict.scheduler_model import Request
from workbench.engine.predict.sweep import (
    CHECKED_BATCH,
    RACE_S,
    chunk_note,
    predict_experiment,
    prompt_lengths,
    race_note,
    staggered,
    started_together,
    ubatch_note,
)

# A generating step costs 10 ms; a prompt 0.5 ms a token: a 100-token prompt 50 ms.
FLAT = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 0.5))
CHAT = ChatTokens(prompt=30, system_prompt=14, exchange=11, opening=24, system_opening=8)


def experiment(workload: str, server: str = "slots = [1, 2]\nctx = 4096\n"):
    return parse_experiment(f"name = 'p'\n[server]\n{server}[workload]\n{workload}")


def test_a_slots_sweep_is_predicted_with_every_figure_of_a_measured_run():
    """Two 100-token prompts of 5 tokens each: at 1 slot the second waits the first's 90 ms;
    at 2 both prefill in one step (100 ms) and decode together."""
    e = experiment("requests = 2\ninput_tokens = 100\nmax_tokens = 5\nwarmup = 0\n")
    one, two = predict_experiment(e, FLAT, PromptSource(), template_tokens=0)
    assert one.summary.value("ttft_p50_s") == pytest.approx((0.05 + 0.14) / 2)
    assert one.summary.value("queue_wait_max_s") == pytest.approx(0.09)
    assert one.requests_s == pytest.approx(0.18)
    assert two.summary.value("ttft_p50_s") == pytest.approx(0.10)
    assert two.summary.value("agg_tok_s") == pytest.approx(10 / 0.14)
    assert [s.label for s in (one.summary, two.summary)] == ["np=1", "np=2"]
    row = concurrency_row(two.summary)
    assert set(row) == set(concurrency_columns()) and row["slots"] == 2


def test_warm_ups_go_one_at_a_time_and_each_repeat_is_predicted_apart():
    e = experiment(
        "requests = 2\ninput_tokens = 100\nmax_tokens = 5\nwarmup = 1\nrepeats = 2\n",
        "slots = 2\nctx = 4096\n",
    )
    (only,) = predict_experiment(e, FLAT, PromptSource(), template_tokens=0)
    assert sum(r.warmup for r in only.records) == 1
    assert len(only.summary.runs) == 2 and only.summary.value("requests") == 4  # summed
    assert only.requests_s == pytest.approx(0.09 + 2 * 0.14)


def test_prompts_as_written_are_counted_with_the_models_vocabulary_and_the_template():
    workload = parse_experiment("[workload]\nwarmup = 0\n").configs()[0].workload
    counted = prompt_lengths(workload, 3, 2, PromptSource(["a b", "c"]), lambda t: len(t), 30)
    assert counted == [len("c") + 30, len("a b") + 30]  # prompts 3 and 4, reused in turn
    sized = parse_experiment("[workload]\ninput_tokens = 64\n").configs()[0].workload
    assert prompt_lengths(sized, 0, 2, PromptSource(), None, 30) == [64, 64]


@pytest.mark.parametrize(
    ("workload", "what", "server"),
    [
        (
            "kind = 'conversations'\n",
            "conversations without the chat template's tokens",
            "slots = 2\nctx = 4096\n",
        ),
        (
            "kind = 'conversations'\n",
            "conversations beside the RAM prompt cache",
            "slots = 2\nctx = 4096\ncache_ram_mib = 64\n",
        ),
    ],
)
def test_what_the_model_does_not_predict_is_said_in_one_line(workload, what, server):
    e = experiment(workload, server)
    with pytest.raises(ExperimentError, match=f"does not predict {what} "):
        chat = None if "without" in what else CHAT
        predict_experiment(e, FLAT, PromptSource(), template_tokens=0, chat=chat)


def test_a_slot_is_capped_at_the_models_training_context():
    """The default model was trained on 8192 tokens: at -c 32768 llama-server gives its one
    slot 8192 (measured), so a 10,000-token prompt is refused there, as the run would see."""
    e = experiment(
        "requests = 1\ninput_tokens = 10000\nmax_tokens = 5\nwarmup = 0\n",
        "slots = 1\nctx = 32768\n",
    )
    (capped,) = predict_experiment(e, FLAT, PromptSource(), template_tokens=0)
    assert capped.summary.value("failed") == 1
    e = experiment(
        "requests = 1\ninput_tokens = 8000\nmax_tokens = 5\nwarmup = 0\n",
        "slots = 1\nctx = 32768\n",
    )
    (fits,) = predict_experiment(e, FLAT, PromptSource(), template_tokens=0)
    assert fits.summary.value("failed") == 0


def test_requests_sent_together_are_predicted_starting_apart_too():
    """Two 100-token prompts sent at once at 2 slots: in one step (both first tokens at
    100 ms), or the first alone (50 ms) and the second in the next step beside its first
    decode (60 ms more); at 1 slot the race changes nothing, so nothing is said."""
    e = experiment("requests = 2\ninput_tokens = 100\nmax_tokens = 5\nwarmup = 0\n")
    one, two = predict_experiment(e, FLAT, PromptSource(), template_tokens=0)
    assert two.summary.value("ttft_p50_s") == pytest.approx(0.10)
    assert two.staggered is not None
    assert two.staggered.value("ttft_p50_s") == pytest.approx((0.05 + 0.11) / 2, abs=1e-5)
    assert race_note(two) is not None and race_note(one) is None
    poisson = experiment("requests = 2\ninput_tokens = 100\narrival = 'poisson'\nrate = 2.0\n")
    assert all(p.staggered is None for p in predict_experiment(poisson, FLAT, PromptSource(), 0))


def test_the_race_is_said_where_it_moves_a_figure_by_more_than_a_quarter():
    """Long prompts, long answers: started apart, the first answer waits through the
    other's 500 ms prompt (19 tokens in 0.69 s), so decode speed over both falls from
    100 tok/s to 38 tokens in 0.88 s."""
    e = experiment("requests = 2\ninput_tokens = 1000\nmax_tokens = 20\nwarmup = 0\n")
    _, two = predict_experiment(e, FLAT, PromptSource(), template_tokens=0)
    assert two.staggered is not None
    assert two.summary.value("decode_tok_s") == pytest.approx(100.0)
    assert two.staggered.value("decode_tok_s") == pytest.approx(38 / 0.88)
    note = race_note(two)
    assert note is not None and note.startswith("np=2: requests sent at the same instant")
    assert "Per-request decode speed 100.0 or" in note


def test_staggered_moves_only_requests_due_at_an_instant_already_taken():
    requests = [Request(0.0, 10, 2), Request(0.0, 10, 2), Request(1.0, 10, 2)]
    requests.append(Request(0.0, 10, 2, after=0))  # a turn: due after its answer, no race
    moved = [r.due_s for r in staggered(requests)]
    assert moved == [0.0, pytest.approx(RACE_S), 1.0, 0.0]


def answered(repeat: int, first_ms: float, prompt_ms: float | None, due: int = 0):
    timings = None if prompt_ms is None else {"prompt_ms": prompt_ms}
    return RequestRecord(
        0, repeat, 0, "p", t_intended_ns=due, t_first_token_ns=int(first_ms * 1e6),
        ok=True, timings=timings,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("records", "reading"),
    [
        ([answered(0, 500.0, 500.0), answered(0, 500.4, 500.0)], True),
        ([answered(0, 500.0, 500.0), answered(0, 1100.0, 600.0)], False),
        ([answered(0, 500.0, None), answered(0, 500.4, None)], None),  # no timings
        ([answered(0, 500.0, 500.0), answered(0, 900.0, 500.0, due=5)], None),  # not tied
        (
            [
                *(answered(0, 500.0, 500.0), answered(0, 500.4, 500.0)),
                *(answered(1, 500.0, 500.0), answered(1, 1100.0, 600.0)),
            ],
            None,  # the repeats took the two readings
        ),
    ],
)
def test_a_measured_run_says_which_reading_of_the_race_it_took(records, reading):
    assert started_together(records) is reading


def test_a_b_below_the_one_checked_is_said_so():
    e = experiment(
        "requests = 1\ninput_tokens = 100\nmax_tokens = 5\nwarmup = 0\n",
        f"slots = 2\nctx = 4096\nbatch_size = [{CHECKED_BATCH}, 32]\n",
    )
    checked, small = predict_experiment(e, FLAT, PromptSource(), template_tokens=0)
    assert chunk_note(checked) is None
    assert (
        chunk_note(
            replace(
                checked,
                config=replace(
                    checked.config, server=replace(checked.config.server, batch_size=None)
                ),
            )
        )
        is None
    )  # the server's own -b
    note = chunk_note(small)
    assert note is not None and note.startswith("batch_size=32: -b 32 is below")
    assert "may cost otherwise than predicted" in note


def test_a_ub_priced_beyond_the_ones_checked_is_said_so():
    e = experiment(
        "requests = 1\ninput_tokens = 100\nmax_tokens = 5\nwarmup = 0\n",
        "slots = 2\nctx = 4096\nubatch_size = [512, 64, 32, 2048]\n",
    )
    priced = replace(FLAT, micro_batch=MicroBatchCost(2.0, 0.01, 64))
    own, checked, small, large = predict_experiment(e, priced, PromptSource(), template_tokens=0)
    assert ubatch_note(own, priced) is None and ubatch_note(checked, priced) is None
    note = ubatch_note(small, priced)
    assert note is not None and note.startswith("ubatch_size=32: -ub 32 is priced from")
    assert "checked against the real server from -ub 64 to 512 only" in note
    assert ubatch_note(large, priced) is not None
    # a calibration measured at -ub 2048 needs no pricing there
    assert ubatch_note(large, replace(priced, ubatch_size=2048)) is None
