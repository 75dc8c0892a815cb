"""Does a model of random weights time like the real one? The GPU check runs a model built
from a template (bench/gpu/random_model.py) because the real one does not fit the carry.

Builds the random twin of the default model (SmolLM2-135M-Instruct Q4_1), then runs the same
short lab (slots 1 and 2, 8 concurrent requests of 64 tokens, ignore_eos) on each model in
turn, `--rounds` times (alternating, so that a busy machine's drift hits both), and prints
total time, aggregate tok/s, TTFT p50 and per-request decode per slots, each model's best run
(on a shared machine the least disturbed one: the least time, the most tok/s) and the ratio
random / real.

  .venv/bin/python bench/gpu/random_vs_real.py [--rounds 2] [--server-bin PATH]

Goal: every ratio within 0.9..1.1 (same shapes and types: same work per token). Other work on
the machine moves single runs by far more than that: take more rounds there.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

from workbench.engine.models.model_file import default_model_path

HERE = Path(__file__).resolve().parent
FIGURES = ("total_s", "agg_tok_s", "ttft_p50_s", "decode_tok_s")
LOWER_IS_BETTER = {"total_s", "ttft_p50_s"}
LAB = [
    "--slots",
    "1,2",
    "--requests",
    "8",
    "--concurrency",
    "8",
    "--max-tokens",
    "64",
    "--ignore-eos",
    "true",
    "--temperature",
    "0",
    "--warmup",
    "1",
    "--ctx",
    "4096",
]


def run_lab(model: Path, out: Path, server_bin: str | None) -> dict[str, dict[str, float]]:
    """One run of the short lab: each configuration's figures from its concurrency.csv."""
    cmd = [
        sys.executable,
        "-m",
        "workbench",
        "run",
        *LAB,
        "--model",
        str(model),
        "--out",
        str(out),
        "--quiet",
    ]
    if server_bin:
        cmd += ["--server-bin", server_bin]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with (out / "concurrency.csv").open() as f:
        return {row["slots"]: {k: float(row[k]) for k in FIGURES} for row in csv.DictReader(f)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--server-bin")
    args = parser.parse_args()
    real = default_model_path()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        template, random = work / "model.template.json.gz", work / "random.gguf"
        for mode, a, b in (("template", real, template), ("build", template, random)):
            subprocess.run(
                [sys.executable, str(HERE / "random_model.py"), mode, str(a), str(b)], check=True
            )
        runs: dict[str, list[dict[str, dict[str, float]]]] = {"real": [], "random": []}
        for r in range(args.rounds):
            for name, model in (("real", real), ("random", random))[:: 1 if r % 2 == 0 else -1]:
                runs[name].append(run_lab(model, work / f"{name}-{r}", args.server_bin))
    print(
        f"{'slots':>5} {'figure':<13} {'real':>9} {'random':>9} {'ratio':>6}"
        f"  (best of {args.rounds})"
    )
    worst = 0.0
    for slots in runs["real"][0]:
        for fig in FIGURES:
            best = min if fig in LOWER_IS_BETTER else max
            a = best(run[slots][fig] for run in runs["real"])
            b = best(run[slots][fig] for run in runs["random"])
            ratio = b / a if a else float("nan")
            worst = max(worst, abs(ratio - 1))
            print(f"{slots:>5} {fig:<13} {a:>9.3f} {b:>9.3f} {ratio:>6.2f}")
    print(f"largest departure from 1: {worst:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
