"""``workbench predict``: what an experiment would measure on this machine, before it runs:
each configuration through the scheduler model on this machine's calibrated costs, printed
with the results table's columns (and ``--csv`` with ``concurrency.csv``'s). Nothing is
measured but the calibration itself, and only with ``--probe``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from workbench.cli.calibrate_commands import describe, probe_now
from workbench.cli.paths import session_file
from workbench.cli.run_commands import (
    add_setting_flags,
    experiment_file,
    experiment_of,
    resumed_experiment,
)
from workbench.cli.tables import add_table_flags, results_table
from workbench.engine.analysis.export import write_concurrency_csv
from workbench.engine.base.errors import ImportFileError, WorkbenchError
from workbench.engine.config.experiment import Experiment
from workbench.engine.figures.metrics import figure
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.measure.prompts import load_prompts
from workbench.engine.predict.calibration import (
    Calibration,
    find,
    held_settings,
    load,
    machine_identity,
    model_identity,
    save,
)
from workbench.engine.predict.probe import LIMIT_S
from workbench.engine.predict.sweep import COMPARED, predict_experiment, prediction_error
from workbench.engine.server.discovery import find_server_binary, resolve_model
from workbench.engine.store import open_session


def add_predict(sub: Any) -> None:
    parser = sub.add_parser(
        "predict",
        help="predict an experiment's results on this machine before running it",
        description="Predict each configuration's figures from this machine's calibration "
        "(`workbench calibrate`) and a model of llama-server's scheduling; nothing is run.",
    )
    parser.add_argument(
        "experiment", nargs="?", type=experiment_file, help="experiment TOML file; optional"
    )
    parser.add_argument("--model", help="GGUF model file (overrides [server] model)")
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument(
        "--calibration", metavar="FILE", help="a calibration file (default: the stored one)"
    )
    chosen.add_argument(
        "--probe",
        action="store_true",
        help=f"calibrate now (at most {LIMIT_S:g} s on the real server) where no stored "
        "calibration holds for this machine, model, build and settings",
    )
    parser.add_argument("--csv", metavar="FILE", help="write the prediction as concurrency.csv")
    parser.add_argument(
        "--against",
        metavar="SESSION",
        type=session_file,
        help="predict the experiment a recorded session ran, and print each figure's error "
        "against what it measured",
    )
    parser.add_argument("--server-bin", help="llama-server binary to use (for --probe)")
    add_table_flags(parser)
    add_setting_flags(parser)
    parser.set_defaults(handler=cmd_predict, resume=None)


def cmd_predict(args: argparse.Namespace, console: Console) -> int:
    if args.against and args.experiment:
        raise WorkbenchError("--against predicts the session's own experiment: give no file")
    experiment = resumed_experiment(Path(args.against), args.model) if args.against else None
    experiment = experiment or experiment_of(args)
    base_dir = Path(experiment.path).parent if experiment.path else None
    calibration = _calibration(args, experiment, base_dir, console)
    for line in describe(calibration):
        console.print(f"calibration: {escape(line)}")
    template = calibration.template_tokens
    if template is None:
        console.print(
            "note: the calibration did not measure the chat template: prompts as written are "
            "counted without it"
        )
    specs = {c.workload.prompts for c in experiment.configs()}
    if len(specs) > 1:
        raise WorkbenchError("a sweep over [workload] prompts is not supported")
    prompts = load_prompts(specs.pop(), base_dir)
    predicted = predict_experiment(experiment, calibration.costs, prompts, template or 0, base_dir)
    summaries = [p.summary for p in predicted]
    title = "Predicted by the scheduler model (nothing measured)"
    console.print(results_table(summaries, title, args.results_columns))
    seconds = sum(p.requests_s for p in predicted)
    console.print(
        f"predicted time: about {seconds:,.0f} s of requests for {len(predicted)} "
        "configurations, each server's start on top"
    )
    if args.csv:
        write_concurrency_csv(Path(args.csv), summaries)
        console.print(f"table: {escape(args.csv)}")
    if args.against:
        with open_session(Path(args.against)) as session:
            console.print(against_table(summaries, session.summaries()))
    return 0


def against_table(predicted: list[ConfigSummary], measured: list[ConfigSummary]) -> Table:
    """Each configuration's compared figures, predicted / measured and the error, for the
    configurations both have (by their place in the sweep)."""
    table = Table(title="Predicted / measured (error)")
    table.add_column("config")
    figures = [figure(key) for key in COMPARED]
    for f in figures:
        table.add_column(f.header, justify="right")
    seen = {s.index: s for s in measured}
    for p in predicted:
        m = seen.get(p.index)
        if m is None:
            continue
        cells = []
        for f in figures:
            error = prediction_error(p, m, f.key)
            shown = f"{f.cell(p)} / {f.cell(m)}"
            cells.append(shown if error is None else f"{shown} ({error:+.0%})")
        table.add_row(escape(p.label), *cells)
    return table


def _calibration(
    args: argparse.Namespace, experiment: Experiment, base_dir: Path | None, console: Console
) -> Calibration:
    """The calibration every configuration is predicted with: the file given, or the stored
    one for this machine, model, build and settings (made now with ``--probe``). One for the
    whole sweep: a sweep over the settings a calibration holds is not predicted yet."""
    configs = experiment.configs()
    held = {tuple(sorted(held_settings(c.server).items())) for c in configs}
    models = {c.server.model for c in configs}
    if len(held) > 1 or len(models) > 1:
        raise WorkbenchError(
            "predict needs one calibration for the whole sweep: sweep slots, context or the "
            "workload, not the model, threads, batch sizes, KV types or flash attention"
        )
    first = configs[0]
    binary = find_server_binary(args.server_bin).path
    hardware = fingerprint(binary)
    machine = machine_identity(hardware)
    model = resolve_model(first.server.model, base_dir)
    identity = model_identity(model)
    settings = held_settings(first.server)
    if args.calibration:
        try:
            given = load(Path(args.calibration))
        except ImportFileError as exc:
            raise WorkbenchError(f"--calibration: {exc}") from None
        if given.machine != machine:
            raise WorkbenchError(
                f"--calibration was made on {given.machine}, not this machine ({machine}): "
                "a machine's costs say nothing of another's; calibrate here"
            )
        return given
    stored = find(machine, identity, hardware.llama_server_build, settings)
    if stored is not None:
        return stored
    if not args.probe:
        raise WorkbenchError(
            f"no calibration holds for {model.name} on this machine with these settings: run "
            "`workbench calibrate` with the same settings, or `workbench predict --probe`"
        )
    calibration = probe_now(binary, model, first.server, console)
    console.print(f"stored in {escape(str(save(calibration)))}")
    return calibration
