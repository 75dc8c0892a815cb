"""A calibration that knows its evidence: every cost fitted at least 0 (not cut after), its
error judged on requests held back from the fit, what its requests spanned, a prediction
far outside that span or from a fit below the bar said doubtful, a probe's file never taken
by a session's fit, and a file with a negative cost refused."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import pytest

from tests.engine.predict.test_calibration import COSTS, SETTINGS, calibration, group, probe_like
from tests.made_sessions import NS
from workbench.engine.base.errors import ImportFileError
from workbench.engine.base.records import RequestRecord
from workbench.engine.predict.calibration import (
    Coverage,
    _least_squares,
    coverage,
    file_name,
    fit_costs,
    load,
    reproduce,
    save,
    stored,
)
from workbench.engine.predict.describe import DECODE_BAR, describe, doubts


def alone(at_s: float, prompt: int, tokens: int, step_ms: float) -> RequestRecord:
    """One request alone, each of its steps ``step_ms``."""
    (record,) = group(at_s, 1, prompt, tokens)
    predicted_ms = (tokens - 1) * step_ms
    last = record.t_first_token_ns + round(predicted_ms * 1e6)
    return replace(
        record,
        t_last_token_ns=last,
        t_done_ns=last,
        timings={**record.timings, "predicted_ms": predicted_ms},
    )


def four_short() -> list[RequestRecord]:
    """The issue's session: 4 requests of 16 tokens one after another, their prompts a
    little longer each, their steps a little faster each (noise): a free fit reads a cost
    per context token below 0."""
    return [alone(10.0 * k, 20 + 10 * k, 16, 10.0 - 0.3 * k) for k in range(4)]


def test_a_free_fit_of_the_issues_session_says_decoding_gets_cheaper_with_context():
    """What the fit did before: the same equations solved without the constraint."""
    fit = fit_costs(four_short())
    rows = [[15.0, 15.0, 15.0 * (20 + 10 * k + 16 + 8)] for k in range(4)]
    observed = [r.timings["predicted_ms"] for r in four_short()]
    free, *_ = np.linalg.lstsq(
        np.array(rows)[:, [0, 2]] / np.array(observed)[:, None], np.ones(4), rcond=None
    )
    assert free[1] < 0  # the negative cost per context token the issue saw
    assert fit.costs.decode.per_context_token_ms == 0.0  # never below 0
    assert fit.costs.decode.base_ms > 0


def test_every_cost_is_at_least_zero_and_its_quality_is_the_constrained_fits():
    fit = fit_costs(four_short())
    d, p = fit.costs.decode, fit.costs.prefill
    assert min(d.base_ms, d.per_sequence_ms, d.per_context_token_ms) >= 0
    assert min(p.base_ms, p.per_token_ms, p.per_token_context_ms) >= 0
    assert fit.quality == replace(
        reproduce(fit.costs, four_short()),
        **{k: v for k, v in vars(fit.quality).items() if k.startswith("held_back_")},
    )
    assert fit.quality.decode_median_error > 0.01  # the constant step cannot fit the drift


@pytest.mark.parametrize("seed", range(20))
def test_the_constrained_fit_is_the_best_of_every_non_negative_choice(seed):
    """Against every subset of the coefficients left free (the rest 0): the fit's relative
    error is the least of those whose coefficients are all at least 0."""
    rng = np.random.default_rng(seed)
    rows = [[1.0, float(rng.uniform(1, 8)), float(rng.uniform(10, 3000))] for _ in range(12)]
    truth = rng.uniform(-2, 5, size=3) * [1.0, 1.0, 0.002]
    observed = [max(0.5, float(np.dot(r, truth)) * rng.uniform(0.8, 1.2)) for r in rows]
    design = np.array(rows) / np.array(observed)[:, None]

    def loss(x):
        return float(np.sum((design @ np.array(x) - 1.0) ** 2))

    best = np.inf
    for size in range(1, 4):
        for subset in itertools.combinations(range(3), size):
            solved = np.linalg.lstsq(design[:, subset], np.ones(len(rows)), rcond=None)[0]
            if (solved >= 0).all():
                x = np.zeros(3)
                x[list(subset)] = solved
                best = min(best, loss(x))
    got = _least_squares(rows, observed)
    assert min(got) >= 0
    assert loss(got) == pytest.approx(best, rel=1e-6, abs=1e-12)


def test_a_signed_column_may_be_a_saving():
    rows = [[1.0, 10.0, 0.0], [1.0, 20.0, 0.0], [1.0, 10.0, 1.0], [1.0, 20.0, 1.0]]
    observed = [12.0, 22.0, 6.0, 16.0]  # the third column saves 6 ms
    assert _least_squares(rows, observed, signed=(2,)) == pytest.approx([2.0, 1.0, -6.0])
    assert min(_least_squares(rows, observed)) >= 0


def test_requests_held_back_show_what_the_fit_alone_hides():
    """Exact timings: held back, no error (the one prompt after a cache is not alone of its
    kind: every prompt's attention over its own tokens tells the cost per token pair). Each
    step's time drifting: the fit to all requests absorbs some of what the held-back ones
    show."""
    exact = fit_costs(probe_like()).quality
    assert exact.held_back_decode_median_error == pytest.approx(0, abs=1e-6)
    assert exact.held_back_prefill_median_error == pytest.approx(0, abs=1e-6)
    assert exact.prefill_worst_error < 1e-6 and exact.held_back_prefill_worst_error < 1e-6
    noisy = []
    for k, r in enumerate(probe_like()):
        scale = 1.0 + 0.3 * ((k * 7) % 5 - 2) / 2
        noisy.append(
            replace(r, timings={**r.timings, "predicted_ms": r.timings["predicted_ms"] * scale})
        )
    quality = fit_costs(noisy).quality
    assert quality.held_back_decode_median_error > quality.decode_median_error
    assert quality.held_back_decode_worst_error >= quality.decode_worst_error


def test_one_request_holds_none_back():
    quality = fit_costs(group(0.0, 1, 16, 10)).quality
    assert quality.held_back_decode_median_error is None
    assert quality.held_back_prefill_median_error is None


def test_the_coverage_is_the_longest_prompt_the_most_together_and_the_longest_context():
    assert fit_costs(probe_like()).coverage == Coverage(1024, 8, 1024 + 24)
    # two generating, the second starting as the first ends: never together
    first = alone(0.0, 16, 10, 10.0)
    second = alone(0.0, 16, 10, 10.0)
    shift = first.t_last_token_ns - second.t_first_token_ns
    second = replace(
        second,
        t_first_token_ns=second.t_first_token_ns + shift,
        t_last_token_ns=second.t_last_token_ns + shift,
    )
    assert coverage([first, second]) == Coverage(16, 1, 26)


def made(records: list[RequestRecord], source: str = "probe"):
    fit = fit_costs(records)
    return calibration(costs=fit.costs, quality=fit.quality, coverage=fit.coverage, source=source)


def test_the_issues_fit_is_doubtful_for_what_it_was_asked():
    """Four 16-token requests fit themselves well, and say nothing of 1,500-token prompts:
    a prediction of those says why and what would do better."""
    weak = made(four_short(), "quick.session.sqlite")
    asked = Coverage(1500, 1, 1756)
    said = [d.line() for d in doubts(weak, asked)]
    assert any("fitted to 4 generating requests" in line for line in said)
    (outside,) = [line for line in said if line.startswith("asked about")]
    assert "prompts of up to 1,500 (its requests: 50)" in outside
    assert "contexts of up to 1,756" in outside
    assert all("`workbench calibrate`" in line for line in said)


def test_a_probe_asked_within_its_span_and_within_the_bar_holds():
    probe = made(probe_like())
    assert doubts(probe, Coverage(1500, 8, 1756)) == []
    (beyond,) = doubts(probe, Coverage(4000, 8, 4096))
    assert "`workbench calibrate --from SESSION` of a run at those sizes" in beyond.line()


def test_a_fit_above_the_bar_held_back_is_doubtful():
    probe = made(probe_like())
    off = replace(probe.quality, held_back_decode_median_error=DECODE_BAR + 0.1)
    (doubt,) = doubts(replace(probe, quality=off))
    assert "decode times were off by 35% (median), above the 25% bar" in doubt.why
    assert "calibrate again on a quiet machine" in doubt.better


def test_describe_says_the_held_back_error_and_the_span():
    lines = describe(made(probe_like()))
    assert any(line.startswith("held back (each request predicted by a fit") for line in lines)
    assert (
        "its requests spanned prompts of up to 1,024 tokens, 8 generating at once, "
        "contexts of up to 1,048 tokens"
    ) in lines


# -- the files ----------------------------------------------------------------------------


def test_a_sessions_fit_is_stored_beside_the_probes_never_in_its_place(tmp_path):
    probe = made(probe_like())
    fitted = made(four_short(), "quick.session.sqlite")
    probe_path, fit_path = save(probe, tmp_path), save(fitted, tmp_path)
    assert probe_path != fit_path and fit_path.name.endswith("-from-session.json")
    assert load(probe_path) == probe and load(fit_path) == fitted
    same = (probe.machine, probe.model, probe.build, SETTINGS)
    assert stored(*same, tmp_path) == (probe_path, probe)  # the probe's first
    probe_path.unlink()
    assert stored(*same, tmp_path) == (fit_path, fitted)  # else the session's fit
    assert file_name(*same) == probe_path.name


def test_a_file_with_a_negative_cost_is_refused_in_one_line(tmp_path):
    path = save(calibration(), tmp_path)
    document = json.loads(path.read_text())
    document["costs"]["decode"]["per_context_token_ms"] = -8.703e-05
    path.write_text(json.dumps(document))
    with pytest.raises(ImportFileError) as refused:
        load(path)
    (line,) = str(refused.value).splitlines()
    assert line == (
        f"{path.name}: costs.decode.per_context_token_ms must be at least 0: a cost is never "
        "negative (an older workbench's fit: calibrate again), got -8.703e-05"
    )
    assert stored(calibration().machine, calibration().model, calibration().build, SETTINGS,
                  tmp_path) is None  # fmt: skip


def test_a_signed_interleaved_cost_still_loads(tmp_path):
    made_ = calibration()
    made_ = replace(made_, costs=replace(made_.costs, interleaved_ms=-5.8))
    assert load(save(made_, tmp_path)).costs.interleaved_ms == -5.8


@pytest.mark.parametrize("text", ["{}", '{"name": "exp", "server": {}}', '{"version": 1}'])
def test_a_json_that_is_no_calibration_says_so(tmp_path, text):
    path = tmp_path / "other.json"
    path.write_text(text)
    with pytest.raises(ImportFileError) as refused:
        load(path)
    (line,) = str(refused.value).splitlines()
    assert line == (  # the document itself is not echoed after the rule's words
        "other.json: not a calibration (it has no version and costs: `workbench calibrate` "
        "makes one)"
    )


def test_a_file_from_before_the_held_back_error_and_span_loads(tmp_path):
    path = save(made(probe_like()), tmp_path)
    document = json.loads(path.read_text())
    del document["coverage"]
    for key in [k for k in document["quality"] if k.startswith("held_back_")]:
        del document["quality"][key]
    path.write_text(json.dumps(document))
    older = load(path)
    assert older.coverage is None and older.quality.held_back_decode_median_error is None
    assert any("fewer than the 8" in d.why for d in doubts(older))


def test_a_made_session_of_known_costs_still_fits_them_exactly():
    """The constraint costs nothing where the truth is non-negative (``COSTS``)."""
    fit = fit_costs(probe_like())
    assert fit.costs.decode.base_ms == pytest.approx(COSTS.decode.base_ms, rel=1e-6)
    assert NS == 1e9
