"""A kept watch as a Mooncake trace (``arrival = "trace"``, ``predict``, ``tune --trace``): a
row per task, its prompt and answer lengths as the polls saw them (an answer not seen to its
end: the median of those that were), and its arrival.

A task's arrival is not when a slot took it: that would erase the queue it met. Where
``/metrics`` gave the queue's depth, each rise of the depth is that many arrivals at that
poll, and the tasks that began while a queue stood (at the poll before the one that showed
them) take them first come first served; a task that began with no queue arrived when it
began. Both are estimates (the queue is seen
a step late and a poll apart), and the rows say nothing of it: the export says so.

Prefix sharing: llama-server reuses a prompt's start from the cache its slot kept of the
task before (``n_prompt_tokens_cache``), so a task's cached blocks are written with the ids
of that slot's previous task's first blocks."""

from __future__ import annotations

import json
import math
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

from workbench.engine.base.errors import OutputDirError
from workbench.engine.watch.record import loads
from workbench.engine.watch.record import tasks as tasks_of
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.watcher import Load

BLOCK = 512  # tokens a hash id stands for: the trace workload's default ``block_size``


def arrivals(tasks: list[WatchedTask], polls: Iterable[Load]) -> dict[int, float]:
    """Each task's estimated arrival (seconds of the watch), by its index in ``tasks``."""
    rises: deque[float] = deque()
    depth = 0.0
    events = sorted((t.seen_s, k) for k, t in enumerate(tasks))
    found: dict[int, float] = {}
    polls = iter(polls)
    load = next(polls, None)
    for seen_s, k in events:
        # only what the queue held before the poll that first showed the task: one that
        # began at the poll the queue rose is not one of those it counts
        while load is not None and load.t_s < seen_s:
            waiting = load.waiting or 0.0
            rises.extend([load.t_s] * max(0, round(waiting - depth)))
            depth = waiting
            load = next(polls, None)
        found[k] = rises.popleft() if depth > 0 and rises else seen_s
        depth = max(0.0, depth - 1) if found[k] != seen_s else depth
    return found


def rows(tasks: list[WatchedTask], polls: Iterable[Load]) -> Iterator[dict]:
    """The trace's rows, by estimated arrival (ms after the first). An answer whose end
    the polls did not see (its slot went straight on to the next task) is as long as the
    median answer seen whole, where that is more than was seen of it."""
    came = arrivals(tasks, polls)
    first = min(came.values(), default=0.0)
    whole = sorted(t.decoded for t in tasks if t.decoded_all)
    usual = whole[len(whole) // 2] if whole else 1  # an answer never seen whole
    blocks: dict[int, list[int]] = {}  # each slot's last task's block ids
    made = 0
    found = []
    for k, task in sorted(enumerate(tasks), key=lambda kt: kt[1].seen_s):
        prompt = task.prompt_tokens or task.sequence_tokens or 0
        cached = min(task.cached_tokens or 0, prompt)
        kept = blocks.get(task.slot, [])[: cached // BLOCK]
        fresh = math.ceil(prompt / BLOCK) - len(kept)
        ids = kept + list(range(made, made + max(0, fresh)))
        made += max(0, fresh)
        blocks[task.slot] = ids
        row = {
            "timestamp": round((came[k] - first) * 1000, 1),
            "input_length": prompt,
            "output_length": max(1, task.decoded, 0 if task.decoded_all else usual),
            "hash_ids": ids,
        }
        if prompt:  # a task between two polls: its prompt and answer as its prompt
            found.append(row)
    yield from sorted(found, key=lambda r: r["timestamp"])


def write_trace(source: Path, path: Path) -> int:
    """The kept watch at ``source`` as a trace at ``path``; returns its rows."""
    ended = list(tasks_of(source))
    count = 0
    try:
        with path.open("w", encoding="utf-8") as out:
            for row in rows(ended, loads(source)):
                out.write(json.dumps(row) + "\n")
                count += 1
    except OSError as exc:
        raise OutputDirError(f"cannot write {path}: {exc.strerror or exc}") from None
    return count
