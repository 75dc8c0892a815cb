"""How true a watch is, and what it costs the server: the workbench's own runs on a real
llama-server (4 slots; the long-prompt stalls experiment's trace, then a burst of 8
requests) while ``workbench watch``'s engine polls the same server, once at each
``--intervals`` value.

Truth: each watched task is matched to the request the client sent (the slot the server's
log names for it, then the most overlap; a task the watch found already running is left
out of the prompt's start) and its watched times set against the client's: its prompt's
start (the first token less the server's ``prompt_ms``), its first token, its last.
Printed: each error's p50, p95 and largest, the share within one interval, the requests
matched, and any poll that showed a task on its prompt once it had decoded (the goal:
none). And the wait in the queue the watch estimates (Little's law) against the mean of the
waits the client measured (TTFT less ``prompt_ms``); and each request's arrival as the trace
export estimates it (from the queue's rises), and as its slot's start would have it,
against when the client sent it.

Overhead: the same burst with no watch and with one at the default 0.1 s, in turn
``--repeats`` times, the server's own decode tok/s (``predicted_n / predicted_ms``) of
each, side by side; the goal is at least 0.98x.

  .venv/bin/python bench/watch_truth.py [--intervals 0.05,0.1,0.5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import threading
from pathlib import Path

from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.figures.per_request import percentile, request_metrics
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.trace_out import arrivals
from workbench.engine.watch.watcher import Load, Watched, WatchError, watch

TRACE = Path(__file__).resolve().parent.parent / "resources/traces/long-prompt-stalls.jsonl"
PORT = 18477
SERVER = f"[server]\nslots = 4\nctx = 16384\ncache_ram_mib = 0\nport = {PORT}\n"
STALLS = (
    f"name = 'watched'\n{SERVER}[workload]\narrival = 'trace'\n"
    f"trace = '{TRACE}'\nignore_eos = true\nwarmup = 0\n"
)
BURST = (
    f"name = 'watched'\n{SERVER}[workload]\nrequests = 8\ninput_tokens = 256\n"
    "max_tokens = 64\narrival = 'burst'\nignore_eos = true\nwarmup = 0\n"
)
URL = f"http://127.0.0.1:{PORT}"


class Watching:
    """A watch on its own thread and event loop, beside a run on this one, that waits for
    the run's server to answer."""

    def __init__(self, url: str, interval_s: float) -> None:
        self.polls: list[tuple[float, list[dict]]] = []
        self.loads: list[Load] = []
        self.watched: Watched | None = None
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(target=self._run, args=(url, interval_s))
        self._thread.start()

    def _run(self, url: str, interval_s: float) -> None:
        def on_poll(t_s: float, slots: list[dict] | None, load: Load | None) -> None:
            self.polls.append((t_s, slots or []))
            if load is not None:
                self.loads.append(load)

        async def until_watched() -> Watched:
            while True:
                try:
                    return await watch(url, interval_s, None, stop=self._stop, on_poll=on_poll)
                except WatchError:  # not up yet
                    await asyncio.sleep(0.02)

        asyncio.set_event_loop(self._loop)
        self.watched = self._loop.run_until_complete(until_watched())

    def stop(self) -> Watched:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join()
        assert self.watched is not None
        return self.watched


def measured(text: str, out: Path) -> list[RequestRecord]:
    result = run_experiment(parse_experiment(text), RunOptions(out))
    with open_session(result.session_path) as session:
        return [r for c in session.configs for r in session.records(c.index) if r.ok]


def matched(
    task: WatchedTask, records: list[RequestRecord], started_ns: int
) -> RequestRecord | None:
    """The request ``task`` served: on its slot, its time in the slot (its first token less
    the server's ``prompt_ms``, to its end) overlapping the task's the most. A task still
    open when the run stopped its server ends at the last poll that showed it."""

    def overlap(r: RequestRecord) -> float:
        prompt_ms = (r.timings or {}).get("prompt_ms")
        if r.t_first_token_ns is None or r.t_done_ns is None or prompt_ms is None:
            return 0.0
        start = (r.t_first_token_ns - started_ns) / 1e9 - prompt_ms / 1000
        end = (r.t_done_ns - started_ns) / 1e9
        return min(end, task.gone_s or task.last_s) - max(start, task.seen_s)

    mine = [r for r in records if r.slot == task.slot and overlap(r) > 0]
    return max(mine, key=overlap, default=None)


