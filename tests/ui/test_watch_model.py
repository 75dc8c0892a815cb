"""The watch window's model, without Qt: what the polls said, folded for a few frames a
second; the tasks as bars and their labels; the summary in the side table's rows."""

from __future__ import annotations

from dataclasses import replace

import pytest

from workbench.engine.base.server_kinds import LLAMACPP
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.unseen import TokenLedger
from workbench.engine.watch.watcher import Load, Watched
from workbench.ui import watch_model
from workbench.ui.watch_model import TaskBar, WatchModel, summary_rows


def slot(number: int, task: int | None, busy: bool, decoded: int = 0, prompt: int = 0) -> dict:
    return {
        "id": number,
        "id_task": task,
        "is_processing": busy,
        "n_decoded": decoded,
        "n_ctx": 1000,
        "n_prompt_tokens": prompt + decoded,
        "n_prompt_tokens_processed": prompt if decoded else 0,
        "n_prompt_tokens_cache": 0,
    }


def started(model: WatchModel) -> Watched:
    watched = Watched(0, kind=LLAMACPP)
    model.started(watched)
    return watched


def test_a_tasks_bar_is_its_prompt_then_its_decoding_labelled_as_room_allows():
    task = WatchedTask(1, 116, 0.3, 4.5, 4.4, 4.53, 1500, 1024, 19, decoded_all=True)
    bar = TaskBar.of(task)
    assert (bar.start, bar.decoding, bar.end) == (0.3, 4.4, 4.53)
    assert bar.labels() == (
        "task 116 · 1,500 in, 1,024 cached",
        "116 · 1,500 (1,024)",
        "116 · 1,500",
        "116",
    )
    assert TaskBar.of(replace(task, cached_tokens=0)).labels()[0] == "task 116 · 1,500 in"
    running = TaskBar.of(replace(task, gone_s=None, decoding_s=None, prompt_tokens=None))
    assert running.end == 4.5  # the last poll that saw it
    assert running.labels() == ("task 116 · prompt", "116")
    missed = TaskBar.of(WatchedTask(0, 125, 4.9, 4.9, gone_s=5.0, missed=True))
    assert (missed.start, missed.end, missed.missed) == (4.9, 5.0, True)


def test_the_polls_fold_into_the_slots_the_queue_and_token_rates_over_seconds():
    model = WatchModel()
    watched = started(model)
    for step in range(41):  # 4 s at 0.1 s: 100 prompt and 10 generated tokens a second
        t = step / 10
        slots = [slot(0, 7, True, decoded=step, prompt=300), slot(1, None, False)]
        watched.tasks.observe(t, slots)
        model.polled(t, slots, Load(t, 1.0, step % 3, 10.0 * step, 1.0 * step))
    assert model.changed and model.slot_count() == 2
    assert model.context() == {0: pytest.approx((300 + 40) / 1000), 1: 0.0}
    assert model.waiting[1][:4] == [0, 1, 2, 0]
    assert model.running[1] == [1.0, 1.0] and model.running[0] == [0.0, 4.0]  # two points
    assert model.prompt_rate[1] == pytest.approx([100.0] * len(model.prompt_rate[1]))
    assert model.output_rate[1] == pytest.approx([10.0] * len(model.output_rate[1]))
    # a point a second, each over the seconds before it (up to RATE_WINDOW_S) drawn at
    # their middle; a rate that holds is two points
    assert model.prompt_rate[0] == pytest.approx([0.5, 2.0])
    (bar,) = model.bars()
    assert bar.task == 7 and bar.end == 4.0


def test_a_long_watch_keeps_the_latest_points_only(monkeypatch):
    monkeypatch.setattr(watch_model, "MAX_POINTS", 10)
    model = WatchModel()
    started(model)
    for step in range(25):
        model.polled(step, None, Load(step, step % 2, 0.0, None, None))
    times, values = model.running
    assert len(times) <= 10 and times[-1] == 24 and values[-1] == 0


def test_a_server_down_mid_watch_is_one_line_until_it_answers_again():
    model = WatchModel()
    watched = started(model)
    watched.polls += 1
    model.polled(0.0, [slot(0, None, False)], Load(0.0, 0.0, 0.0, 0.0, 0.0))
    assert model.fault() == ""
    for t in (0.5, 1.0):  # as the engine counts a poll nothing answered
        watched.unanswered += 1
        watched.answered(t, False)
        model.polled(t, None, None)
    assert model.fault() == "0.5 s: the server is down (no answer); the watch goes on"
    assert model.gaps() == [(0.5, 1.0)]
    assert model.slots == [slot(0, None, False)]  # what it last said, kept
    watched.polls += 1
    watched.answered(1.5, True)
    model.polled(1.5, [slot(0, None, False)], Load(1.5, 0.0, 0.0, 0.0, 0.0))
    assert model.fault() == "1.5 s: the server answers again, after 1.0 s"
    assert ("polls", "2 answered, 2 not (down or slow)") in model.figures()


def test_the_summary_rows_fit_a_narrow_column_and_many_slots_share_one():
    watched = Watched(0, kind=LLAMACPP, seconds=10.0, polls=100, all_busy=40)
    watched.busy = {slot: 50 + slot for slot in range(8)}
    rows = dict(summary_rows(summarize(watched)))
    assert rows["slots busy"] == "50% to 57% of the polls each"
    assert rows["all 8 busy"] == "40% of the polls"
    watched.busy = {0: 90, 1: 10}
    rows = dict(summary_rows(summarize(watched)))
    assert rows["slot 0 busy"] == "90% of the polls" and "slots busy" not in rows


def test_the_tasks_no_poll_saw_are_a_row_live_and_in_the_summary():
    model = WatchModel()
    watched = started(model)
    assert "tasks unseen" not in dict(model.figures())  # nothing counted yet: no estimate
    watched.ledger = TokenLedger(4, 900.0, 500.0, tasks=10, missed_tokens=120.0, missed=3)
    model.polled(1.0, [slot(0, None, False)], None)
    said = "≈ 10 (estimated from the token counters)"  # 400 tokens at 40 a task
    assert dict(model.figures())["tasks unseen"] == said
    assert dict(summary_rows(summarize(watched)))["tasks unseen"] == said
