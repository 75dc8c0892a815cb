"""A stored session's prediction (``Session.predictions``) in the window: opened, its
results, Gantt and headline show it as the run did; the comparison overlays it dashed."""

from __future__ import annotations

import pytest

from tests.engine.store.test_predictions_stored import sweep_prediction
from tests.engine.store.test_predictions_stored import with_prediction as stored_with
from tests.made_sessions import write_sweep
from tests.ui.driving import run
from workbench.ui.compare_window import CompareWindow, load_comparison


@pytest.fixture
def predicted_sweep(tmp_path):
    return stored_with(write_sweep(tmp_path / "sweep.session.sqlite"), sweep_prediction())


def test_an_opened_session_shows_the_prediction_its_run_made(window, loop, predicted_sweep):
    assert loop.run_until_complete(window.replay.open(predicted_sweep))
    made = sweep_prediction()
    assert window.model.prediction == made
    assert window.prediction_line.isVisible()
    assert window.prediction_line.text() == f"Predicted: {made.headline()}"
    columns = [f.key for f in window.results.columns]
    cell = window.results.table.item(0, columns.index("ttft_p50_s")).text()
    assert " / " in cell and "%)" in cell
    # Each measured request of both configurations has its predicted bar (warm-ups none).
    assert window.gantt.ghost_count() == 6
    window.replay.seek(0.0)  # a seek rebuilds the views from the events: the prediction too
    assert window.model.prediction == made


def test_a_session_without_a_prediction_shows_none(window, loop, tmp_path):
    assert loop.run_until_complete(window.replay.open(write_sweep(tmp_path / "s.session.sqlite")))
    assert window.model.prediction is None and not window.prediction_line.isVisible()
    assert window.gantt.ghost_count() == 0


def test_the_comparison_overlays_each_sessions_prediction_dashed(predicted_sweep, tmp_path):
    plain = write_sweep(tmp_path / "plain.session.sqlite")
    paths = [plain, predicted_sweep]
    assert load_comparison(paths, relative=False).dashed == {}
    loaded = load_comparison(paths, relative=False, predicted=True)
    ttft = next(c for c in loaded.charts if c.key == "ttft_p50_s")
    (place,) = loaded.dashed["ttft_p50_s"]
    assert ttft.series[place].session == 1  # the second session's colour
    assert ttft.series[place].name.endswith("· predicted")
    assert len(ttft.series) == 3


def test_the_comparisons_checkbox_redraws_with_the_predictions(qtbot, loop, predicted_sweep):
    window = CompareWindow([predicted_sweep])
    qtbot.addWidget(window)
    window.show()
    run(loop, lambda: not window.loading.isVisible(), 30)
    chart = window.charts["ttft_p50_s"]
    assert chart.dashed == set()
    window.predicted.setChecked(True)
    run(loop, lambda: not window.loading.isVisible() and chart.dashed, 30)
    assert chart.dashed == {1}
    run(loop, lambda: len(window.gantts) == 1, 30)
    window.close()
    run(loop, lambda: not window.tasks, 10)