def truth(
    name: str,
    interval_s: float,
    records: list[RequestRecord],
    watching: Watched,
    polls,
    loads: list[Load],
) -> None:
    errors: dict[str, list[float]] = {
        "prompt start": [],
        "first token": [],
        "last token": [],
        "arrival, estimated": [],
        "arrival, as the slot start": [],
    }
    seen = set()
    tasks = watching.tasks.tasks
    came = arrivals(tasks, loads)  # what `export --format trace` writes
    for k, task in enumerate(tasks):
        if task.missed:
            continue
        r = matched(task, records, watching.started_ns)
        if r is None or r.t_first_token_ns is None or r.t_last_token_ns is None:
            continue
        seen.add(r.key)
        if r.t_submit_ns is not None and not task.running_at_start:
            sent = (r.t_submit_ns - watching.started_ns) / 1e9
            errors["arrival, estimated"].append(came[k] - sent)
            errors["arrival, as the slot start"].append(task.seen_s - sent)
        first = (r.t_first_token_ns - watching.started_ns) / 1e9
        last = (r.t_last_token_ns - watching.started_ns) / 1e9
        prompt_ms = (r.timings or {}).get("prompt_ms")
        if prompt_ms is not None and not task.running_at_start:
            errors["prompt start"].append(task.seen_s - (first - prompt_ms / 1000))
        if task.decoding_s is not None:
            errors["first token"].append(task.decoding_s - first)
        if task.gone_s is not None:  # not a task open when the run stopped its server
            errors["last token"].append(task.gone_s - last)
    # a task shown on its prompt once a poll had shown it decoding
    decoded: dict[int, int] = {}
    backwards = 0
    for _, slots in polls:
        for s in slots:
            if s["is_processing"] and s["id_task"] is not None:
                now = s["n_decoded"] or 0
                backwards += now == 0 and decoded.get(s["id_task"], 0) > 0
                decoded[s["id_task"]] = max(decoded.get(s["id_task"], 0), now)
    print(
        f"\n-- {name}: {len(records)} requests, {len(seen)} matched to a "
        f"task, {watching.tasks.missed} between two polls; "
        f"{backwards} polls showed a decoded task on its prompt"
    )
    waits = [
        m.queue_wait_s for r in records if (m := request_metrics(r)) and m.queue_wait_s is not None
    ]
    estimate = summarize(watching).wait_estimate_s
    if waits and estimate is not None:
        mean = statistics.mean(waits)
        print(
            f"queue wait: estimated {estimate:.3f} s a request, measured {mean:.3f} s "
            f"({estimate / mean if mean else float('nan'):.2f}x)"
        )
    print("| watched against the client | p50 ms | p95 ms | largest ms | within one interval |")
    print("|---|---|---|---|---|")
    for name, found in errors.items():
        if not found:
            continue
        size = [abs(e) * 1000 for e in found]
        within = sum(abs(e) <= interval_s for e in found) / len(found)
        print(
            f"| {name} | {percentile(size, 50):.0f} | {percentile(size, 95):.0f} | "
            f"{max(size):.0f} | {within:.0%} |"
        )


def decode_tok_s(records: list[RequestRecord]) -> float:
    speeds = [
        t["predicted_n"] / t["predicted_ms"] * 1000
        for r in records
        if (t := r.timings) and t.get("predicted_ms")
    ]
    return statistics.median(speeds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--intervals", default="0.05,0.1,0.5")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="watch-truth-"))
    for k, interval in enumerate(float(v) for v in args.intervals.split(",")):
        for name, text in (("stalls", STALLS), ("burst", BURST)):
            watching = Watching(URL, interval)
            records = measured(text, out / f"{name}-{k}")
            watched = watching.stop()
            truth(
                f"{name}, every {interval:g} s",
                interval,
                records,
                watched,
                watching.polls,
                watching.loads,
            )
    alone, watched_speeds = [], []
    for n in range(args.repeats):
        alone.append(decode_tok_s(measured(BURST, out / f"alone-{n}")))
        watching = Watching(URL, 0.1)
        watched_speeds.append(decode_tok_s(measured(BURST, out / f"watched-{n}")))
        watching.stop()
    print("\n| burst, in turn | decode tok/s, no watch | watched at 0.1 s |")
    print("|---|---|---|")
    for n in range(args.repeats):
        print(f"| {n + 1} | {alone[n]:.1f} | {watched_speeds[n]:.1f} |")
    ratio = statistics.median(watched_speeds) / statistics.median(alone)
    print(f"watched / not, medians: {ratio:.3f}x")
    print(f"\nsessions in {out}")


if __name__ == "__main__":
    main()
