"""A kept watch reopened in the watch window and played back: a watch of the mock server
under traffic, recorded for real and kept as ``workbench watch`` keeps it, shows a bar a
task and its queue as the live window did; the slider shows the watch as it was by then;
Play advances it; the SLOs the watch kept are judged and shown under the verdict; the main
window opens one from its Sessions tab and its Open dialog; a damaged or newer file is one
line, and a first-version file still replays."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent

from tests.ui.driving import click_until, run
from tests.ui.kept_watches import as_first_version, given_slos, made_long_watch, record_watch
from workbench.engine.watch import record
from workbench.engine.watch.slo_judged import MET, MISSED, NOT_JUDGED, judge_kept
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.summary import summarize
from workbench.ui import main_window
from workbench.ui.views.watch_plots import TimeAxis
from workbench.ui.watch_model import TaskBar, summary_rows
from workbench.ui.watch_replay import WHOLE_WATCH, ReplayModel
from workbench.ui.watch_replay_bar import PAUSE, PLAY, SLIDER_STEPS
from workbench.ui.watch_window import NO_SLOTS, WatchWindow, slo_cells

MOCK = ("--ttft-ms", "100", "--itl-ms", "20", "--tokens", "40", "--slots", "2")


@pytest.fixture(scope="module")
def kept(tmp_path_factory) -> Path:
    """Three rounds of three requests at once on the mock's two slots, watched and kept."""
    return record_watch(tmp_path_factory.mktemp("kept"), *MOCK, at_once=3, rounds=3)


@pytest.fixture(scope="module")
def kept_vllm(tmp_path_factory) -> Path:
    """Two rounds of three requests at once on the mock in vLLM's metrics, kept."""
    mock = ("--ttft-ms", "100", "--itl-ms", "20", "--tokens", "20", "--metrics", "vllm")
    return record_watch(tmp_path_factory.mktemp("vllm"), *mock, at_once=3, rounds=2)


def every_task(path: Path) -> list[WatchedTask]:
    return [*record.tasks(path), *record.read(path).watched.tasks.in_flight]


def known_by(task: WatchedTask | TaskBar, t: float) -> bool:
    """Whether the live window knew of a task by ``t``: from the poll that first saw it, or
    one that ran between two polls from the later, which found it gone."""
    if isinstance(task, TaskBar):
        return task.start <= t and (not task.missed or task.end <= t)
    return task.seen_s <= t and (not task.missed or (task.gone_s or 0.0) <= t)


def replaying(qtbot, loop, path: Path) -> WatchWindow:
    window = WatchWindow.replaying(path)
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    window.start()
    run(loop, lambda: window.over, 60)  # read, or refused
    run(loop, lambda: not window.model.changed, 5)  # and drawn
    return window


def drawn(window: WatchWindow, part: str) -> tuple[np.ndarray, np.ndarray]:
    """The left and right ends of the bars one of the Gantt's colours draws."""
    opts = window.gantt.items[part].opts
    x0 = np.asarray(opts["x0"], float)
    return x0, x0 + np.asarray(opts["width"], float)


def figures_then(window: WatchWindow) -> dict[str, str]:
    """The figures at the time shown (above the whole watch's)."""
    rows = window.model.figures()
    return dict(rows[: rows.index((WHOLE_WATCH, ""))])


def compressed(loads: list[record.Load]) -> tuple[list[float], list[float]]:
    """The queue's points as the live window keeps them: a third equal value moves the
    second's time."""
    times: list[float] = []
    values: list[float] = []
    for load in loads:
        if load.waiting is None:
            continue
        if len(values) >= 2 and values[-1] == load.waiting == values[-2]:
            times[-1] = load.t_s
        else:
            times.append(load.t_s)
            values.append(load.waiting)
    return times, values


def test_a_kept_watch_reopens_as_the_live_window_showed_it(qtbot, loop, kept):
    tasks, loads = every_task(kept), list(record.loads(kept))
    summary = summarize(record.read(kept).watched)
    window = replaying(qtbot, loop, kept)
    model = window.model
    assert isinstance(model, ReplayModel) and model.at_end
    assert len(tasks) >= 6 and window.gantt.bar_count() == len(tasks)  # a bar a task
    assert len(drawn(window, "prompt")[0]) == sum(not t.missed for t in tasks)
    assert any(text.startswith("task ") for text in window.gantt.label_texts())
    x, y = window.plots.waiting.getData()
    assert (list(x), list(y)) == compressed(loads)  # the waiting curve: every poll's
    assert window.line.text() == f"verdict: {summary.verdict}"
    assert window.figures.horizontalHeaderItem(1).text() == "summary"
    assert model.figures() == summary_rows(summary)
    assert window.status.text().startswith(f"replaying {record.read(kept).url}, from ")
    assert window.unkept.text().startswith("not kept in the file, so not drawn: each slot's")
    assert "\n" not in window.unkept.text() and window.unkept.isVisible()
    assert window.context.isHidden() and window.stop_button.isHidden()
    assert window.replay_bar.isEnabled() and window.replay_bar.slider.value() == SLIDER_STEPS
    assert window.replay_bar.clock.text().startswith(f"{model.clock(model.end_s)} / ")
    assert window.windowTitle().startswith(f"Replaying {kept.name}")
    assert window.slos.isHidden()  # the watch was given none
    window.close()


