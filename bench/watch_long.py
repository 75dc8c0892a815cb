"""Whether a long watch's memory stays flat: the polls of a busy 4-slot llama-server (every
slot working, a task ending every few seconds on each, a queue of 0 to 5 moving) fed
straight into the watch's engine (``Watched.count``, ``SlotTasks.observe``), as many as
``--hours`` of polls at ``--interval`` make, and kept in a watch file as ``workbench watch``
keeps one (``record.Recorder``), with the memory it holds (``tracemalloc``) and the file's
size printed after each hour. The polls are made here in llama-server's shape (b11434's
``/slots`` and ``/metrics`` fields), not fetched: this times and weighs the engine alone.

``--mock MINUTES`` watches the mock server instead (4 slots answering ``/slots`` as
llama-server does, and its queue, ``--queue``: another process's 9 users, each pausing
between its requests, keep the slots busy and a queue of 0 to 5 moving), through the whole
watch (``watch()``, its HTTP polls, the recorder) for that long, and prints the memory held
and the file's size each minute, what the file grows by in an hour of it, the queue the
watch saw and its Little's-law wait against the true mean wait the mock logged.

  .venv/bin/python bench/watch_long.py [--hours 8] [--interval 0.1]
  .venv/bin/python bench/watch_long.py --mock 10 [--interval 0.1]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import random
import statistics
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

from workbench.engine.base.server_kinds import LLAMACPP
from workbench.engine.watch.record import SUFFIX, Recorder
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.watcher import Watched, watch
from workbench.mock_server.process import MockProcess

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


USERS = 9  # the mock's 4 slots, and a queue of up to 5
PAUSE_S = 1.5  # the most a user pauses between requests: a request lasts 0.49 s, so the 9
# ask for about 7 a second where 4 slots serve 8, and the queue comes and goes


def _traffic(url: str) -> None:
    """``USERS`` users, each sending a request, then pausing up to ``PAUSE_S``, until killed;
    each prompt its own, so that the mock's log keeps every request."""
    import httpx

    def sender(user: int) -> None:
        pauses = random.Random(user)
        with httpx.Client(base_url=url, timeout=60) as client:
            for n in itertools.count():
                body = {"prompt": f"{user} {n} " + "x" * 2000, "max_tokens": 30, "stream": True}
                try:
                    client.post("/v1/completions", json=body)
                except httpx.HTTPError:  # a dropped stream: the next request goes on
                    time.sleep(0.1)
                time.sleep(pauses.uniform(0, PAUSE_S))

    threads = [threading.Thread(target=sender, args=(user,), daemon=True) for user in range(USERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def watch_mock(minutes: float, interval_s: float) -> None:
    """The whole watch of a busy mock for ``minutes``: memory and file size each minute."""
    mock = MockProcess(
        "--ttft-ms", "200", "--itl-ms", "10", "--tokens", "30", "--slots", str(SLOTS), "--queue"
    )
    sending = multiprocessing.get_context("spawn").Process(target=_traffic, args=(mock.url,))
    sending.start()
    path = Path(tempfile.mkdtemp(prefix="watch-mock-")) / f"mock{SUFFIX}"
    recorder = Recorder(path, mock.url, interval_s)
    tracemalloc.start()
    print("| minutes | polls | tasks ended | memory held MiB | file MB |")
    print("|---|---|---|---|---|")
    minute = [1]

    def on_poll(t_s: float, slots: object, load: object) -> None:
        if t_s >= 60 * minute[0]:
            held, _ = tracemalloc.get_traced_memory()
            w = recorder_watched[0]
            print(
                f"| {minute[0]} | {w.polls:,} | {w.tasks.ended:,} | {held / 2**20:.2f} | "
                f"{path.stat().st_size / 1e6:.2f} |",
                flush=True,
            )
            minute[0] += 1

    recorder_watched: list[Watched] = []
    started_ns = time.perf_counter_ns()  # the mock logs on this clock too
    try:
        watched = asyncio.run(
            watch(
                mock.url,
                interval_s,
                minutes * 60,
                on_poll=on_poll,
                on_start=recorder_watched.append,
                keeper=recorder,
            )
        )
        ended_ns = time.perf_counter_ns()
        waits = [  # of the requests that took a slot while the watch looked
            (s["t_slot_ns"] - s["t_received_ns"]) / 1e9
            for s in mock.served().values()
            if s["t_slot_ns"] is not None and started_ns <= s["t_slot_ns"] <= ended_ns
        ]
    finally:
        sending.kill()
        mock.stop()
    recorder.close(watched)
    size = path.stat().st_size
    print(
        f"\n{watched.polls:,} polls ({watched.unanswered} unanswered), {watched.tasks.ended:,} "
        f"tasks ended in {watched.seconds / 60:.1f} min: {size / 1e6:.2f} MB, "
        f"{size / watched.seconds * 3600 / 1e6:.1f} MB an hour of this"
    )
    summary = summarize(watched)
    print(
        f"queue: p50 {summary.queue_p50:.0f}, p90 {summary.queue_p90:.0f}, max "
        f"{summary.queue_max:.0f}, a queue in {summary.queued_share:.0%} of the polls; wait "
        f"{summary.wait_estimate_s:.3f} s a request by Little's law, "
        f"{statistics.fmean(waits):.3f} s by the mock's log ({len(waits):,} requests)"
    )
    print(summary.verdict)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=8.0)
    parser.add_argument("--interval", type=float, default=0.1)
    parser.add_argument("--mock", type=float, metavar="MINUTES", help="watch the mock instead")
    args = parser.parse_args()
    if args.mock:
        watch_mock(args.mock, args.interval)
        return
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
