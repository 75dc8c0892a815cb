"""How long does a sweep spend between configurations, against a bare server start?

Between two configurations the workbench stops one llama-server and starts the next; a user
waits from the moment the last request of configuration k finished until the server of
configuration k+1 answers ``/health``. The floor for that wait is what the server itself
needs to come up, so this compares, in the same run and alternating the order each round:

- **bare**: ``llama-server`` spawned with exactly the flags the workbench gives it
  (``server_arguments``) and ``GET /health`` polled every ``--poll-ms`` until it answers 200,
  timed from just before the spawn;
- **workbench**: a real headless sweep through ``RunLifecycle`` (slots 1/2/4, a couple
  of short requests each), timed from the last request's ``t_done_ns`` of configuration k to
  configuration k+1's server state turning ``healthy``. Events carry no time of their own,
  so the bus stamps each one with ``time.perf_counter_ns()`` as it is published (the clock
  the request records use), which is when it happened, not when a subscriber got round to it.

It prints, per transition, the medians over rounds and the ratio workbench / bare with its
spread, then where the workbench's time went (closing the client, stopping the old server,
naming slots and summarising, the server's own load up to its "model loaded" log line, and
how long after that the supervisor saw it healthy). On a shared machine the server's load
time alone swings by seconds, so the ratio is also given "at equal load": both sides' time
outside the server's own load, added to the same (the bare run's) load time.

  .venv/bin/python bench/sweep_overhead.py [--rounds 3] [--slots 1,2,4] [--ctx 4096]

Goal: workbench end-to-next-healthy at most 1.5x bare start-to-healthy.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.engine.config.experiment import parse_experiment  # noqa: E402
from workbench.engine.config.server_settings import ServerSettings  # noqa: E402
from workbench.engine.events import (  # noqa: E402
    ConfigFinished,
    EventBus,
    RequestFinished,
    ServerReady,
    ServerStateChanged,
)
from workbench.engine.models.model_file import resolve_model  # noqa: E402
from workbench.engine.run.lifecycle import run_experiment  # noqa: E402
from workbench.engine.run.runner import RunOptions  # noqa: E402
from workbench.engine.server.discovery import find_server_binary  # noqa: E402
from workbench.engine.server.llama_server import free_port, server_arguments  # noqa: E402

GOAL = 1.5
# The workbench's phases between configurations, as (name, from mark, to mark). "ready" is
# when the server itself logged "model loaded" (its log clock starts at its own start, a few
# ms after the spawn), so "load" is the server's work and "noticed" the supervisor's delay.
PHASES = (
    ("client+check", "end", "stopping"),
    ("stop", "stopping", "stopped"),
    ("slots+summary", "stopped", "finished"),
    ("to spawn", "finished", "starting"),
    ("load", "starting", "ready"),
    ("noticed", "ready", "healthy"),
)
# llama.cpp's log prefix: minutes.seconds.milliseconds.microseconds since the server started.
LOADED = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) \S+ srv +llama_server: model loaded", re.M)


class StampedBus(EventBus):
    """An event bus that records when each event was published.

    A subscriber's drain time would add its own scheduling delay to every figure; the
    publish time is the moment the engine reached that point."""

    def __init__(self) -> None:
        super().__init__()
        self.stamped: list[tuple[int, Any]] = []
        self._stamp_lock = threading.Lock()

    def publish(self, event: Any) -> None:
        t_ns = time.perf_counter_ns()
        with self._stamp_lock:
            self.stamped.append((t_ns, event))
        super().publish(event)


@dataclass(frozen=True)
class Transition:
    """One configuration change of a sweep: the marks, in perf_counter seconds."""

    marks: dict[str, float]

    @property
    def end_to_healthy(self) -> float:
        return self.marks["healthy"] - self.marks["end"]

    def phase(self, start: str, stop: str) -> float:
        return self.marks[stop] - self.marks[start]


def loaded_after(log: Path) -> float:
    """Seconds from the server's start to its "model loaded" line, by its own log clock.

    The last such line: a log file may hold several starts."""
    found = LOADED.findall(log.read_text(encoding="utf-8", errors="replace"))
    if not found:
        raise RuntimeError(f"no 'model loaded' line in {log}")
    minutes, seconds, ms, us = (int(x) for x in found[-1])
    return minutes * 60 + seconds + ms / 1e3 + us / 1e6


def bare_start(
    binary: str, model: Path, settings: ServerSettings, log: Path, poll_s: float
) -> tuple[float, float]:
    """(seconds from spawn to the first 200 on /health, seconds from spawn to the server's
    own "model loaded"); the stop is untimed."""
    port = free_port()
    command = [binary, *server_arguments(settings, model, port)]
    url = f"http://127.0.0.1:{port}/health"
    with httpx.Client(timeout=2.0) as client, log.open("ab") as fh:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"bare llama-server exited {proc.returncode}; see {log}")
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(url).status_code == 200:
                        healthy = time.perf_counter() - t0
                        break
                time.sleep(poll_s)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    # Read only now: the server's log is written by a thread of its own, so its line can
    # reach the file after /health already answers.
    return healthy, loaded_after(log)


def workbench_sweep(text: str, out: Path) -> list[Transition]:
    """Run the sweep headless and cut its event stream into transitions k -> k+1."""
    experiment = parse_experiment(text, name_hint="sweep-overhead")
    bus = StampedBus()
    result = run_experiment(experiment, RunOptions(out_dir=out), bus)
    if result.status != "complete":
        raise RuntimeError(f"workbench sweep ended {result.status}: {result.error}")
    marks: dict[int, dict[str, float]] = {}
    logs: dict[int, Path] = {}
    for t_ns, event in bus.stamped:
        match event:
            case RequestFinished(record=r) if not r.warmup and r.t_done_ns is not None:
                m = marks.setdefault(r.config_index, {})
                m["end"] = max(m.get("end", 0.0), r.t_done_ns / 1e9)
            case ServerStateChanged(config_index=k, state=state) if state in (
                "starting",
                "stopping",
                "stopped",
                "healthy",
            ):
                marks.setdefault(k, {}).setdefault(state, t_ns / 1e9)  # the first of each
            case ConfigFinished(config_index=k):
                marks.setdefault(k, {})["finished"] = t_ns / 1e9
            case ServerReady(config_index=k, log_path=log) if log is not None:
                logs[k] = Path(log)
    transitions = []
    for k in range(len(result.summaries) - 1):
        old, new = marks[k], marks[k + 1]
        transitions.append(
            Transition(
                {
                    "end": old["end"],
                    "stopping": old["stopping"],
                    "stopped": old["stopped"],
                    "finished": old["finished"],
                    "starting": new["starting"],
                    "ready": new["starting"] + loaded_after(logs[k + 1]),
                    "healthy": new["healthy"],
                }
            )
        )
    return transitions


def experiment_text(slots: list[int], ctx: int, requests: int, max_tokens: int) -> str:
    return (
        'name = "sweep-overhead"\n[server]\n'
        f"slots = [{', '.join(map(str, slots))}]\nctx = {ctx}\n"
        f"[workload]\nrequests = {requests}\nmax_tokens = {max_tokens}\nwarmup = 0\n"
    )


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if len(values) > 1 else "-"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        epilog=f"Goal: workbench/bare at most {GOAL}x.",
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--slots", default="1,2,4", help="the sweep's slots (default 1,2,4)")
    parser.add_argument("--ctx", type=int, default=4096, help="-c for every server (4096)")
    parser.add_argument("--requests", type=int, default=2, help="requests per config (2)")
    parser.add_argument("--max-tokens", type=int, default=8, help="tokens per request (8)")
    parser.add_argument(
        "--poll-ms", type=float, default=10.0, help="bare /health poll interval (10 ms)"
    )
    args = parser.parse_args()
    slots = [int(s) for s in args.slots.split(",")]
    if len(slots) < 2:
        parser.error("--slots needs at least two values: a transition needs two configs")
    binary = find_server_binary().path
    model = resolve_model("default")
    text = experiment_text(slots, args.ctx, args.requests, args.max_tokens)
    n = len(slots) - 1
    bare: list[list[tuple[float, float]]] = [[] for _ in range(n)]  # (healthy, loaded)
    bench: list[list[Transition]] = [[] for _ in range(n)]
    with tempfile.TemporaryDirectory(prefix="sweep-overhead-") as tmp:
        for round_ in range(args.rounds):
            order = ("bare", "workbench") if round_ % 2 == 0 else ("workbench", "bare")
            for mode in order:
                if mode == "bare":
                    for k in range(n):
                        settings = ServerSettings(slots=slots[k + 1], ctx=args.ctx)
                        log = Path(tmp) / f"bare-{round_}-{k}.log"
                        bare[k].append(bare_start(binary, model, settings, log, args.poll_ms / 1e3))
                else:
                    for k, t in enumerate(workbench_sweep(text, Path(tmp) / f"wb-{round_}")):
                        bench[k].append(t)
                print(f"round {round_ + 1}: {mode} done", flush=True)
    report(args, slots, bare, bench)


def report(
    args: argparse.Namespace,
    slots: list[int],
    bare: list[list[tuple[float, float]]],
    bench: list[list[Transition]],
) -> None:
    """The side-by-side table, then the workbench's time by phase.

    On a shared 2-core machine the server's own load time swings by seconds with the
    neighbours' load, which swamps the supervisor's share. So beside the plain ratio there
    is the ratio at equal load: each side's time outside the server's load added to the same
    (the bare run's) load time, which is what the workbench would show on a quiet machine."""
    print(
        f"\nslots {args.slots}, -c {args.ctx}, {args.requests} requests x {args.max_tokens} "
        f"tokens, {args.rounds} rounds, alternating; medians over rounds, spread = min-max\n"
    )
    print(
        f"{'transition':<12} {'bare start->healthy s':>22} {'workbench end->healthy s':>25} "
        f"{'ratio':>6} {'spread':>10} {'at equal load':>14} {'spread':>10}"
    )
    rows: list[tuple[str, list[float], list[float], list[float], list[float]]] = []
    for k in range(n_transitions(slots)):
        plain, equal = [], []
        for t, (healthy, loaded) in zip(bench[k], bare[k], strict=True):
            plain.append(t.end_to_healthy / healthy)
            wb_outside = t.end_to_healthy - t.phase("starting", "ready")
            equal.append((loaded + wb_outside) / healthy)
        label = f"np {slots[k]}->{slots[k + 1]}"
        rows.append(
            (label, [b[0] for b in bare[k]], [t.end_to_healthy for t in bench[k]], plain, equal)
        )
    everything = ("all", *([v for r in rows for v in r[i]] for i in range(1, 5)))
    for label, b, w, plain, equal in [*rows, everything]:
        print(
            f"{label:<12} {statistics.median(b):>22.3f} {statistics.median(w):>25.3f} "
            f"{statistics.median(plain):>6.2f} {spread(plain):>10} "
            f"{statistics.median(equal):>14.2f} {spread(equal):>10}"
        )
    verdict = "meets" if statistics.median(everything[4]) <= GOAL else "misses"
    print(f"\nat equal load the workbench {verdict} the {GOAL}x goal")

    print("\nwhere the time goes (median s over all transitions and rounds)\n")
    print(f"{'':<10}" + "  ".join(f"{name:>13}" for name, _, _ in PHASES))
    flat = [t for row in bench for t in row]
    print(
        f"{'workbench':<10}"
        + "  ".join(
            f"{statistics.median(t.phase(a, b) for t in flat):>13.3f}" for _, a, b in PHASES
        )
    )
    pairs = [b for row in bare for b in row]
    bare_phases = {"load": [lo for _, lo in pairs], "noticed": [h - lo for h, lo in pairs]}
    print(
        f"{'bare':<10}"
        + "  ".join(
            f"{statistics.median(bare_phases[name]):>13.3f}" if name in bare_phases else f"{'':>13}"
            for name, _, _ in PHASES
        )
    )


def n_transitions(slots: list[int]) -> int:
    return len(slots) - 1


if __name__ == "__main__":
    main()
