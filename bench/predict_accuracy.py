"""How close the scheduler model's predictions come to measured runs on this machine.

One probe calibrates the machine (``predict.probe``, at most 60 s); then each configuration
of a sweep (slots 1, 2, 4 and 8 x a short and a long prompt, a burst and a Poisson arrival)
and the mixed experiment (``experiments/long-prompt-stalls.toml``'s traffic at each
``--mixed-batch`` value of ``-b``, then at ``-b`` 2048 and each ``--mixed-ubatch`` value of
``-ub``: three chats streaming while a 2,924-token document arrives) is predicted from that
calibration and measured on the real llama-server, side by side in one run, and the errors
are printed as a Markdown table with their medians (the longest stall as well). The probe
runs at the server's own ``-b`` and ``-ub``, so the mixed rows at other values say how far
one calibration predicts another chunk or micro-batch size:

  .venv/bin/python bench/predict_accuracy.py [--slots 1,2,4,8] [--requests 8]
      [--mixed-batch 2048,256,64] [--mixed-ubatch 512,128,64] [--out DIR]

Error is (predicted - measured) / measured. The machine is shared and its load drifts, so a
row's error is as much the drift between the probe and that run as the model's. Where the
model says requests sent together may start in one step or one after the other (a race of
the server's first milliseconds, ``sweep.race_note``), the run is judged against the
reading its own first step took (``sweep.started_together``) and its row says so.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from workbench.engine.config.experiment import parse_experiment
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.models.model_file import resolve_model
from workbench.engine.predict.probe import probe
from workbench.engine.predict.sweep import (
    COMPARED,
    predict_experiment,
    prediction_error,
    race_note,
    started_together,
)
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.server.discovery import find_server_binary
from workbench.engine.store import open_session

WORKLOADS = {
    "short burst": "input_tokens = 64\narrival = 'burst'\n",
    "long burst": "input_tokens = 768\narrival = 'burst'\n",
    "short poisson": "input_tokens = 64\narrival = 'poisson'\nrate = 2.0\n",
}


MIXED = "mixed (long-prompt stalls)"
MIXED_UBATCH = "mixed at -b 2048"
TRACE = Path(__file__).resolve().parent.parent / "resources/traces/long-prompt-stalls.jsonl"
JUDGED = (*COMPARED, "stall_max_s")


def mixed_text(sweep: str) -> str:
    return (
        "name = 'accuracy'\n[server]\nslots = 4\nctx = 16384\ncache_ram_mib = 0\n"
        f"{sweep}\n"
        f"[workload]\narrival = 'trace'\ntrace = '{TRACE}'\nignore_eos = true\n"
        "temperature = 0.0\nwarmup = 0\n"
    )


def experiment_text(slots: str, workload: str, requests: int) -> str:
    return (
        f"name = 'accuracy'\n[server]\nslots = [{slots}]\nctx = 8192\ncache_ram_mib = 0\n"
        f"[workload]\nrequests = {requests}\nmax_tokens = 32\nwarmup = 1\n{workload}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", default="1,2,4,8")
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--mixed-batch", default="2048,256,64", help="-b of the mixed runs")
    parser.add_argument("--mixed-ubatch", default="512,128,64", help="-ub of the mixed runs")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="predict-accuracy-"))
    binary = find_server_binary(None).path
    model = resolve_model("default")
    first = parse_experiment(experiment_text("1", "", 1)).configs()[0].server
    probed = asyncio.run(probe(binary, model, first, out / "probe.log"))
    calibration = probed.calibration
    print(f"calibrated in {probed.measured_s:.0f} s: {calibration.costs}")
    rows: list[tuple[str, list[float | None]]] = []
    texts = {n: experiment_text(args.slots, w, args.requests) for n, w in WORKLOADS.items()}
    texts[MIXED] = mixed_text(f"batch_size = [{args.mixed_batch}]")
    texts[MIXED_UBATCH] = mixed_text(f"batch_size = 2048\nubatch_size = [{args.mixed_ubatch}]")
    for name, text in texts.items():
        experiment = parse_experiment(text)
        predicted = predict_experiment(
            experiment, calibration.costs, PromptSource(), calibration.template_tokens or 0
        )
        measured = run_experiment(experiment, RunOptions(out / name.replace(" ", "-")))
        with open_session(measured.session_path) as session:
            readings = [started_together(session.records(c.index)) for c in session.configs]
        for p, m, together in zip(predicted, measured.summaries, readings, strict=True):
            apart = together is False and race_note(p) is not None
            judged = p.staggered if apart and p.staggered else p.summary
            errors = [prediction_error(judged, m, key) for key in JUDGED]
            label = f"{name} {p.summary.label}" + (" (started apart)" if apart else "")
            rows.append((label, errors))
            print(f"{label}: " + ", ".join(
                f"{k} {judged.value(k):.3f} vs {m.value(k):.3f}" for k in JUDGED
                if judged.value(k) is not None and m.value(k) is not None
            ))  # fmt: skip
    print("\n| configuration | " + " | ".join(JUDGED) + " |")
    print("|---" * (len(JUDGED) + 1) + "|")
    for label, errors in rows:
        cells = ["-" if e is None else f"{e:+.0%}" for e in errors]
        print(f"| {label} | " + " | ".join(cells) + " |")
    medians = []
    for k in range(len(JUDGED)):
        found = [abs(e[k]) for _, e in rows if e[k] is not None]
        medians.append(f"{statistics.median(found):.0%}" if found else "-")
    print("| median of the absolute errors | " + " | ".join(medians) + " |")
    print(f"\nsessions and the probe's log in {out}")


if __name__ == "__main__":
    main()
