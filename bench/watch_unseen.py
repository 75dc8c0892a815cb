"""How many of the tasks no poll saw the token counters find again: a real llama-server
(2 slots) gets a known number of requests from a few users while a watch polls it, once at
each ``--intervals`` value and for each workload, ``--repeats`` times (other lengths each
time).

Printed for each run: the requests sent, the tasks the polls saw end (those that ran
between two polls included), the estimate of those no poll saw, and the count's error with
and without it; then, for each workload and interval, the mean error of each and their
ratio. Workloads: ``short`` (3 to 60 words in, 2 to 40 tokens out, up to 0.3 s between a
user's requests) and ``tiny`` (3 to 10 words, 1 to 4 tokens, no pause: far shorter than
an interval, the worst case).

  .venv/bin/python bench/watch_unseen.py [--intervals 0.1,0.25,0.5,1] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.models.model_file import default_model_path
from workbench.engine.server.discovery import find_server_binary
from workbench.engine.server.llama_server import LlamaServer
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.watcher import watch


@dataclass(frozen=True)
class Workload:
    words: tuple[int, int]
    tokens: tuple[int, int]
    pause_s: float


WORKLOADS = {
    "short": Workload((3, 60), (2, 40), 0.3),
    "tiny": Workload((3, 10), (1, 4), 0.0),
}
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon")


async def send(url: str, load: Workload, users: int, each: int, seed: int) -> int:
    """``users`` users of ``each`` requests; returns how many were answered."""
    answered = 0

    async def user(number: int) -> None:
        nonlocal answered
        chosen = random.Random(seed * 1000 + number)
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            for request in range(each):
                words = " ".join(chosen.choice(WORDS) for _ in range(chosen.randint(*load.words)))
                body = {
                    "prompt": f"{number} {request} {words}",
                    "n_predict": chosen.randint(*load.tokens),
                    "ignore_eos": True,
                }
                (await client.post("/completion", json=body)).raise_for_status()
                answered += 1
                await asyncio.sleep(chosen.random() * load.pause_s)

    await asyncio.gather(*(user(n) for n in range(users)))
    return answered


async def one(url: str, interval_s: float, load: Workload, args, seed: int) -> tuple:
    stop = asyncio.Event()
    watching = asyncio.create_task(watch(url, interval_s, None, stop=stop))
    await asyncio.sleep(interval_s + 0.2)
    sent = await send(url, load, args.users, args.requests, seed)
    await asyncio.sleep(2 * interval_s + 0.3)
    stop.set()
    s = summarize(await watching)
    estimated = s.unseen.tasks if s.unseen else 0.0
    return sent, s.tasks_ended, estimated, s.unseen.sized_by if s.unseen else "-"


async def main(args: argparse.Namespace) -> None:
    settings = replace(ServerSettings(), slots=2, ctx=4096)
    with tempfile.TemporaryDirectory() as folder:
        log = Path(args.log) if args.log else Path(folder) / "server.log"
        server = LlamaServer(find_server_binary().path, default_model_path(), settings, log)
        await server.start()
        try:
            print("workload interval  sent  seen  +unseen  error without  with   sized by")
            errors: dict[tuple[str, float], list[tuple[int, float]]] = {}
            for name in args.workloads:
                load = WORKLOADS[name]
                for interval_s in args.intervals:
                    for seed in range(args.repeats):
                        sent, seen, found, by = await one(
                            server.base_url, interval_s, load, args, seed
                        )
                        without, with_ = seen - sent, seen + found - sent
                        errors.setdefault((name, interval_s), []).append((without, with_))
                        print(
                            f"{name:8} {interval_s:7.2f} s {sent:5} {seen:5} {found:8.1f} "
                            f"{without:+14d} {with_:+6.1f}   {by}"
                        )
        finally:
            await asyncio.to_thread(server.stop)
    print("\nmean |error| of the count: without the estimate, with it, and without / with")
    for (name, interval_s), pairs in errors.items():
        without = statistics.fmean(abs(w) for w, _ in pairs)
        with_ = statistics.fmean(abs(w) for _, w in pairs)
        ratio = f"{without / with_:.1f}x" if with_ else "exact with it"
        print(f"  {name:6} {interval_s:5.2f} s: {without:5.1f} -> {with_:5.1f} ({ratio})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", default="0.1,0.25,0.5,1")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--requests", type=int, default=15, help="each user's")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="of: short, tiny")
    parser.add_argument("--log", help="keep the server's log in this file")
    parsed = parser.parse_args()
    parsed.intervals = [float(v) for v in parsed.intervals.split(",")]
    parsed.workloads = parsed.workloads.split(",")
    asyncio.run(main(parsed))
