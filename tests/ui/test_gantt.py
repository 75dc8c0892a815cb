"""The queue Gantt's bars."""

from __future__ import annotations

from tests.ui.test_run_model import S, started
from workbench.engine.base.records import RequestRecord
from workbench.engine.events import RequestFinished
from workbench.ui.gantt import FAILED_MIN_SHARE, GanttView
from workbench.ui.run_model import RunModel


def test_a_request_refused_at_once_still_shows_as_a_red_bar(qtbot):
    """Refused in 10 ms on a 100-second run: a true-width bar would be under a pixel."""
    gantt = GanttView()
    qtbot.addWidget(gantt)
    model = RunModel()
    started(model, 1)  # submitted at 0 s
    refused = RequestRecord(0, 0, 0, "p", t_submit_ns=0, t_done_ns=S // 100, error="refused")
    model.apply([RequestFinished(refused)])
    gantt.sync(model, 100.0)
    options = gantt.bars["failed"].opts
    assert list(options["x0"]) == [0.0]
    assert list(options["width"]) == [FAILED_MIN_SHARE * 100.0]
    assert list(gantt.bars["queued"].opts["width"]) == []
