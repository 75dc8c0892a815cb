"""Do numbers taken with the window open match headless ones?

Runs the same experiment alternately headless (``workbench run``) and in the window
(``workbench gui --autorun --quit-when-done``, offscreen), then prints TTFT p50 and
per-request decode tok/s per configuration, side by side, with the ratio window/headless
and the headless runs' own spread (the noise floor of this machine).

  .venv/bin/python bench/gui_vs_headless.py [EXPERIMENT] [--rounds 2] [--threads N]

``--threads N`` runs the experiment with ``[server] threads = N``: on a small machine, one
less than the cores leaves the window a core, which separates the measuring path (the
engine runs in its own process) from CPU contention (painting takes cycles from a server
whose worker threads spin-wait on each other).

Goal: ratios within 2 % (1.00 +- 0.02) where the noise floor allows telling.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.engine.config.experiment import experiment_to_toml, load_experiment  # noqa: E402
from workbench.engine.store import open_session  # noqa: E402

METRICS = (("ttft_p50_s", "TTFT p50 s"), ("decode_tok_s", "decode tok/s"))


def run_once(mode: str, experiment: str, out: Path) -> dict[str, dict[str, float]]:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    if mode == "headless":
        command = ["run", experiment, "--out", str(out), "--quiet"]
    else:
        command = [
            "gui",
            "--experiment",
            experiment,
            "--out",
            str(out),
            "--autorun",
            "--quit-when-done",
            "--size",
            "1920x1080",
        ]
    subprocess.run(
        [sys.executable, "-m", "workbench", *command],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=900,
    )
    (session_path,) = out.glob("*.session.sqlite")
    with open_session(session_path) as session:
        return {s.label: {k: s.mean[k] for k, _ in METRICS} for s in session.summaries()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", nargs="?", default="experiments/slots-1-2-4.toml")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, help="override [server] threads")
    args = parser.parse_args()
    results: dict[str, list[dict[str, dict[str, float]]]] = {"headless": [], "window": []}
    with tempfile.TemporaryDirectory(prefix="gui-vs-headless-") as tmp:
        experiment = args.experiment
        if args.threads is not None:
            loaded = load_experiment(experiment)
            server = {**loaded.server, "threads": args.threads}
            experiment = str(Path(tmp) / Path(experiment).name)
            Path(experiment).write_text(
                experiment_to_toml(loaded.name, loaded.description, server, loaded.workload)
            )
        for round_ in range(args.rounds):
            for mode in ("headless", "window") if round_ % 2 == 0 else ("window", "headless"):
                out = Path(tmp) / f"{mode}-{round_}"
                results[mode].append(run_once(mode, experiment, out))
                print(f"round {round_ + 1}: {mode} done", flush=True)
    labels = list(results["headless"][0])
    threads = f", threads = {args.threads}" if args.threads is not None else ""
    print(f"\n{args.experiment}{threads}, {args.rounds} rounds each, alternating\n")
    print(
        f"{'config':<10} {'metric':<14} {'headless':>10} {'spread':>8} {'window':>10} "
        f"{'window/headless':>16}"
    )
    for label in labels:
        for key, name in METRICS:
            head = [r[label][key] for r in results["headless"]]
            win = [r[label][key] for r in results["window"]]
            mean_h, mean_w = statistics.fmean(head), statistics.fmean(win)
            spread = (statistics.stdev(head) / mean_h) if len(head) > 1 else float("nan")
            print(
                f"{label:<10} {name:<14} {mean_h:>10.3f} {spread:>7.1%} {mean_w:>10.3f} "
                f"{mean_w / mean_h:>16.3f}"
            )


if __name__ == "__main__":
    main()
