"""A run on several machines from the window: a run each, their grids and Gantts stacked
under each machine's name on one time axis, each machine's end said in the banner, and
Compare opened with their sessions. Here the machines are this one twice (runs in child
processes against a mock server each), through the window's seam for its runners."""

from __future__ import annotations

from dataclasses import replace

import pytest
from PySide6.QtCore import QTimer

from tests.ui.driving import click_until, run
from tests.ui.test_machine_picker import Hosts, facts
from workbench.cli.main import build_parser, main
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.config.preferences import load_preferences, remember
from workbench.engine.run.process_runner import ProcessRunner
from workbench.engine.store import open_session
from workbench.mock_server import MockProcess
from workbench.ui.app import build_window
from workbench.ui.controllers.hosts_controller import LOCAL

QUICK = ("--ttft-ms", "20", "--itl-ms", "5", "--tokens", "16", "--slots", "4")
EXPERIMENT = 'name = "twins"\n[workload]\nrequests = 4\nmax_tokens = 16\nwarmup = 0\n'


@pytest.fixture(autouse=True)
def own_preferences(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture
def mocks():
    with MockProcess(*QUICK) as here, MockProcess(*QUICK) as there:
        yield {LOCAL: here.url, "twin": there.url}


def machines(window, urls: dict[str, str], broken: str | None = None) -> Hosts:
    """The window's hosts answered by doubles; each host's run a child process measuring
    its own mock (``broken``: a host whose llama-server is not there)."""
    doubles = Hosts(answers={LOCAL: facts("here"), "twin": facts("twin-01")})
    window.hosts.functions = doubles.functions()

    def make_runner(host, experiment, options, model):
        if host == broken:
            options = replace(options, server_bin=f"/nowhere/{host}/llama-server")
        else:
            options = replace(options, base_url=urls[host])
        return ProcessRunner(experiment, options)

    window.stack_runs.make_runner = make_runner
    window.form.load(parse_experiment(EXPERIMENT))
    return doubles


def ended(window, statuses: list[str]) -> bool:
    """The run has ended and no check is under way (the checks Run starts included): a
    worker thread's step left for the next run of the loop can resume with no loop."""
    return bool(statuses) and not window.hosts.busy


def tick(window, host: str) -> None:
    window.form.machines.dest.setText(host)
    window.form.machines.add_typed()


def test_two_machines_run_stacked_on_one_time_axis_and_are_compared(window, loop, mocks):
    machines(window, mocks)
    tick(window, "twin")
    run(loop, lambda: "twin" in window.hosts.facts and not window.hosts.busy, 10)
    statuses: list[str] = []
    window.run_finished.connect(statuses.append)
    click_until(loop, window.run_button, lambda: ended(window, statuses), 120)
    assert statuses == ["complete"], window.banner.text()
    assert window.stack.isVisible() and not window.views.isVisible()
    top, bottom = window.stack.panes
    assert bottom.title.text() == "twin  ·  twin-01  ·  NVIDIA H200 (139 GiB)"
    # Not checked before Run: checked as the run starts, and named once it is.
    assert top.title.text() == "This machine  ·  here  ·  NVIDIA H200 (139 GiB)"
    for pane in (top, bottom):
        assert pane.gantt.bar_count() == 4
        assert len(pane.grid.panes) == 4
        assert all(p.state.text() == "done" for p in pane.grid.panes.values())
    assert bottom.gantt.getViewBox().linkedView(0) is top.gantt.getViewBox()
    (shown,) = set(window.stack.x_range())
    assert shown[0] == 0 and shown[1] >= max(m.last_t for m in window.stack_runs.models)
    # Both runs count from the one origin: each run's own start is after it.
    for model in window.stack_runs.models:
        assert 0 <= min(v.t_submit for v in model.requests.values()) < shown[1]
    banner = window.banner.text().splitlines()
    assert banner[0].startswith("This machine: Finished. Session: ")
    assert banner[1].startswith("twin: Finished. Session: ")
    sessions = [host_run.session for host_run in window.stack_runs.runs]
    assert [p.parent.name for p in sessions] == [LOCAL, "twin"]
    for path in sessions:
        with open_session(path) as session:
            assert session.status == "complete" and len(session.records(0)) == 4
    (compare,) = window.compare_windows
    assert compare.paths == sessions
    assert window.run_button.isEnabled() and not window.running
    assert window.prediction_line.isHidden()
    window.lanes_box.setChecked(True)  # every machine's Gantt in lanes by slot
    assert [pane.gantt.lanes for pane in window.stack.panes] == [True, True]


def test_a_machine_that_fails_to_prepare_is_said_and_the_other_runs(window, loop, mocks):
    machines(window, mocks, broken="twin")
    tick(window, "twin")
    statuses: list[str] = []
    window.run_finished.connect(statuses.append)
    click_until(loop, window.run_button, lambda: ended(window, statuses), 120)
    assert statuses == ["failed"]
    here, twin = window.stack_runs.runs
    assert here.status == "complete" and twin.status == "failed"
    assert window.stack.panes[0].gantt.bar_count() == 4
    lines = window.banner.text().splitlines()
    assert lines[0].startswith("This machine: Finished. Session: ")
    assert lines[1].startswith("twin: ") and "/nowhere/twin/llama-server" in lines[1]
    assert window.compare_windows == []  # one session: nothing to compare


def test_this_machine_alone_runs_in_the_window_s_own_views(window, loop, mocks):
    machines(window, mocks)
    window.form.external.setChecked(True)
    window.form.base_url.setText(mocks[LOCAL])
    statuses: list[str] = []
    window.run_finished.connect(statuses.append)
    click_until(loop, window.run_button, lambda: ended(window, statuses), 120)
    assert statuses == ["complete"], window.banner.text()
    assert window.views.isVisible() and not window.stack.isVisible()
    assert window.stack.panes == [] and window.stack_runs.runs == []
    assert window.gantt.bar_count() == 4
    assert window.result is not None and window.result.session_path.parent == window.out_dir


def test_gui_host_ticks_those_machines_for_this_window_only(qtbot, loop, tmp_path):
    remember(machines_ticked=("mac",))
    args = build_parser().parse_args(
        ["gui", "--out", str(tmp_path), "--host", "local", "--host", "me@127.0.0.1"]
    )
    window, loaded = build_window(args)
    qtbot.addWidget(window)
    assert loaded
    assert window.form.machines.ticked_hosts() == [LOCAL, "me@127.0.0.1"]
    assert window.machines.remote_command == ["workbench"]
    assert load_preferences()[0].machines_ticked == ("mac",)  # remembered as it was
    window.shutdown()


def test_gui_host_that_is_no_destination_is_one_line(qapp, loop, tmp_path, capsys):
    code = main(["gui", "--out", str(tmp_path), "--host=-oProxyCommand=x", "--autorun"])
    err = capsys.readouterr().err
    assert code != 0
    said = err.strip().splitlines()[-1]  # after the display plugin's own notes
    assert said.startswith("error: --host ") and "-oProxyCommand=x" in said
    assert said.endswith("an SSH destination cannot start with '-' (ssh reads it as an option)")


def test_stop_stops_every_machine_and_each_says_so(window, loop):
    slow = ("--ttft-ms", "20", "--itl-ms", "50", "--tokens", "400", "--slots", "4")
    with MockProcess(*slow) as here, MockProcess(*slow) as there:
        machines(window, {LOCAL: here.url, "twin": there.url})
        tick(window, "twin")
        statuses: list[str] = []
        window.run_finished.connect(statuses.append)

        stopped: list[bool] = []

        def stop_once_both_send() -> bool:
            """Stop pressed, in the same run of the loop, once both machines are sending."""
            models = window.stack_runs.models
            if not stopped and len(models) == 2 and all(m.requests for m in models):
                stopped.append(window.running and window.stop_button.isEnabled())
                QTimer.singleShot(0, window.stop_button.click)
            return ended(window, statuses)

        click_until(loop, window.run_button, stop_once_both_send, 60)
        assert stopped == [True]
    assert statuses == ["cancelled"]
    assert [r.status for r in window.stack_runs.runs] == ["cancelled", "cancelled"]
    lines = window.banner.text().splitlines()
    assert [line.split(": ", 1)[1].split(".")[0] for line in lines] == ["Stopped", "Stopped"]
    assert not window.running and window.run_button.isEnabled()


def test_an_external_server_with_other_machines_is_refused_in_one_line(window, loop):
    machines(window, {})
    tick(window, "twin")
    window.form.external.setChecked(True)
    window.form.base_url.setText("http://127.0.0.1:8080")
    statuses: list[str] = []
    window.run_finished.connect(statuses.append)
    window.start_run()
    assert statuses == ["failed"] and not window.running
    assert window.banner.text().startswith("An external server is measured from this machine")
    assert window.stack.panes == []
    run(loop, lambda: not window.hosts.busy, 10)