def test_the_slos_the_watch_kept_are_judged_and_shown_under_the_verdict(
    qtbot, loop, kept, tmp_path
):
    path = given_slos(
        kept, tmp_path / "slos.watch.sqlite", "tpot_p50:1000", "itl_p90:100", "ttft_p50:1"
    )
    window = replaying(qtbot, loop, path)
    run(loop, lambda: window.slos.rows, 30)  # judged off the GUI thread, after the opening
    judged = judge_kept(path, record.read(path).slos)  # as `workbench show` judges them
    assert [j.outcome for j in judged] == [MET, NOT_JUDGED, MISSED]
    assert [tuple(label.text() for label in row) for row in window.slos.rows] == [
        slo_cells(j) for j in judged
    ]
    assert window.slos.isVisible() and window.slos.title.text().startswith("SLOs on the watch")
    layout = window.layout()
    assert layout.indexOf(window.slos) == layout.indexOf(window.line) + 1
    assert window.line.text().startswith("verdict: ")
    window.close()


def test_the_slider_in_the_middle_shows_only_the_tasks_seen_by_then(qtbot, loop, kept):
    tasks = every_task(kept)
    window = replaying(qtbot, loop, kept)
    window.replay_bar.slider.setValue(SLIDER_STEPS // 2)
    run(loop, lambda: not window.model.changed, 5)
    t = window.model.now
    assert t == pytest.approx(window.model.end_s / 2, abs=0.01)
    seen = sum(known_by(task, t) for task in tasks)
    assert 0 < seen < len(tasks) and window.gantt.bar_count() == seen
    for part in ("prompt", "decoding", "missed"):
        assert all(drawn(window, part)[1] <= t + 1e-9)  # nothing after the time shown
    decoding_by_then = sum(
        not task.missed and task.decoding_s is not None and task.decoding_s <= t for task in tasks
    )
    assert len(drawn(window, "decoding")[0]) == decoding_by_then
    x, _ = window.plots.waiting.getData()
    assert len(x) and max(x) <= t
    assert window.figures.horizontalHeaderItem(1).text() == f"at {window.model.clock(t)}"
    rows = window.model.figures()
    ended = sum(task.gone_s is not None and task.gone_s <= t for task in tasks)
    assert figures_then(window)["tasks"].startswith(f"{seen - ended} running, {ended} ended")
    heading = rows.index((WHOLE_WATCH, ""))  # then the whole watch's summary, under it
    assert rows[heading + 1 :] == summary_rows(window.model.whole)
    assert window.figures.columnSpan(heading, 0) == 2
    assert window.figures.item(heading, 0).font().bold()
    assert window.gantt.cursor.isVisible() and window.gantt.cursor.value() == t
    window.close()


def test_play_advances_the_watch_and_stops_at_its_end(qtbot, loop, kept):
    window = replaying(qtbot, loop, kept)
    bar, model = window.replay_bar, window.model
    bar.slider.setValue(0)
    assert model.now == 0.0
    times: list[float] = []
    window.replay.moved.connect(times.append)
    click_until(loop, bar.play, lambda: len(times) >= 3, 10)  # 1x: a frame each 250 ms
    assert bar.play.text() == PAUSE and times == sorted(times) and times[-1] > 0
    assert bar.slider.value() > 0
    bar.set_speed(60)  # the rest at 60x: its end within a frame or two
    run(loop, lambda: not window.replay.is_playing, 10)
    assert model.at_end and bar.play.text() == PLAY
    assert window.gantt.bar_count() == len(every_task(kept))
    run(loop, lambda: not model.changed, 5)
    assert window.figures.horizontalHeaderItem(1).text() == "summary"
    bar.set_speed(1)
    click_until(loop, bar.play, lambda: window.replay.is_playing, 10)  # at the end: again
    assert model.now < model.end_s / 2
    click_until(loop, bar.play, lambda: not window.replay.is_playing, 10)
    assert bar.play.text() == PLAY
    window.close()


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        ("junk", "not a watch file (file is not a database)"),
        ("newer", "a watch file of version 99, newer than this workbench's"),
    ],
)
def test_a_damaged_or_newer_file_is_one_line(qtbot, loop, kept, tmp_path, damage, said):
    path = tmp_path / "bad.watch.sqlite"
    if damage == "junk":
        path.write_bytes(b"not a watch " * 100)
    else:
        shutil.copy(kept, path)
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA user_version = 99")
    window = replaying(qtbot, loop, path)
    assert said in window.line.text() and "\n" not in window.line.text()
    assert window.line.text().startswith("bad.watch.sqlite: ")
    assert not isinstance(window.model, ReplayModel) and not window.replay_bar.isEnabled()
    assert window.status.text() == f"not replaying {path}"
    window.close()


