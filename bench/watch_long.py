"""Whether a long watch's memory stays flat: the polls of a busy 4-slot llama-server (every
slot working, a task ending every few seconds on each, a queue of 0 to 5 moving) fed
straight into the watch's engine (``Watched.count``, ``SlotTasks.observe``), as many as
``--hours`` of polls at ``--interval`` make, and kept in a watch file as ``workbench watch``
keeps one (``record.Recorder``), with the memory it holds (``tracemalloc``) and the file's
size printed after each hour. The polls are made here in llama-server's shape (b11434's
``/slots`` and ``/metrics`` fields), not fetched: this times and weighs the engine alone.

  .venv/bin/python bench/watch_long.py [--hours 8] [--interval 0.1]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from pathlib import Path

from workbench.engine.base.server_kinds import LLAMACPP
from workbench.engine.watch.record import SUFFIX, Recorder
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.watcher import Watched

SLOTS = 4
TASK_POLLS = 40  # a task lasts 4 s at 0.1 s: 10 polls on its prompt, 30 decoding


def slots_at(poll: int) -> list[dict]:
    """Every slot busy, each on its own task, staggered so they end at other polls."""
    found = []
    for slot in range(SLOTS):
        age = (poll + slot * 7) % TASK_POLLS
        task = (poll + slot * 7) // TASK_POLLS * SLOTS + slot
        decoded = max(0, age - 10)
        found.append(
            {
                "id": slot,
                "id_task": task,
                "is_processing": True,
                "n_ctx": 4096,
                "n_prompt_tokens": 512 + decoded,
                "n_prompt_tokens_processed": 512 if decoded else 256,
                "n_prompt_tokens_cache": 0,
                "n_decoded": decoded,
            }
        )
    return found


def metrics_at(poll: int) -> dict[str, float]:
    return {
        "llamacpp:requests_processing": float(SLOTS),
        "llamacpp:requests_deferred": float(poll // 50 % 6),
        "llamacpp:prompt_tokens_total": 512.0 * (poll // 10),
        "llamacpp:tokens_predicted_total": 3.0 * poll,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--interval", type=float, default=0.1)
    args = parser.parse_args()
    per_hour = round(3600 / args.interval)
    path = Path(tempfile.mkdtemp(prefix="watch-long-")) / f"long{SUFFIX}"
    tracemalloc.start()
    watched = Watched(kind=LLAMACPP)
    recorder = Recorder(path, "http://127.0.0.1:8080", args.interval)
    started = time.perf_counter()
    print("| hours of polls | polls | tasks ended | memory held MiB | file MB | seconds to feed |")
    print("|---|---|---|---|---|---|")
    for poll in range(round(args.hours * per_hour)):
        t_s = poll * args.interval
        slots = slots_at(poll)
        load = watched.count(t_s, slots, metrics_at(poll))
        for task in watched.tasks.observe(t_s, slots):
            recorder.task(task)
        if load is not None:
            recorder.load(load)
        if poll % 10 == 0:  # a save a second at 0.1 s, as the watch saves
            recorder.save(watched, now=True)
        if (poll + 1) % per_hour == 0:
            held, _ = tracemalloc.get_traced_memory()
            print(
                f"| {(poll + 1) / per_hour:g} | {watched.polls:,} | {watched.tasks.ended:,} | "
                f"{held / 2**20:.2f} | {path.stat().st_size / 1e6:.1f} | "
                f"{time.perf_counter() - started:.1f} |"
            )
    watched.seconds = args.hours * 3600
    recorder.close(watched)
    print("\n" + summarize(watched).verdict)


if __name__ == "__main__":
    main()
