"""A request's state has one name in every view: the state's own label (``RequestState``), in
the legend, a stream pane, the Gantt's tooltip and its exported legend."""

from __future__ import annotations

from tests.ui.test_run_model import S, started
from workbench.engine.base.states import RequestState
from workbench.engine.events import FirstToken
from workbench.ui.run_model import RunModel
from workbench.ui.views.gantt_rows import request_tooltip
from workbench.ui.views.legend import StateLegend
from workbench.ui.views.stream_grid import StreamPane


def decoding_view() -> RunModel:
    model = RunModel()
    started(model, 1)
    model.apply([FirstToken(0, 0, 0, 2 * S)])
    return model


def test_the_legend_names_every_state_by_its_label(qtbot):
    legend = StateLegend()
    qtbot.addWidget(legend)
    assert [short for _, short, _ in legend.labels] == [s.label for s in RequestState]
    assert legend.labels[0][2] == "queued (waiting for a slot)"


def test_the_cancelled_entry_shows_only_for_a_run_a_stop_cut_short(qtbot):
    """Every run would otherwise pay a chip's width in the centre column for a state few
    runs have (at 1600 px the results table then scrolled)."""
    legend = StateLegend()
    qtbot.addWidget(legend)
    legend.resize(2000, 40)
    legend.show()
    cancelled = list(RequestState).index(RequestState.CANCELLED)
    narrow = legend.minimumWidth()
    assert not legend.labels[cancelled][0].isVisible()
    legend.show_run(False, False, False, cancelled=True)
    assert legend.labels[cancelled][0].isVisible() and legend.minimumWidth() > narrow
    legend.show_run(False, False, False, cancelled=False)
    assert legend.minimumWidth() == narrow


def test_a_decoding_request_is_called_decode_in_its_pane_and_its_tooltip(qtbot):
    view = decoding_view().ordered()[0]
    assert view.state is RequestState.DECODING
    pane = StreamPane()
    qtbot.addWidget(pane)
    pane.bind(view, "")
    pane.show_state(view, now=2.0)
    assert pane.state.text() == RequestState.DECODING.label == "decode"
    assert "state: decode" in request_tooltip(view).splitlines()[1]
