"""A kept watch written out: its tasks as CSV (a row each), and as a Chrome/Perfetto trace
with one track per slot (each task its prompt, then its decoding, as the polls saw them), a
track for the server where it did not answer, and the queue and the requests running as
counters, for ui.perfetto.dev."""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterator
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from workbench.engine.analysis.perfetto import EXTENSION, write_events
from workbench.engine.base.errors import OutputDirError
from workbench.engine.watch.record import SUFFIX, WatchFile, loads, read
from workbench.engine.watch.record import tasks as tasks_of
from workbench.engine.watch.slot_tasks import WatchedTask

TASK_COLUMNS = tuple(f.name for f in fields(WatchedTask))
US = 1_000_000


def write_tasks_csv(path: Path, source: Path) -> int:
    """Every task the kept watch at ``source`` holds (those ended, then those in flight when
    it was last saved), a row each; returns how many."""
    in_flight = read(source).watched.tasks.in_flight
    count = 0
    try:
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, TASK_COLUMNS)
            writer.writeheader()
            for task in itertools.chain(tasks_of(source), in_flight):
                writer.writerow(asdict(task))
                count += 1
    except OSError as exc:
        raise OutputDirError(f"cannot write {path}: {exc.strerror or exc}") from None
    return count


def _us(seconds: float) -> int:
    return round(seconds * US)


def trace_events(kept: WatchFile, source: Path) -> Iterator[dict[str, Any]]:
    """One process for the watch, a thread for each slot, a slice for each task's prompt
    and one for its decoding; the load polls as counters."""
    pid = 1
    yield {"ph": "M", "pid": pid, "tid": 0, "ts": 0, "name": "process_name",
           "args": {"name": f"watch of {kept.url}"}}  # fmt: skip
    tasks = [*tasks_of(source), *kept.watched.tasks.in_flight]
    for slot in sorted({t.slot for t in tasks}):
        yield {"ph": "M", "pid": pid, "tid": slot + 1, "ts": 0, "name": "thread_name",
               "args": {"name": f"slot {slot}"}}  # fmt: skip
    for task in tasks:
        yield from _task_events(pid, task)
    if kept.watched.gaps:
        yield {"ph": "M", "pid": pid, "tid": 0, "ts": 0, "name": "thread_name",
               "args": {"name": "server"}}  # fmt: skip
    for gap in kept.watched.gaps:
        end = kept.watched.seconds if gap.up_s is None else gap.up_s
        yield _slice(pid, -1, "server down", gap.down_s, end, {"answered_again": gap.up_s})
    for load in loads(source):
        values = {
            k: v for k, v in (("running", load.running), ("waiting", load.waiting)) if v is not None
        }
        if values:
            yield {
                "ph": "C",
                "name": "requests",
                "pid": pid,
                "tid": 0,
                "ts": _us(load.t_s),
                "args": values,
            }


def _task_events(pid: int, task: WatchedTask) -> Iterator[dict[str, Any]]:
    args = {
        "task": task.task,
        "prompt_tokens": task.prompt_tokens,
        "cached_tokens": task.cached_tokens,
        "decoded": task.decoded,
    }
    if task.missed:
        args = {"task": task.task, "sequence_tokens": task.sequence_tokens}
        yield _slice(
            pid, task.slot, "between two polls", task.seen_s, task.gone_s or task.seen_s, args
        )
        return
    end = task.gone_s if task.gone_s is not None else task.last_s
    decoding = task.decoding_s if task.decoding_s is not None else end
    yield _slice(pid, task.slot, "prompt", task.seen_s, decoding, args)
    if decoding < end:
        yield _slice(pid, task.slot, "decode", decoding, end, args)


def _slice(pid: int, slot: int, name: str, start_s: float, end_s: float, args: dict) -> dict:
    return {"ph": "X", "name": name, "cat": "task", "pid": pid, "tid": slot + 1,
            "ts": _us(start_s), "dur": max(0, _us(end_s) - _us(start_s)), "args": args}  # fmt: skip


def write_trace(source: Path, folder: Path) -> tuple[Path, int]:
    """The kept watch at ``source`` as a trace in ``folder``: its path and event count."""
    kept = read(source)
    path = folder / (source.name.removesuffix(SUFFIX) + EXTENSION)
    other = {"url": kept.url, "started": kept.started, "interval_s": kept.interval_s}
    return path, write_events(path, trace_events(kept, source), other)
