"""How many token events per second the engine ingests on one core, next to a raw httpx loop.

An instant local SSE source (``workbench.mock_server`` with no TTFT and no gap, pinned to the
other core) streams ``--tokens`` chunks to each of ``--streams`` requests. Each client runs in
a process of its own pinned to core 0, alternately, ``--rounds`` times:

- the engine: a headless run through ``RunLifecycle`` in external mode, everything
  ``workbench run`` does (session writer, sampler, the event bus drained at the terminal's
  pace, the tables);
- the raw loop: one httpx client, a timestamp per read and a JSON decode per event.

Events/s is token chunks received over the time from the first request sent to the last
finished. "Honest" checks that every chunk kept a timestamp of its own read: timestamps never
go back within a request and none is later than the request's end.

    .venv/bin/python bench/client_overhead.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import raw_client  # noqa: E402

from workbench.mock_server import MockProcess  # noqa: E402


def _pin(core: int) -> None:
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > core:
        os.sched_setaffinity(0, {core})


def engine_client(url: str, streams: int, tokens: int) -> dict:
    from workbench.engine.config.experiment import parse_experiment
    from workbench.engine.run.lifecycle import run_experiment
    from workbench.engine.run.runner import RunOptions
    from workbench.engine.store import open_session

    experiment = parse_experiment(
        f'name = "overhead"\n[workload]\nrequests = {streams}\nconcurrency = {streams}\n'
        f"max_tokens = {tokens}\nwarmup = 1\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        result = run_experiment(experiment, RunOptions(Path(folder), base_url=url))
        assert result.status == "complete", result
        with open_session(result.session_path) as session:
            records = [r for r in session.records(0) if not r.warmup]
    stamps = [[c.t_ns for c in r.chunks] for r in records]
    start = min(r.t_submit_ns for r in records if r.t_submit_ns)
    end = max(r.t_done_ns for r in records if r.t_done_ns)
    honest = all(
        s == sorted(s) and (not s or s[-1] <= (r.t_done_ns or 0))
        for s, r in zip(stamps, records, strict=True)
    )
    return {"chunks": sum(map(len, stamps)), "seconds": (end - start) / 1e9, "honest": honest}


def run_raw(url: str, streams: int, tokens: int) -> dict:
    document = raw_client.run(url, streams, tokens, pin_core=0)
    requests = document["requests"]
    seconds = (max(r["t_end_ns"] for r in requests) - min(r["t_submit_ns"] for r in requests)) / 1e9
    honest = all(r["chunk_ns"] == sorted(r["chunk_ns"]) for r in requests)
    return {
        "chunks": sum(len(r["chunk_ns"]) for r in requests),
        "seconds": seconds,
        "honest": honest,
    }


def run_client(kind: str, url: str, streams: int, tokens: int) -> dict:
    if kind == "raw":
        return run_raw(url, streams, tokens)
    cmd = [sys.executable, __file__, "--client", kind, "--url", url]
    cmd += ["--streams", str(streams), "--tokens", str(tokens)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{kind} client failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=4000, help="chunks per request")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--client", choices=("engine",), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        _pin(0)
        print(json.dumps(engine_client(args.url, args.streams, args.tokens)))
        return 0

    source = MockProcess(
        "--ttft-ms", "0", "--itl-ms", "0", "--tokens", str(args.tokens), core=1
    )  # fmt: skip
    url = source.url
    rates: dict[str, list[float]] = {"engine": [], "raw": []}
    honest: dict[str, bool] = {"engine": True, "raw": True}
    try:
        for _ in range(args.rounds):
            for kind in ("engine", "raw"):
                result = run_client(kind, url, args.streams, args.tokens)
                rates[kind].append(result["chunks"] / result["seconds"])
                honest[kind] = honest[kind] and result["honest"]
                print(f"  {kind}: {rates[kind][-1]:,.0f} events/s", file=sys.stderr)
    finally:
        source.stop()
    print(
        f"\n{args.streams} streams x {args.tokens} chunks, client pinned to core 0, source to "
        f"core 1; {args.rounds} rounds, alternating"
    )
    print("| client | events/s median | min - max | timestamps honest |")
    print("|---|---|---|---|")
    for kind, name in (("engine", "workbench engine"), ("raw", "raw httpx loop")):
        r = rates[kind]
        print(
            f"| {name} | {statistics.median(r):,.0f} | {min(r):,.0f} - {max(r):,.0f} "
            f"| {'yes' if honest[kind] else 'NO'} |"
        )
    engine = statistics.median(rates["engine"])
    ratio = statistics.median(rates["raw"]) / engine
    met = engine >= 20000 and ratio <= 1.2
    print(
        f"\nraw / engine: {ratio:.2f}x (goal: at least 20,000 events/s and within 1.2x of the "
        f"raw loop: {'met' if met else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
