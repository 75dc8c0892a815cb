"""The Gantt shades each repeat's steady state, in the window and on the HTML page alike,
and a burst's, which has none, not at all."""

from __future__ import annotations

import json

import pytest

from tests.engine.figures.test_saturation import served
from tests.made_sessions import Config, build_session, request
from workbench.engine.run.replay import load_session_events
from workbench.ui.exports.gantt_html import gantt_document, gantt_html
from workbench.ui.run_model import RunModel
from workbench.ui.views.gantt import GanttView
from workbench.ui.views.gantt_rows import steady_spans

OPEN_LOOP = 'name = "steady"\n[workload]\narrival = "poisson"\nrate = 2.0\nrequests = 40\n'
BURST = 'name = "burst"\n[workload]\nrequests = 4\n'


def replayed(tmp_path, toml: str, records: list) -> RunModel:
    path = build_session(tmp_path / "made.session.sqlite", toml, [Config(records)])
    model = RunModel()
    model.apply([event for _, event in load_session_events(path)])
    return model


def test_an_open_loops_steady_state_is_shaded(qtbot, tmp_path):
    # Sent every 0.5 s from 0 to 19.5 s: steady from the 10th (1.95 s) to the 90th
    # percentile (17.55 s) of the sends.
    model = replayed(tmp_path, OPEN_LOOP, served([i / 2 for i in range(40)]))
    first = min(v.t_submit for v in model.ordered() if v.t_submit is not None)
    ((start, end),) = steady_spans(model)
    assert (start - first, end - first) == (pytest.approx(1.95), pytest.approx(17.55))
    gantt = GanttView()
    qtbot.addWidget(gantt)
    gantt.sync(model, model.last_t)
    (region,) = gantt.steady
    assert region.getRegion() == (pytest.approx(start), pytest.approx(end))
    assert region.zValue() < min(bar.zValue() for bar in gantt.bars.values())
    assert gantt_document(model, "t")["steady"] == [[round(start, 4), round(end, 4)]]
    page = gantt_html(model, "t")
    data = json.loads(page.split('id="data">')[1].split("</script>")[0])
    assert data["steady"] and data["steadyColor"].startswith("#")


def test_a_burst_has_no_shade(qtbot, tmp_path):
    model = replayed(tmp_path, BURST, [request(i) for i in range(4)])
    assert steady_spans(model) == []
    gantt = GanttView()
    qtbot.addWidget(gantt)
    gantt.sync(model, model.last_t)
    assert gantt.steady == []
