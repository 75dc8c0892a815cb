"""The run's prediction in the window: its headline above the Gantt, its bars behind the
measured ones, and its figures beside the measured ones in the results and the charts."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from tests.ui.test_run_model import S, started
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import (
    ConfigStarted,
    ExperimentFinished,
    ExperimentStarted,
    PredictionMade,
    RequestSubmitted,
)
from workbench.engine.figures.metrics import View, figure, shown_in
from workbench.engine.figures.predicted import ConfigPrediction, PredictedRequest, RunPrediction
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.predict.costs import DecodeCost, PrefillCost, StepCosts
from workbench.engine.predict.sweep import predict_experiment
from workbench.ui.captions import NO_CALIBRATION, prediction_line
from workbench.ui.run_model import RunModel
from workbench.ui.views.charts import MetricChart, with_predictions
from workbench.ui.views.gantt import GanttView
from workbench.ui.views.gantt_rows import ghost_bars, lane_rows
from workbench.ui.views.results_view import BESIDE, ResultsView

FLAT = StepCosts(DecodeCost(10.0, 0.0, 0.0), PrefillCost(0.0, 0.5))
SLOWER = StepCosts(DecodeCost(12.0, 0.0, 0.0), PrefillCost(0.0, 0.5))
SWEEP = (
    "name = 'p'\n[server]\nslots = [1, 2]\nctx = 4096\n"
    "[workload]\nrequests = 3\ninput_tokens = 100\nmax_tokens = 5\nwarmup = 0\n"
)


def prediction_of(toml: str, costs: StepCosts = FLAT) -> RunPrediction:
    """The experiment predicted on hand-made costs, its requests as a run's prediction
    holds them."""
    configs = []
    for p in predict_experiment(parse_experiment(toml), costs, PromptSource(), template_tokens=0):
        requests = tuple(
            PredictedRequest(
                r.index,
                -1 if r.warmup else r.repeat,
                r.slot,
                (r.t_submit_ns or 0) / S,
                None if r.t_first_token_ns is None else r.t_first_token_ns / S,
                (r.t_done_ns or 0) / S,
            )
            for r in p.records
        )
        configs.append(
            ConfigPrediction(p.config.index, p.config.label, p.summary, requests, p.requests_s, "t")
        )
    return RunPrediction(tuple(configs))


def test_the_line_says_the_prediction_and_why_there_is_none():
    model = RunModel()
    assert prediction_line(model) == ""
    started(model, 3)  # a run whose first configuration started, no prediction came
    assert prediction_line(model) == f"No prediction: {NO_CALIBRATION}"
    assert prediction_line(model, live=False) == ""  # a replay: the session's run, not this
    model.apply([ExperimentFinished("complete")])
    assert prediction_line(model) == ""  # a session stored without one: nothing to say
    prediction = prediction_of(SWEEP)
    model.apply([ExperimentStarted("e", "s", 2, "managed", 0), PredictionMade(prediction)])
    assert prediction_line(model) == f"Predicted: {prediction.headline()}"
    lacking = tuple(f"np={n}: no calibration for m.gguf with threads=4" for n in (1, 2, 4))
    model.apply(
        [ExperimentStarted("e", "s", 3, "managed", 0), PredictionMade(RunPrediction((), lacking))]
    )
    assert prediction_line(model) == (
        "No prediction: np=1: no calibration for m.gguf with threads=4 (and 2 configurations "
        "more) (Calibrate, Server tab)"
    )


def test_the_ghost_starts_with_its_measured_repeat_in_the_rows_of_its_requests():
    """The first configuration's three requests, sent at 0, 0.1 and 0.2 s of the run, after
    the run's clock started at 5 s: each predicted bar from 5 s plus its predicted times."""
    model = RunModel()
    config = parse_experiment(SWEEP).configs()[0]
    prediction = prediction_of(SWEEP)
    model.apply([ExperimentStarted("e", "s", 2, "managed", 0), PredictionMade(prediction)])
    assert ghost_bars(model, None) == ([], [], [])  # no repeat has begun
    model.apply([ConfigStarted(config, 3)])
    model.apply([RequestSubmitted(0, 0, 7 + i, False, 5 * S + i * S // 10) for i in range(3)])
    predicted = [r for r in prediction.configs[0].requests if r.repeat == 0]
    x0s, widths, rows = ghost_bars(model, None)
    assert rows == [0, 1, 2]  # the k-th predicted in the k-th measured's row (indices 7-9)
    assert x0s == [pytest.approx(5.0 + r.sent_s) for r in predicted]
    assert widths == [pytest.approx(r.end_s - r.sent_s) for r in predicted]
    # One slot: its lane holds each from its first token (the slot's work), none queued.
    lanes, names = lane_rows(model, ghosts=True)
    x0s, widths, rows = ghost_bars(model, lanes)
    assert names == ["np=1 · slot 0", "np=1 · unmatched"] and rows == [0, 0, 0]
    assert x0s == [pytest.approx(5.0 + (r.first_token_s or 0)) for r in predicted]


def test_the_gantt_draws_the_ghost_and_its_legend_names_it(qtbot):
    gantt = GanttView()
    qtbot.addWidget(gantt)
    model = RunModel()
    started(model, 3)
    gantt.sync(model, 1.0)
    assert gantt.ghost_count() == 0 and not gantt.ghost_legend.isVisible()
    model.prediction = prediction_of(SWEEP)
    gantt.sync(model, 1.0)
    assert gantt.ghost_count() == 3 and gantt.ghost_legend.isVisible()
    ((sample, label),) = gantt.ghost_legend.items
    assert sample.item is gantt.ghosts and label.text == "predicted"
    assert gantt.ghosts.zValue() < gantt.bars["decoding"].zValue()  # behind the bars


def test_the_results_show_each_compared_figure_predicted_beside_measured(qtbot):
    view = ResultsView()
    qtbot.addWidget(view)
    measured = [c.summary for c in prediction_of(SWEEP, SLOWER).configs]
    prediction = prediction_of(SWEEP)
    view.sync(measured, prediction)
    columns = [f.key for f in view.columns]
    ttft, agg = columns.index("ttft_p50_s"), columns.index("agg_tok_s")
    assert view.table.horizontalHeaderItem(ttft).text().endswith(BESIDE)
    guess, seen = prediction.configs[0].summary, measured[0]
    f = figure("ttft_p50_s")
    error = (guess.value(f.key) - seen.value(f.key)) / seen.value(f.key)
    assert view.table.item(0, ttft).text() == f"{f.cell(guess)} / {f.cell(seen)} ({error:+.0%})"
    assert " / " in view.table.item(1, agg).text()
    label = columns.index("label")
    assert " / " not in view.table.item(0, label).text()  # only the compared figures
    view.sync(measured)  # the same summaries without a prediction: measured alone
    assert view.table.item(0, ttft).text() == f.cell(seen)
    assert not view.table.horizontalHeaderItem(ttft).text().endswith(BESIDE)


def test_a_chart_draws_the_prediction_dashed_in_the_runs_colour(qtbot):
    measured = [c.summary for c in prediction_of(SWEEP, SLOWER).configs]
    predicted = [c.summary for c in prediction_of(SWEEP).configs]
    charts = with_predictions([("this run", measured)], [predicted], shown_in(View.LIVE_CHART))
    data, dashed = charts[0]
    assert dashed == {1} and [s.session for s in data.series] == [0, 0]
    assert [s.name for s in data.series] == ["this run", "predicted"]
    chart = MetricChart()
    qtbot.addWidget(chart)
    chart.show_data(data, dashed)
    solid, dash = (curve.opts["pen"] for curve in chart._curves)
    assert solid.style() == Qt.PenStyle.SolidLine and dash.style() == Qt.PenStyle.DashLine
    assert solid.color() == dash.color()
    assert chart.legend.getLabel(chart._curves[1]).text == "predicted"
