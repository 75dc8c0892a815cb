"""Stress the window: 64 concurrent streams at full speed, then frame intervals and stalls.

The window drains engine events on a 16 ms (~60 Hz) timer. This script measures, while 64
streams pour tokens in, how regular that timer stays (frame-interval p50/p95), the longest
time the GUI's event loop could not run (a 5 ms heartbeat's worst lateness), and the GUI
thread's own CPU time per frame (what 60 Hz asks of it, whoever else wants the cores),
and the longest frame around each configuration's end (the frame that draws its results
row, and those of the next second: the next configuration's start).

  .venv/bin/python bench/ui_stress.py                 # fast local SSE source (child process)
  .venv/bin/python bench/ui_stress.py --source real   # the real llama-server, 64 slots
  .venv/bin/python bench/ui_stress.py --configs 2     # a sweep: a configuration change mid-run
  .venv/bin/python bench/ui_stress.py --profile-ends  # cProfile of the configurations' end frames

Goal: longest stall <= 50 ms; frame-interval p95 <= 17 ms (60 Hz) where the cores are free
for it, and <= 33 ms on 2 cores shared with the engine, the token source and other work; no
frame at a configuration's end over 50 ms of the GUI thread's CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import qasync  # noqa: E402
from PySide6.QtCore import Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from workbench.engine.config.experiment import parse_experiment  # noqa: E402
from workbench.engine.events import ConfigFinished  # noqa: E402
from workbench.engine.figures.per_request import percentile  # noqa: E402
from workbench.ui.main_window import MainWindow  # noqa: E402
from workbench.ui.theme.qt_theme import apply_theme  # noqa: E402

FAKE_SOURCE = """
import asyncio, sys
from tests.fakes.sse_server import Behaviour, FakeServer

