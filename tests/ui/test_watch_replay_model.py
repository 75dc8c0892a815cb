"""A kept watch's replay model, without Qt: the watch as it was at a time (its tasks begun
by then, each drawn to then; its gauges held to then; the rates known by then), the
figures at that time, and what a file does not keep, said in a line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workbench.engine.base.server_kinds import LLAMACPP
from workbench.engine.watch.record import WatchFile
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.watcher import Gap, Load, Watched
from workbench.ui.watch_replay import WHOLE_WATCH, ReplayModel, clock


def model(tasks: list[WatchedTask], loads: list[Load], **watched: object) -> ReplayModel:
    kept = Watched(0, kind=LLAMACPP, seconds=10.0, polls=100, **watched)
    for load in loads:
        kept.count_load(load)
    file = WatchFile("http://127.0.0.1:1/<b>not html</b>", 0.1, "2026-12-07T14:00:00+0000", kept)
    return ReplayModel(Path("w.watch.sqlite"), file, tasks, loads)


TASKS = [
    WatchedTask(0, 1, 1.0, 2.9, 2.0, 3.0, 300, 100, 20, decoded_all=True),
    WatchedTask(1, 2, 4.0, 4.0, gone_s=4.1, missed=True),
    WatchedTask(0, 3, 5.0, 9.9),  # still on its prompt when the watch ended
]
LOADS = [Load(t, 1.0, w, 100.0 * t, 10.0 * t) for t, w in enumerate([0, 2, 2, 2, 0, 0, 0, 1, 1, 0])]


def figures_then(replay: ReplayModel) -> dict[str, str]:
    rows = replay.figures()
    return dict(rows[: rows.index((WHOLE_WATCH, ""))])


def test_it_opens_at_its_end_with_every_task_and_every_point():
    replay = model(TASKS, LOADS)
    assert replay.at_end and replay.end_s == 10.0 and replay.heading() == "summary"
    assert replay.task_count() == 3 and len(replay.bar_set()) == 3
    assert replay.waiting[1].tolist() == [0, 2, 2, 0, 0, 1, 1, 0]  # the live rule's points
    assert replay.waiting[0].tolist() == [0, 1, 3, 4, 6, 7, 8, 9]
    assert replay.slot_count() == 2 and replay.context() == {}


def test_a_time_shows_the_tasks_begun_by_then_each_drawn_to_then():
    replay = model(TASKS, LOADS)
    replay.seek(1.5)
    bars = replay.bar_set()
    assert len(bars) == 1 and bars.end.tolist() == [1.5] and np.isnan(bars.decoding[0])
    replay.seek(2.5)
    bars = replay.bar_set()
    assert bars.decoding.tolist() == [2.0] and bars.end.tolist() == [2.5]
    replay.seek(4.05)  # task 2 ran between the polls at 4.0 and 4.1: not known of yet
    assert replay.bar_set().missed.tolist() == [False] and len(replay.bars()) == 1
    assert figures_then(replay)["tasks"] == "0 running, 1 ended"
    replay.seek(4.1)  # the poll that found it gone: drawn from the poll before
    bars = replay.bar_set()
    assert bars.missed.tolist() == [False, True] and bars.start.tolist() == [1.0, 4.0]
    assert replay.bars()[1].task == 2
    assert figures_then(replay)["tasks"] == "0 running, 2 ended (1 between two polls)"
    replay.seek(99)
    assert replay.now == 10.0 and replay.at_end


def test_a_gauge_holds_to_the_time_shown_and_a_rate_shows_once_known():
    replay = model(TASKS, LOADS)
    replay.seek(2.5)
    assert replay.waiting[0].tolist() == [0, 1, 2.5] and replay.waiting[1].tolist() == [0, 2, 2]
    known = replay.prompt_rate[0].tolist()
    replay.seek(9.0)
    later = replay.prompt_rate[0].tolist()
    assert len(later) > len(known) and later[: len(known)] == known
    assert replay.prompt_rate[1].tolist() == pytest.approx([100.0] * len(later))
    # a rate is drawn at its window's middle: none drawn after the time it was known
    assert all(t <= 2.5 for t in known)


def test_the_figures_at_a_time_then_the_whole_watchs():
    replay = model(TASKS, LOADS, gaps=[Gap(6.0, 6.5)], gaps_count=1, down_s=0.5)
    replay.seek(2.5)
    assert replay.heading() == "at 0:02.5"
    now = figures_then(replay)
    assert now["watched"] == "0:02.5 of 0:10.0"
    assert now["tasks"] == "1 running, 0 ended"
    assert now["waiting then"] == "2" and now["running then"] == "1"
    assert now["queue so far"] == "max 2; in 67% of the polls"
    assert now["prompt tok/s"].endswith("100.0 so far")
    assert "server down" not in now
    replay.seek(6.2)
    now = figures_then(replay)
    assert now["tasks"] == "1 running, 2 ended (1 between two polls)"
    assert now["server down"] == "since 0:06.0, 0.2 s in all"
    assert replay.gaps() == [(6.0, pytest.approx(6.2))]
    replay.seek(8.0)
    assert figures_then(replay)["server down"] == "1 time so far, 0.5 s in all"


def test_what_a_file_does_not_keep_is_one_line():
    replay = model(TASKS, LOADS, memory_max_bytes=326 * 2**20)
    assert replay.unkept() == (
        "not kept in the file, so not drawn: each slot's context held, poll by poll; "
        "the server's memory over time (only its most: 326 MiB)"
    )
    assert replay.describe() == (
        "http://127.0.0.1:1/<b>not html</b>, from 2026-12-07 14:00, 0:10.0 watched"
    )
    assert replay.time_of_day(90.0) == "14:01:30"


def test_a_clock_reads_as_a_players():
    assert clock(4.62, tenths=True) == "0:04.6"
    # rounded to tenths before it is cut into minutes: never a 60th second
    assert clock(59.96, tenths=True) == "1:00.0" and clock(119.97, tenths=True) == "2:00.0"
    assert clock(59.94, tenths=True) == "0:59.9" and clock(60.04, tenths=True) == "1:00.0"
    assert clock(599.95, tenths=True) == "10:00.0" and clock(-0.2, tenths=True) == "0:00.0"
    assert clock(3599.97, tenths=True) == "1:00:00.0"  # hours as the whole seconds' are
    assert clock(59.96) == "0:59"  # whole seconds are cut, never rounded up to a 60th
    assert clock(75.0) == "1:15"
    assert clock(3 * 3600 + 62) == "3:01:02"