def test_a_first_version_file_replays_without_kv_cache_use(qtbot, loop, kept, tmp_path):
    old = as_first_version(kept, tmp_path / "old.watch.sqlite")
    window = replaying(qtbot, loop, old)
    assert isinstance(window.model, ReplayModel)
    assert window.gantt.bar_count() == len(every_task(kept))
    assert window.plots.kv.isHidden()
    window.close()


def test_a_vllm_watch_replays_its_queue_and_kv_cache_without_slots(qtbot, loop, kept_vllm):
    window = replaying(qtbot, loop, kept_vllm)
    assert window.slots_row.isHidden() and NO_SLOTS in window.status.text()
    kv_times, _ = window.plots.kv_curve.getData()
    assert window.plots.kv.isVisible() and kv_times is not None and len(kv_times) >= 2
    _, running = window.plots.running.getData()
    assert max(running) == 3
    assert "latency percentiles minute by minute" in window.unkept.text()
    window.close()


def test_a_watch_of_an_hour_draws_what_its_view_holds(qtbot, loop, tmp_path):
    path = made_long_watch(tmp_path, hours=1.0)
    window = replaying(qtbot, loop, path)
    model = window.model
    assert model.task_count() == 1799 * 4 and window.gantt.bar_count() == model.task_count()
    window.replay_bar.slider.setValue(SLIDER_STEPS // 2)
    run(loop, lambda: not model.changed, 5)
    assert window.gantt.bar_count() == sum(known_by(b, model.now) for b in model._all.bars)
    x0, x1 = window.gantt.getPlotItem().vb.viewRange()[0]
    assert x1 - x0 == pytest.approx(120.0)  # two minutes about the time shown
    starts, _ = drawn(window, "prompt")
    assert 0 < len(starts) < 300  # only the bars in view: not the hour's 3,600 up to then
    assert figures_then(window)["server down"] == "since 30:00, 0.0 s in all"
    window.close()


def test_the_main_window_replays_a_kept_watch_from_its_sessions_tab_dialog_and_a_drop(
    window, loop, kept, monkeypatch
):
    window.out_dir.mkdir(parents=True, exist_ok=True)
    copy = window.out_dir / kept.name
    shutil.copy(kept, copy)
    panel = window.library
    window.left.setCurrentWidget(panel)
    run(loop, lambda: any(w.path == copy for w in panel.watches), 30)
    assert panel.watches_box.isVisible()
    row = next(i for i, w in enumerate(panel.watches) if w.path == copy)
    assert panel.watch_table.item(row, 3).text() == record.read(kept).url
    panel.watch_table.selectRow(row)
    replays = window.watch_windows
    click_until(
        loop, panel.replay_watch, lambda: replays and isinstance(replays[0].model, ReplayModel), 30
    )
    (replay,) = window.watch_windows
    assert replay.kept_path == copy
    replay.close()
    run(loop, lambda: not window.watch_windows, 10)
    monkeypatch.setattr(main_window.QFileDialog, "getOpenFileName", lambda *args: (str(copy), ""))
    window.open_session_dialog()
    run(loop, lambda: replays and isinstance(replays[0].model, ReplayModel), 30)
    assert window.replay.playback is None  # a watch, not a session
    window.watch_windows[0].close()
    run(loop, lambda: not window.watch_windows, 10)
    dropped = QMimeData()
    dropped.setUrls([QUrl.fromLocalFile(str(copy))])
    window.dropEvent(
        QDropEvent(
            QPointF(10, 10),
            Qt.DropAction.CopyAction,
            dropped,
            Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier,
        )
    )
    run(loop, lambda: replays and isinstance(replays[0].model, ReplayModel), 30)
    assert window.replay.playback is None
    window.watch_windows[0].close()


class _Shown:
    """A plot's stand-in for ``TimeAxis``: the ranges it was set to."""

    def __init__(self) -> None:
        self.ranges: list[tuple[float, float]] = []

    def getPlotItem(self):
        return self

    def setXRange(self, x0: float, x1: float, padding: float) -> None:
        self.ranges.append((x0, x1))


def test_a_replays_time_axis_holds_still_until_the_time_nears_its_edge():
    """The span is compared as it was asked for: 136.3 - 16.3 is 120.00000000000001, which
    once re-centred the axis every frame at such a place."""
    axis, top = TimeAxis(), _Shown()
    axis.replay(top, 100.3, 2000.0, 120.0, whole=False)
    assert top.ranges == [(pytest.approx(16.3), pytest.approx(136.3))]
    for now in (100.4, 110.0, 130.0):
        axis.replay(top, now, 2000.0, 120.0, whole=False)
    assert len(top.ranges) == 1  # held still, the time moving within it
    axis.replay(top, 131.0, 2000.0, 120.0, whole=False)  # past 95 % of it: moved on
    assert len(top.ranges) == 2 and top.ranges[-1][0] == pytest.approx(131.0 - 84.0)
    axis.replay(top, 131.0, 2000.0, 240.0, whole=False)  # faster: a longer span
    assert top.ranges[-1] == (pytest.approx(0.0), pytest.approx(240.0))
