"""Load beyond one client process: token events per second and TTFT error with
``[workload] workers`` = 1, 2 and N (N: the cores free), at 256 and 1,024 concurrent streams.

One mock server (``workbench.mock_server``: a known TTFT of ``--ttft-ms``, then a chunk
every ``--itl-ms``) serves every case; each case is a headless run through
``RunLifecycle`` in external mode, everything ``workbench run`` does, with ``workers``
client processes. Per case:

- events/s: token chunks received over the time from the first request sent to the last
  finished; beside it, relative to 1 worker, and per added core (``(ratio - 1) /
  (workers - 1)``: 1.0 is linear);
- TTFT error: each request's TTFT minus the mock's known TTFT, p50 and p99 in ms: the
  client's error and the mock's lateness together;
- the measurement's own error, p50 and p99: for each request, the moment the client took
  its first token minus the moment the mock wrote it (``/mock/log``, on the same clock):
  what the workbench adds to a TTFT. A busy mock (one loop) is late to write on a machine
  with few cores, and that lateness is the mock's, not the measurement's;
- failed requests, the busiest worker's loop (share of its wall time on CPU) and the mock's
  CPU share over the run.

The open-files limit is raised first (two descriptors a stream, with room); the mock
inherits it. The cores free are the ones this process may use (``sched_getaffinity``)
less what else was busy on them over a second before the run (``psutil``).

    .venv/bin/python bench/scale_out.py
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.engine.config.experiment import parse_experiment  # noqa: E402
from workbench.engine.figures.per_request import percentile, request_metrics  # noqa: E402
from workbench.engine.measure.open_files import raise_open_files  # noqa: E402
from workbench.engine.run.lifecycle import run_experiment  # noqa: E402
from workbench.engine.run.runner import RunOptions  # noqa: E402
from workbench.engine.store import open_session  # noqa: E402
from workbench.mock_server import MockProcess  # noqa: E402

FILES_PER_STREAM = 2  # the client's socket and the mock's


def cores_free() -> tuple[int, float]:
    """The cores this process may use, and of them how many were idle over one second."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    busy = psutil.cpu_percent(interval=1.0, percpu=True)
    mine = [busy[c] for c in allowed] if allowed else busy
    return len(mine), sum(1 - b / 100 for b in mine)


def one_case(url: str, streams: int, tokens: int, workers: int, ttft_ms: float, mock) -> dict:
    experiment = parse_experiment(
        f'name = "scale out"\n[workload]\nrequests = {streams}\nmax_tokens = {tokens}\n'
        f"warmup = 1\nworkers = {workers}\nrequest_timeout_s = 120\n"
    )
    mock_cpu = psutil.Process(mock.process.pid)
    with tempfile.TemporaryDirectory() as folder:
        cpu_before, wall_before = sum(mock_cpu.cpu_times()[:2]), time.perf_counter()
        result = run_experiment(experiment, RunOptions(Path(folder), base_url=url))
        mock_busy = (sum(mock_cpu.cpu_times()[:2]) - cpu_before) / (
            time.perf_counter() - wall_before
        )
        with open_session(result.session_path) as session:
            records = [r for r in session.records(0) if not r.warmup]
    done = [r for r in records if r.ok]
    start = min(r.t_submit_ns for r in records if r.t_submit_ns)
    end = max(r.t_done_ns for r in records if r.t_done_ns)
    errors = [(m.ttft_s * 1000 - ttft_ms) for r in done if (m := request_metrics(r)) is not None]
    served = mock.served()
    taken = [
        (r.t_first_token_ns - s["sent_ns"][0]) / 1e6
        for r in done
        if (s := served.get(r.prompt)) is not None and s["sent_ns"] and r.t_first_token_ns
    ]
    run = result.summaries[0].runs[0]
    return {
        "taken_p50": percentile(taken, 50),
        "taken_p99": percentile(taken, 99),
        "events_s": sum(len(r.chunks) for r in records) / ((end - start) / 1e9),
        "p50": percentile(errors, 50),
        "p99": percentile(errors, 99),
        "failed": len(records) - len(done),
        "loop": run.loop_busy,
        "mock": mock_busy,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", default="256,1024", help="concurrent streams, a list")
    parser.add_argument("--workers", default=None, help="a list; default 1, 2 and the cores free")
    parser.add_argument("--tokens", type=int, default=64, help="chunks per request")
    parser.add_argument("--ttft-ms", type=float, default=100.0)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    args = parser.parse_args()
    streams = [int(s) for s in args.streams.split(",")]
    limit = raise_open_files(FILES_PER_STREAM * max(streams) + 1024)
    allowed, idle = cores_free()
    free = max(1, round(idle))
    workers = [int(w) for w in args.workers.split(",")] if args.workers else sorted({1, 2, free})
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"cores: {allowed} this process may use, {idle:.1f} idle over 1 s before the run "
        f"(load average {load:.2f}): N = {free}; open files limit {limit}",
        file=sys.stderr,
    )
    mock = MockProcess(
        "--ttft-ms", str(args.ttft_ms), "--itl-ms", str(args.itl_ms),
        "--tokens", str(args.tokens), "--slots", str(max(streams)),
    )  # fmt: skip
    results: dict[tuple[int, int], dict] = {}
    try:
        for n in streams:
            for w in workers:
                results[n, w] = one_case(mock.url, n, args.tokens, w, args.ttft_ms, mock)
                r = results[n, w]
                print(f"  {n} streams, {w} workers: {r['events_s']:,.0f} events/s", file=sys.stderr)
    finally:
        mock.stop()
    print(
        f"\nmock: TTFT {args.ttft_ms:g} ms, a chunk every {args.itl_ms:g} ms, {args.tokens} "
        f"chunks a request; cores: {allowed} usable, {idle:.1f} idle before the run "
        f"(load average {load:.2f})"
    )
    print(
        "| streams | workers | events/s | vs 1 worker | per added core | TTFT error p50 ms "
        "| p99 ms | measurement's error p50 ms | p99 ms | failed | busiest loop | mock CPU |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    goals = []
    for (n, w), r in results.items():
        one = results.get((n, 1))
        ratio = r["events_s"] / one["events_s"] if one else None
        per_core = (ratio - 1) / (w - 1) if ratio is not None and w > 1 else None
        print(
            f"| {n:,} | {w} | {r['events_s']:,.0f} | {_x(ratio)} | {_x(per_core)} "
            f"| {r['p50']:.1f} | {r['p99']:.1f} | {r['taken_p50']:.1f} | {r['taken_p99']:.1f} "
            f"| {r['failed']} "
            f"| {_pct(r['loop'])} "
            f"| {_pct(r['mock'])} |"
        )
        if n == max(streams):
            goals.append(r["failed"] == 0 and abs(r["taken_p50"]) <= 5.0)
    scaling = [
        (results[n, w]["events_s"] / results[n, 1]["events_s"] - 1) / (w - 1)
        for (n, w) in results
        if w > 1 and w <= free and (n, 1) in results
    ]
    print(
        f"\ngoals: {max(streams):,} streams with no failure and the measurement's TTFT p50 "
        f"error within 5 ms: "
        f"{'met' if goals and all(goals) else 'MISSED'}; events/s at least 0.8x linear per "
        f"added free core: "
        + (
            ("met" if min(scaling) >= 0.8 else "MISSED") + f" (lowest {min(scaling):.2f}x)"
            if scaling
            else "not measured (no second core free)"
        )
    )
    return 0


def _x(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


if __name__ == "__main__":
    sys.exit(main())
