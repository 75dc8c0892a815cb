"""How long does reopening a long session take, against SQLite reading the same rows bare?

Replay, the comparison, the report and every table start by reading a configuration's
requests and their token chunks back (``Session.records``): one row per token, so a long
run is hundreds of thousands of rows. Every value is read by column name and checked (a
session file can come from anyone), which costs time over a bare ``fetchall``. This writes
one session through the real writer (``--requests`` requests of ``--chunks`` chunks), then,
in the same run and alternating the order each round, times:

- **bare**: ``SELECT`` of the same request and chunk columns, ``fetchall()``, nothing built;
- **workbench**: ``open_session(path).records(0)``: requests and chunks as checked records.

It prints the medians and the ratio workbench / bare.

  .venv/bin/python bench/session_read.py [--requests 2000] [--chunks 200] [--rounds 3]

Goal: at most 3x bare (a record per request and a checked chunk per token are built).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from workbench.engine.base.records import Hardware, RequestRecord, TokenChunk
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import (
    ConfigFinished,
    ConfigStarted,
    EventBus,
    ExperimentFinished,
    RequestFinished,
)
from workbench.engine.store import SessionWriter, create_session, open_session

BARE_REQUESTS = "SELECT * FROM requests WHERE config_idx = 0 ORDER BY idx"
BARE_CHUNKS = (
    "SELECT request_idx, seq, t_ns, text, reasoning FROM chunks WHERE config_idx = 0 "
    "ORDER BY request_idx, seq"
)


def write(path: Path, requests: int, chunks: int) -> None:
    toml = f"name = 'long'\n[workload]\nrequests = {requests}\nmax_tokens = {chunks}\n"
    (config,) = parse_experiment(toml).configs()
    create_session(path, "long", toml, None, "managed", None, Hardware(), 0)
    bus = EventBus()
    writer = SessionWriter(path, bus)
    writer.start()
    bus.publish(ConfigStarted(config, requests))
    for i in range(requests):
        start = i * 1_000_000
        record = RequestRecord(
            0,
            0,
            i,
            "p",
            t_submit_ns=start,
            t_first_token_ns=start + 1000,
            t_last_token_ns=start + chunks * 1000,
            t_done_ns=start + chunks * 1000,
            ok=True,
            chunks=[TokenChunk(start + (k + 1) * 1000, " tok") for k in range(chunks)],
        )
        bus.publish(RequestFinished(record))
    bus.publish(ConfigFinished(0, "ok", None, "", None))
    bus.publish(ExperimentFinished("complete"))
    writer.join(600)
    if writer.error is not None:
        raise SystemExit(f"writing the session failed: {writer.error}")


def bare(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        conn.execute(BARE_REQUESTS).fetchall()
        return len(conn.execute(BARE_CHUNKS).fetchall())
    finally:
        conn.close()


def workbench(path: Path) -> int:
    with open_session(path) as session:
        return sum(len(r.chunks) for r in session.records(0))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "long.session.sqlite"
        started = time.perf_counter()
        write(path, args.requests, args.chunks)
        print(
            f"wrote {args.requests} requests x {args.chunks} chunks in "
            f"{time.perf_counter() - started:.1f} s"
        )
        times: dict[str, list[float]] = {"bare": [], "workbench": []}
        for round_ in range(args.rounds):
            order = [("bare", bare), ("workbench", workbench)]
            for name, read in order if round_ % 2 == 0 else reversed(order):
                t = time.perf_counter()
                rows = read(path)
                times[name].append(time.perf_counter() - t)
                assert rows == args.requests * args.chunks, (name, rows)
    b, w = (statistics.median(times[k]) for k in ("bare", "workbench"))
    print(f"{'':10} {'median s':>9}  rounds")
    for name in times:
        print(f"{name:10} {statistics.median(times[name]):9.2f}  {times[name]}")
    print(f"workbench / bare: {w / b:.2f}x (goal at most 3x)")


if __name__ == "__main__":
    main()
