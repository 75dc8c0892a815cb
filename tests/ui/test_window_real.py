"""The window driven through a real experiment on the real server."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from tests.ui.driving import click, click_until, run
from workbench.engine.analysis import roofline
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.store import open_session

pytestmark = pytest.mark.server

SWEEP = """
name = "window"
[server]
slots = [1, 2]
ctx = 4096
[workload]
requests = 4
max_tokens = 24
warmup = 1
"""

LONG = """
name = "long"
[server]
slots = 1
ctx = 2048
[workload]
requests = 8
max_tokens = 64
warmup = 0
"""


def load(window, text: str) -> None:
    window.form.load(parse_experiment(text))


def test_a_real_experiment_fills_every_view(window, loop, qtbot, monkeypatch):
    # This machine's bandwidth is measured once and cached; the test gives it.
    monkeypatch.setattr(roofline, "machine_bandwidth", lambda refresh=False: (20e9, False))
    load(window, SWEEP)
    statuses: list[str] = []
    window.run_finished.connect(statuses.append)
    busy: list[bool] = []
    window.runs.busy_changed.connect(
        lambda on: busy.append(on and not window.run_button.isEnabled())
    )
    # in one run of the loop: a task the click starts must not be resumed between two
    click_until(loop, window.run_button, lambda: statuses, 120)
    assert busy == [True, False]
    assert statuses == ["complete"], window.banner.text()
    panes = window.grid.panes
    assert len(panes) == 4  # the last configuration's requests
    assert all(p.body.text().strip() for p in panes.values())
    assert all(p.state.text() == "done" for p in panes.values())
    assert window.gantt.bar_count() == 8  # every measured request of both configurations
    assert len(window.gantt._marks) == 2
    assert window.plots.sample_count() > 3
    assert window.results.table.rowCount() == 2
    assert window.results.table.item(1, 1).text() == "2"
    window.results.tabs.setCurrentIndex(1)  # the Charts tab: drawn when it shows
    assert window.results.charts["agg_tok_s"].data.series[0].x == [1.0, 2.0]
    assert window.results.charts["agg_tok_s"].point_count() == 2
    assert window.server_panel.facts["n_ctx_slot"].text() == "2048"
    window.results.tabs.setCurrentWidget(window.results.verdicts)  # judged when it shows
    verdicts = {v.hypothesis: v.verdict for v in window.results.verdicts.verdicts}
    assert verdicts["each of N explicit slots gets ctx / N tokens of context"] == "supported"
    assert "SUPPORTED" in window.results.verdicts.text.text()
    assert "Finished" in window.banner.text()
    assert (window.out_dir / "concurrency.csv").is_file()
    assert window.run_button.isEnabled()
    run(loop, lambda: window.results.roofline.report is not None, 30)
    roof = window.results.roofline
    window.results.tabs.setCurrentWidget(roof)  # its chart is made when it shows
    assert [r.slots for r in roof.report.rows] == [1, 2]
    assert roof.chart.data.series[0].x == [1.0, 2.0] and roof.chart.point_count() == 4
    assert "Memory bandwidth 20.0 GB/s" in roof.summary.text()


def test_stop_mid_run_keeps_what_finished(window, loop, qtbot):
    load(window, LONG)
    statuses: list[str] = []
    window.run_finished.connect(statuses.append)
    window.start_run()
    run(loop, lambda: any(v.state == "done" for v in window.model.requests.values()), 120)
    click(loop, window.stop_button)
    run(loop, lambda: statuses, 60)
    assert statuses == ["cancelled"]
    assert "Stopped" in window.banner.text()
    with open_session(window.result.session_path) as session:
        assert session.status == "cancelled"
        records = session.records(0)
        assert any(r.ok for r in records) and any(not r.ok for r in records)


def test_closing_during_a_run_stops_the_server(window, loop):
    load(window, LONG)
    window.ask_stop_on_close = lambda: True
    window.start_run()
    run(loop, lambda: window.model.server.state == "running", 120)
    with open_session(window.runner.session_path) as session:
        pid = session.configs[0].pid
    window.close()
    run(loop, lambda: not window.isVisible() and not window.running, 60)
    assert window.result is not None and window.result.status == "cancelled"
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_server_crash_mid_run_is_reported_and_the_window_stays_usable(window, loop):
    load(window, LONG)
    window.start_run()
    run(loop, lambda: any(v.state == "decoding" for v in window.model.requests.values()), 120)
    with open_session(window.runner.session_path) as session:
        pid = session.configs[0].pid
    os.kill(pid, signal.SIGKILL)
    run(loop, lambda: not window.running, 60)
    assert "Finished with errors" in window.banner.text()
    assert "SIGKILL" in window.banner.text()
    assert window.server_panel.state.text() == "crashed"
    assert any(p.state.text() == "failed" for p in window.grid.panes.values())
    assert window.run_button.isEnabled()


def test_a_server_started_by_hand_shows_its_facts_and_stops(window, loop, qtbot):
    load(window, SWEEP)
    panel = window.server_panel
    window.left.setCurrentWidget(panel)  # where its Start button is; its log is read shown
    click_until(
        loop,
        panel.start_button,
        lambda: panel.state.text() == "healthy" and window.manual_server is not None,
        60,
    )
    assert panel.facts["n_slots"].text() == "1"  # the first value of the slots sweep
    assert panel.url.text().startswith("http://127.0.0.1:")
    assert not window.run_button.isEnabled() and panel.stop_button.isEnabled()
    run(loop, lambda: "n_slots = 1" in panel.log.toPlainText(), 10)
    pid = window.manual_server.pid
    click_until(
        loop,
        panel.stop_button,
        lambda: window.manual_server is None and window.run_button.isEnabled(),
        30,
    )
    assert panel.state.text() == "stopped"
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_gantt_lanes_by_slot_on_a_real_run(window, loop):
    load(
        window,
        """
name = "lanes"
[server]
slots = 2
ctx = 2048
[workload]
requests = 4
max_tokens = 64
warmup = 0
""",
    )
    statuses: list[str] = []
    window.run_finished.connect(statuses.append)
    window.start_run()
    run(loop, lambda: statuses, 120)
    matched = [v.slot for v in window.model.requests.values() if v.slot is not None]
    assert matched and set(matched) <= {0, 1}  # 64-token streams are caught by /slots at 4 Hz
    window.lanes_box.setChecked(True)
    rows = {int(y) for item in window.gantt.bars.values() for y in item.opts["y"]}
    assert rows <= {0, 1, 2} and len(rows) >= 2  # two slot lanes (and maybe "unmatched")
    window.lanes_box.setChecked(False)
    assert window.gantt.bar_count() == 4
