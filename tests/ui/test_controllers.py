"""The window's controllers on their own, driven with real engine objects and made sessions
(and the real llama-server for the hand-started one): what each emits and what it leaves on
the views, without the window around them."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from tests.made_sessions import request, write_session, write_sweep
from tests.ui.driving import run
from workbench.engine.analysis.slo import Slo
from workbench.engine.base.states import RunStatus
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.events import (
    ConfigStarted,
    ExperimentStarted,
    Notice,
    RequestFinished,
    RequestSubmitted,
)
from workbench.engine.run.replay import load_session
from workbench.engine.server.llama_server import free_port
from workbench.ui.controllers.analysis_controller import AnalysisController
from workbench.ui.controllers.library_controller import LibraryController
from workbench.ui.controllers.render_controller import RenderController
from workbench.ui.controllers.replay_controller import (
    PAST_START_S,
    ReplayController,
)
from workbench.ui.controllers.run_controller import RunController
from workbench.ui.controllers.server_controller import ServerController
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.panels.server_panel import ServerPanel
from workbench.ui.run_model import RunModel
from workbench.ui.views.gantt import GanttView
from workbench.ui.views.results_view import ResultsView
from workbench.ui.views.server_plots import ServerPlots
from workbench.ui.views.stream_grid import StreamGrid

S = 10**9


@pytest.fixture(autouse=True)
def collected_here():
    """The controllers and their views leave reference cycles through their signals; a full
    collection here, on the GUI thread, frees them. Left to a later collection, one that a
    worker thread's allocations set off (a real run's, in a later test), Qt objects were
    freed off their thread: a segfault."""
    yield
    gc.collect()


def recorder(signal) -> list:
    """Everything ``signal`` emits, in order (each emission's arguments as a tuple)."""
    seen: list = []
    signal.connect(lambda *args: seen.append(args))
    return seen


@pytest.fixture
def tasks(loop):
    owned = Tasks()
    yield owned
    run(loop, lambda: not owned, 30)  # every task a test started has ended


@pytest.fixture
def renderer(qtbot) -> RenderController:
    """The painter with the window's real views, unshown."""
    views = StreamGrid(), GanttView(), ServerPlots(), ResultsView(), ServerPanel()
    for view in views:
        qtbot.addWidget(view)
    return RenderController(RunModel(), *views)


@pytest.fixture
def sweep(tmp_path) -> Path:
    return write_sweep(tmp_path / "sweep.session.sqlite")


# -- render -----------------------------------------------------------------------------------
def started(n: int) -> list[object]:
    config = parse_experiment("[server]\nslots = 1\n").configs()[0]
    return [
        ExperimentStarted("e", "s", 1, "managed", 0),
        ConfigStarted(config, n),
        *(RequestSubmitted(0, 0, i, False, i * S // 10) for i in range(n)),
    ]


def test_the_painter_says_how_far_a_run_is_and_gives_a_warning_once(renderer):
    progress, warnings = recorder(renderer.progress), recorder(renderer.warning)
    finished = RequestFinished(request(0, submit_s=0.0))
    renderer.render([*started(2), finished], 1.0, force=True)
    assert progress[-1] == ("running np=1 (1/1)  ·  1/2 done",)
    assert renderer.grid.panes.keys() == renderer.model.requests.keys()
    assert renderer.gantt.bar_count() == 2
    warning = Notice("warning", "client saturated", 0)
    renderer.render([warning], 1.5)
    renderer.render([Notice("info", "by the way", 0)], 2.0)
    assert warnings == [("client saturated",)]


def test_a_session_painted_whole_fills_every_view(renderer, sweep):
    events, _ = load_session(sweep)
    progress = recorder(renderer.progress)
    renderer.render([e for _, e in events], None, force=True)
    model = renderer.model
    assert model.status is RunStatus.COMPLETE and progress == []  # over: no progress line
    assert len(renderer.grid.panes) == 3  # the last configuration's requests
    assert renderer.gantt.bar_count() == 6  # every measured request of both
    assert renderer.results.table.rowCount() == 2
    assert renderer.server_panel.facts["n_slots"].text() == "2"


# -- replay -----------------------------------------------------------------------------------
@pytest.fixture
def replay(renderer) -> ReplayController:
    return ReplayController(renderer.model, renderer, speed=lambda: 1000.0)


def test_a_session_opens_at_its_end_and_plays_to_its_end(loop, tasks, replay, sweep):
    opened, banners = recorder(replay.opened), recorder(replay.banner)
    finished, moved = recorder(replay.finished), recorder(replay.moved)
    task = tasks.spawn(replay.open(sweep))
    run(loop, task.done, 30)
    assert opened == [(sweep,)] and replay.model.status is RunStatus.COMPLETE
    assert banners[-1][1] == "ok" and "(complete)" in banners[-1][0]
    assert replay.starts == [2.0, 8.0]  # each configuration's first measured send, warm-ups skipped
    replay.play()
    run(loop, lambda: finished, 30)
    assert finished == [("complete",)] and not replay.timer.isActive()
    assert moved and replay.playback.finished


def test_a_replay_seeks_and_steps_between_configurations(loop, tasks, replay, sweep):
    task = tasks.spawn(replay.open(sweep))
    run(loop, task.done, 30)
    first, second = replay.starts
    replay.seek(0.0)
    assert replay.model.requests == {}  # nothing sent at the very start
    replay.step_config(1)
    assert replay.playback.position_s == pytest.approx(first + PAST_START_S)
    assert {v.config_index for v in replay.model.requests.values()} == {0}
    replay.step_config(1)
    assert replay.playback.position_s == pytest.approx(second + PAST_START_S)
    replay.step_config(-1)  # just begun: back to the one before
    assert replay.playback.position_s == pytest.approx(first + PAST_START_S)


def test_a_run_holds_the_replay_and_a_bad_file_is_said(loop, tasks, replay, sweep, tmp_path):
    closed, banners = recorder(replay.closed), recorder(replay.banner)
    bad = tmp_path / "not.session.sqlite"
    bad.write_text("not a database")
    task = tasks.spawn(replay.open(bad))
    run(loop, task.done, 30)
    assert task.result() is False and banners[-1][1] == "error"
    replay.hold(True)
    assert closed == [()] and replay.playback is None
    task = tasks.spawn(replay.open(sweep))
    run(loop, task.done, 30)
    assert task.result() is False
    assert banners[-1] == ("Stop the run before opening a session.", "error")


# -- run --------------------------------------------------------------------------------------
def test_a_run_refused_before_it_starts_ends_as_every_run_ends(loop, tasks, renderer, tmp_path):
    """Nothing answers at the external address: the lifecycle refuses it in ``prepare``; the
    run still ends busy-then-free with a status, says why, and makes no output folder."""
    out = tmp_path / "out"
    runs = RunController(renderer.model, renderer, tasks, out)
    busy, finished, banners = (
        recorder(runs.busy_changed),
        recorder(runs.finished),
        recorder(runs.banner),
    )
    experiment = parse_experiment("[server]\nslots = 1\n[workload]\nrequests = 1\n")
    runs.start(experiment, f"http://127.0.0.1:{free_port()}", None)
    assert runs.running
    run(loop, lambda: finished, 60)
    assert busy == [(True,), (False,)] and finished == [("failed",)]
    assert "nothing answers at" in banners[-1][0] and banners[-1][1] == "error"
    assert not runs.running and not runs.pump.isActive() and not out.exists()


# -- library ----------------------------------------------------------------------------------
def test_the_library_lists_the_newest_scan_and_imports_what_it_can(loop, tasks, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    made = write_session(out / "made.session.sqlite")
    library = LibraryController(out, tasks)
    scans, failures = recorder(library.scanned), recorder(library.failed)
    library.refresh()
    library.refresh()  # overtakes the first: only its list arrives
    run(loop, lambda: not tasks, 30)
    assert len(scans) == 1
    assert made in [info.path for info in scans[0][0]]
    junk = tmp_path / "junk.json"
    junk.write_text("{}")
    vllm = next(Path("tests/data/imports/vllm").glob("*.json"))
    task = tasks.spawn(library.import_files([junk, vllm]))
    run(loop, task.done, 60)
    (imported,) = task.result()
    assert imported.parent == out and len(failures) == 1 and "junk.json" in failures[0][0]
    run(loop, lambda: len(scans) == 2, 30)  # importing scans again
    assert imported in [info.path for info in scans[1][0]]
    library.set_recorded(made)
    assert library.current_session_path() == made
    library.set_opened(imported)
    assert library.current_session_path() == imported  # the opened one, over the last run's


# -- analysis ---------------------------------------------------------------------------------
def test_the_slo_is_evaluated_on_the_session_shown_or_says_why_not(loop, tasks, sweep):
    analysis = AnalysisController(tasks)
    results, messages = recorder(analysis.slo_result), recorder(analysis.slo_message)
    slo = Slo(ttft_s=1.0)
    for path, limit in ((None, slo), (sweep, None)):
        task = tasks.spawn(analysis.evaluate_slo(path, limit))
        run(loop, task.done, 10)
    assert messages == [
        ("Run an experiment or open a session first.",),
        ("Set at least one SLO above zero.",),
    ]
    task = tasks.spawn(analysis.evaluate_slo(sweep, slo))
    run(loop, task.done, 30)
    ((goodput, summaries, given),) = results
    assert given is slo and [g.label for g in goodput] == ["np=1", "np=2"]
    # np=1 answers its three at TTFT 0.1, 1.3 and 2.5 s, np=2 at 0.1, 0.1 and 1.575 s.
    assert [(g.requests, g.good) for g in goodput] == [(3, 1), (3, 2)]
    assert [s.label for s in summaries] == ["np=1", "np=2"]


def test_a_later_session_supersedes_the_roofline_of_an_earlier_one(loop, tasks, sweep):
    analysis = AnalysisController(tasks)
    reports, failures = recorder(analysis.roofline), recorder(analysis.roofline_failed)
    analysis.show_roofline(sweep)
    analysis.show_roofline(None)  # the views moved on before it was worked out
    run(loop, lambda: not tasks, 60)
    assert reports == [(None,), (None,)] and failures == []


# -- the hand-started server ------------------------------------------------------------------
def test_a_server_whose_binary_is_missing_is_said_and_never_counted(loop, tasks, tmp_path):
    servers = ServerController(tasks, tmp_path, server_bin=str(tmp_path / "no-llama-server"))
    changed, banners = recorder(servers.changed), recorder(servers.banner)
    servers.start(ServerSettings())
    run(loop, lambda: banners, 30)
    assert banners[0][1] == "error" and "no-llama-server" in banners[0][0]
    assert changed == [] and servers.server is None


@pytest.mark.server
def test_a_server_started_by_hand_reports_its_states_and_stops(
    loop, tasks, tmp_path, server_binary, model_path
):
    servers = ServerController(tasks, tmp_path, server_bin=server_binary)
    changed, states, ready = (
        recorder(servers.changed),
        recorder(servers.state),
        recorder(servers.ready),
    )
    servers.start(ServerSettings(model=str(model_path), slots=1, ctx=2048))
    run(loop, lambda: ready, 120)
    ((base_url, facts, log_path),) = ready
    assert base_url.startswith("http://127.0.0.1:") and facts.n_slots == 1
    assert Path(log_path).parent == tmp_path / "logs"
    servers.stop()
    run(loop, lambda: changed[-1:] == [(False,)], 60)
    assert changed == [(True,), (False,)] and servers.server is None
    said = [state for state, _ in states]
    assert said[:2] == ["starting", "healthy"] and said[-2:] == ["stopping", "stopped"]
