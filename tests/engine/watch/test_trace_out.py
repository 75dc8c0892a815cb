"""A kept watch's requests as a trace: arrivals from the queue's rises, prefix sharing from
the slot's cache."""

from __future__ import annotations

from dataclasses import replace

from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.trace_out import arrivals, rows
from workbench.engine.watch.watcher import Load


def task(slot: int, number: int, seen_s: float, prompt: int = 600, cached: int = 0) -> WatchedTask:
    return WatchedTask(
        slot, number, seen_s, seen_s + 1, seen_s + 0.5, seen_s + 1, prompt, cached, 8
    )


def load(t_s: float, waiting: float) -> Load:
    return Load(t_s, 2.0, waiting, None, None)


def test_a_task_that_met_a_queue_arrived_when_the_queue_rose():
    """Two slots busy from 0 s; two more requests seen waiting at 0.5 s take the slots at 2
    and 3 s: they arrived at 0.5 s, not when they began. One that began with no queue
    arrived when it began."""
    tasks = [task(0, 1, 0.0), task(1, 2, 0.0), task(0, 3, 2.0), task(1, 4, 3.0), task(0, 5, 5.0)]
    polls = [load(0.1, 0), load(0.5, 2), load(2.1, 1), load(3.1, 0), load(4.0, 0)]
    assert arrivals(tasks, polls) == {0: 0.0, 1: 0.0, 2: 0.5, 3: 0.5, 4: 5.0}
    # without /metrics, every task arrived when it began
    assert arrivals(tasks, []) == {k: t.seen_s for k, t in enumerate(tasks)}


def test_a_prompt_found_in_its_slots_cache_shares_that_tasks_first_blocks():
    tasks = [task(0, 1, 0.0, prompt=1200), task(0, 2, 2.0, prompt=1100, cached=1024)]
    first, second = rows(tasks, [])
    assert first == {
        "timestamp": 0.0,
        "input_length": 1200,
        "output_length": 8,
        "hash_ids": [0, 1, 2],
    }
    assert second["hash_ids"][:2] == [0, 1] and second["hash_ids"][2] == 3
    assert second["timestamp"] == 2000.0


def test_an_answer_not_seen_to_its_end_is_as_long_as_the_median_seen_whole():
    seen_whole = [replace(task(0, k, 2.0 * k), decoded=n, decoded_all=True) for k, n in
                  enumerate((20, 30, 40))]  # fmt: skip
    cut = replace(task(1, 9, 1.0), decoded=3, decoded_all=False)  # its slot went on
    longer = replace(task(1, 10, 3.0), decoded=90, decoded_all=False)
    found = {r["timestamp"]: r["output_length"] for r in rows([*seen_whole, cut, longer], [])}
    assert found == {0.0: 20, 1000.0: 30, 2000.0: 30, 3000.0: 90, 4000.0: 40}