async def main():
    async with FakeServer(Behaviour(tokens={tokens}, delay_s={delay})) as server:
        print(server.port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

asyncio.run(main())
"""


END_WINDOW_S = 1.0  # a configuration's end: its last frame and those of the next second


def experiment_text(streams: int, tokens: int, real: bool, configs: int = 1) -> str:
    """One configuration, or a sweep of ``configs`` (over the seed: the same work each)."""
    server = f"slots = {streams}\nctx = {streams * 256}\n" if real else "slots = 1\n"
    seeds = f"seed = [{', '.join(str(42 + i) for i in range(configs))}]\n" if configs > 1 else ""
    return (
        f'name = "ui-stress"\n[server]\n{server}[workload]\nrequests = {streams}\n'
        f"max_tokens = {tokens}\nwarmup = 0\n{seeds}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("fake", "real"), default="fake")
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--delay", type=float, default=0.01, help="fake: seconds per token")
    parser.add_argument("--configs", type=int, default=1, help="a sweep of this many")
    parser.add_argument(
        "--profile-ends",
        action="store_true",
        help="print where the GUI thread spent the frames that end configurations (cProfile)",
    )
    args = parser.parse_args()

    fake = None
    base_url = None
    if args.source == "fake":
        fake = subprocess.Popen(
            [sys.executable, "-c", FAKE_SOURCE.format(tokens=args.tokens, delay=args.delay)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        base_url = f"http://127.0.0.1:{fake.stdout.readline().strip()}"

    app = QApplication.instance() or QApplication([])
    apply_theme(app, "dark")
    app.setQuitOnLastWindowClosed(False)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    out = Path(tempfile.mkdtemp(prefix="ui-stress-"))
    window = MainWindow(out)
    window.resize(1920, 1080)
    window.show()
    window.form.load(
        parse_experiment(
            experiment_text(args.streams, args.tokens, args.source == "real", args.configs)
        )
    )
    if base_url:
        window.form.external.setChecked(True)
        window.form.base_url.setText(base_url)

    frames: list[float] = []
    frame_cpu: list[float] = []  # the GUI thread's CPU time at each frame's start
    durations: list[float] = []
    drain = window.runs.drain

    def timed_drain() -> None:
        start = time.perf_counter()
        if window.model.status == "running":
            frames.append(start)
            frame_cpu.append(time.thread_time())
        drain()
        if window.model.status == "running":
            durations.append(time.perf_counter() - start)

    window.pump.timeout.disconnect()
    window.pump.timeout.connect(timed_drain)

    # Every frame, whoever draws it (the pump, or the run's last drain): when it started, on
    # the wall clock and in the GUI thread's CPU time, and which ones drew a ConfigFinished.
    # A frame lasts until the next one starts (its paint comes after the drain); once the
    # run is over, a timer goes on marking frames for END_WINDOW_S (what a run's end leaves
    # for later frames is counted in them).
    painted: list[tuple[float, float]] = []
    ends: list[int] = []
    profile = cProfile.Profile() if args.profile_ends else None
    profiling = [False]
    render = window.renderer.render

    def stamp() -> None:
        painted.append((time.perf_counter(), time.thread_time()))
        if profiling[0]:
            profile.disable()
            profiling[0] = False

    def timed_render(events: list, *rest: object, **named: object) -> None:
        stamp()
        if any(isinstance(e, ConfigFinished) for e in events):
            ends.append(len(painted) - 1)
            if profile is not None:
                profile.enable()
                profiling[0] = True
        render(events, *rest, **named)
        if window.model.status != "running" and not after.isActive():
            after.start()

    after = QTimer()
    after.setInterval(16)
    after.setTimerType(Qt.TimerType.PreciseTimer)
    after.timeout.connect(stamp)
    window.renderer.render = timed_render
    lateness: list[float] = []
    busy: list[float] = []  # the GUI thread's own CPU time within each heartbeat
    stamps: list[float] = []

    async def heartbeat() -> None:
        while True:
            before, cpu_before = time.perf_counter(), time.thread_time()
            await asyncio.sleep(0.005)
            if window.model.status == "running":
                lateness.append(time.perf_counter() - before - 0.005)
                busy.append(time.thread_time() - cpu_before)
                stamps.append(before)

    async def scenario() -> str:
        beat = asyncio.ensure_future(heartbeat())
        statuses: list[str] = []
        window.run_finished.connect(statuses.append)
        window.start_run()
        while not statuses:
            await asyncio.sleep(0.1)
        await asyncio.sleep(END_WINDOW_S)  # the frames after the run's last
        after.stop()
        beat.cancel()
        return statuses[0]

    try:
        status = loop.run_until_complete(scenario())
    finally:
        window.shutdown()
        window.close()
        loop.close()
        if fake is not None:
            fake.stdin.close()
            fake.wait(10)
    intervals = [(b - a) * 1000 for a, b in itertools.pairwise(frames)]
    chunks = sum(v.chunks for v in window.model.requests.values())
    print(
        f"source: {args.source}, {args.streams} streams x {args.tokens} tokens, run {status}, "
        f"{chunks} token chunks drawn"
    )
    print(
        f"frames: {len(frames)}; interval p50 {percentile(intervals, 50):.1f} ms, "
        f"p95 {percentile(intervals, 95):.1f} ms, max {max(intervals):.1f} ms "
        f"(goal p95 <= 33 ms)"
    )
    print(
        f"drain+paint work per frame: p50 {percentile(durations, 50) * 1000:.1f} ms, "
        f"p95 {percentile(durations, 95) * 1000:.1f} ms"
    )
    worst = max(range(len(lateness)), key=lateness.__getitem__)
    print(
        f"longest event-loop stall: {lateness[worst] * 1000:.1f} ms, "
        f"{stamps[worst] - stamps[0]:.1f} s into the run (goal <= 50 ms); "
        f"stalls over 33 ms: {sum(x > 0.033 for x in lateness)}"
    )
    # A stall the GUI thread spent on CPU is the window's own work; the rest of it, the
    # thread waited for a core (the engine and the token source share the machine).
    print(
        f"GUI thread CPU within the longest stall: {busy[worst] * 1000:.1f} ms; "
        f"longest stall of the window's own work: {max(busy) * 1000:.1f} ms"
    )
    cpu = [(b - a) * 1000 for a, b in itertools.pairwise(frame_cpu)]
    print(
        f"GUI thread CPU per frame (drain, paint, the rest): p50 {percentile(cpu, 50):.1f} ms, "
        f"p95 {percentile(cpu, 95):.1f} ms (60 Hz needs <= 16 ms)"
    )
    for n, end in enumerate(ends, 1):
        near = [
            i
            for i in range(end, len(painted) - 1)
            if painted[i][0] - painted[end][0] <= END_WINDOW_S
        ]
        longest = max(near, key=lambda i: painted[i + 1][1] - painted[i][1])
        print(
            f"configuration {n}/{len(ends)} end: longest frame "
            f"{(painted[longest + 1][1] - painted[longest][1]) * 1000:.1f} ms GUI thread CPU "
            f"({(painted[longest + 1][0] - painted[longest][0]) * 1000:.1f} ms wall), "
            f"{longest - end} frames after the one with its results; the end frame itself "
            f"{(painted[end + 1][1] - painted[end][1]) * 1000:.1f} ms (goal <= 50 ms)"
        )
    if profile is not None:
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)


if __name__ == "__main__":
    main()
