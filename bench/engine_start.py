"""How long the window waits for its engine process, run after run: fork server vs a fresh
interpreter each time.

The window starts each run's engine in a child process (``ProcessRunner``). Each method runs
in a process of its own: a script whose main module imports the CLI, as the ``workbench``
command's does (a child imports its parent's main module again). It prepares ``--runs``
runs one after another, of an experiment whose model file is missing: the child imports the
engine, checks, and answers with the error; no server is involved. Printed: each run's time
from ``prepare()`` called to the child's answer, and the ratio of the later runs' medians,
fresh interpreter over fork server.

    .venv/bin/python bench/engine_start.py --rounds 3 --runs 5
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

CHILD = """
import json, sys, tempfile, time
import multiprocessing
from pathlib import Path

import workbench.cli.main  # noqa: F401  (the command's main module imports it)
from workbench.engine.base.errors import ModelFileError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.run import process_runner
from workbench.engine.run.runner import RunOptions

if __name__ == "__main__":
    method, runs = sys.argv[1], int(sys.argv[2])
    if method == "spawn":
        process_runner.engine_context = lambda: multiprocessing.get_context("spawn")
    folder = Path(tempfile.mkdtemp())
    experiment = parse_experiment(f'[server]\\nmodel = "{folder / "missing.gguf"}"\\n')
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        try:
            process_runner.ProcessRunner(experiment, RunOptions(folder / "out")).prepare()
        except ModelFileError:
            times.append(time.perf_counter() - started)
    print(json.dumps(times))
"""


def measure(method: str, runs: int) -> list[float]:
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "front_end.py"
        script.write_text(CHILD)
        done = subprocess.run(
            [sys.executable, str(script), method, str(runs)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            check=True,
        )
    times = json.loads(done.stdout.splitlines()[-1])
    if len(times) != runs:
        raise SystemExit(f"{method}: {runs - len(times)} runs did not answer with the error")
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    later: dict[str, list[float]] = {"forkserver": [], "spawn": []}
    for round_ in range(1, args.rounds + 1):
        for method in ("forkserver", "spawn"):  # alternately, on the same machine state
            times = measure(method, args.runs)
            later[method] += times[1:]
            shown = ", ".join(f"{t * 1000:.0f}" for t in times)
            print(f"round {round_} {method:>10}: {shown} ms")
    medians = {method: statistics.median(times) for method, times in later.items()}
    print(
        f"runs after the first, median: fork server {medians['forkserver'] * 1000:.0f} ms, "
        f"fresh interpreter {medians['spawn'] * 1000:.0f} ms, "
        f"ratio {medians['spawn'] / medians['forkserver']:.1f}x"
    )


if __name__ == "__main__":
    main()
