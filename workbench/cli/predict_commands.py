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

from workbench.cli.calibrate_commands import probe_now, save_and_say
from workbench.cli.paths import session_file
from workbench.cli.run_commands import (
    add_setting_flags,
    experiment_file,
    experiment_of,
    resumed_experiment,
)
from workbench.cli.tables import add_table_flags, against_table, results_table
from workbench.engine.analysis.export import write_concurrency_csv
from workbench.engine.base.errors import ImportFileError, WorkbenchError
from workbench.engine.config.experiment import RunConfig
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.measure.prompts import load_prompts
from workbench.engine.models.model_file import resolve_model
from workbench.engine.predict.calibration import (
    PROBE,
    Calibration,
    coverage,
    load,
    machine_identity,
)
from workbench.engine.predict.costs import StepCosts
from workbench.engine.predict.describe import describe, doubts
from workbench.engine.predict.probe import LIMIT_S
from workbench.engine.predict.run_prediction import Wanted
from workbench.engine.predict.sweep import (
    PredictedConfig,
    chunk_note,
    predict_configs,
    race_note,
    ubatch_note,
)
from workbench.engine.server.discovery import find_server_binary
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
        help=f"calibrate now (at most {LIMIT_S:g} s on the real server for each) where no "
        "stored calibration holds for this machine, model, build and a configuration's "
        "settings",
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
    configs = experiment.configs()
    specs = {c.workload.prompts for c in configs}
    if len(specs) > 1:
        raise WorkbenchError("a sweep over [workload] prompts is not supported")
    prompts = load_prompts(specs.pop(), base_dir)
    files: dict[int, str] = {}
    calibrations = _calibrations(args, configs, base_dir, console, files)

    def costs_of(config: RunConfig) -> tuple[StepCosts, int]:
        calibration = calibrations[config.index]
        return calibration.costs, calibration.template_tokens or 0

    predicted = []
    chats = {index: calibration.chat for index, calibration in calibrations.items()}
    for result in predict_configs(configs, costs_of, prompts, base_dir, lambda c: chats[c.index]):
        if isinstance(result, WorkbenchError):
            raise result
        predicted.append(result)
    doubtful = _describe(predicted, calibrations, files, console)
    summaries = [p.summary for p in predicted]
    title = "Predicted by the scheduler model (nothing measured)"
    if doubtful:
        title += ", from a doubtful calibration (the warning above)"
    console.print(results_table(summaries, title, args.results_columns))
    notes = [note(p) for p in predicted for note in (race_note, chunk_note)]
    notes += [ubatch_note(p, calibrations[p.config.index].costs) for p in predicted]
    for note in filter(None, notes):
        console.print(f"note: {escape(note)}")
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


def _describe(
    predicted: list[PredictedConfig],
    calibrations: dict[int, Calibration],
    files: dict[int, str],
    console: Console,
) -> bool:
    """Each calibration the prediction uses, in plain words with its file and why that
    one, named by its configurations where the sweep uses more than one; then, as a
    warning, what makes it doubtful for what these configurations ask of it (``doubts``).
    True when one is."""
    used: dict[int, list[PredictedConfig]] = {}
    for p in predicted:
        used.setdefault(id(calibrations[p.config.index]), []).append(p)
    doubtful = False
    for members in used.values():
        calibration = calibrations[members[0].config.index]
        if len(used) > 1:
            console.print(f"calibration of {escape(', '.join(m.config.label for m in members))}:")
        console.print(f"calibration: {escape(files[members[0].config.index])}")
        for line in describe(calibration):
            console.print(f"calibration: {escape(line)}")
        if calibration.template_tokens is None:
            console.print(
                "note: the calibration did not measure the chat template: prompts as written "
                "are counted without it"
            )
        asked = coverage(r for m in members for r in m.records)
        for doubt in doubts(calibration, asked):
            doubtful = True
            console.print(f"warning: the calibration is doubtful: {escape(doubt.line())}")
    return doubtful


def _calibrations(
    args: argparse.Namespace,
    configs: list[RunConfig],
    base_dir: Path | None,
    console: Console,
    files: dict[int, str],
) -> dict[int, Calibration]:
    """Each configuration's calibration, by its index: the file given (for a sweep that
    holds one calibration's settings throughout), or the stored one that holds for its own
    model and settings on this machine (``Wanted``, as a run finds its prediction's: the
    probe's before a session's fit), each one missing made now with ``--probe``; ``files``
    gets each one's file and why that one."""
    binary = find_server_binary(args.server_bin).path
    hardware = fingerprint(binary)
    models = {m: resolve_model(m, base_dir) for m in dict.fromkeys(c.server.model for c in configs)}
    wanted = {c.index: Wanted.of(c, hardware, models[c.server.model]) for c in configs}
    if args.calibration:
        if len({w.key for w in wanted.values()}) > 1:
            raise WorkbenchError(
                "--calibration holds one model and settings: this sweep changes the model, "
                "threads, -ub, KV types or flash attention; leave it out to use each "
                "configuration's stored calibration"
            )
        try:
            given = load(Path(args.calibration))
        except ImportFileError as exc:
            raise WorkbenchError(f"--calibration: {exc}") from None
        machine = machine_identity(hardware)
        if given.machine != machine:
            raise WorkbenchError(
                f"--calibration was made on {given.machine}, not this machine ({machine}): "
                "a machine's costs say nothing of another's; calibrate here"
            )
        files.update({c.index: f"{args.calibration} (given with --calibration)" for c in configs})
        return {c.index: given for c in configs}
    found: dict[Any, tuple[Path, Calibration] | None] = {}
    for config in configs:
        want = wanted[config.index]
        if want.key not in found:
            found[want.key] = want.stored_file()
    lacking = [c for c in configs if found[wanted[c.index].key] is None]
    if lacking and not args.probe:
        named = "; ".join(dict.fromkeys(wanted[c.index].missing(c.label) for c in lacking))
        why = "; ".join(dict.fromkeys(r for c in lacking for r in wanted[c.index].refused()))
        raise WorkbenchError(
            f"{named} on this machine"
            + (f" (refused: {why})" if why else "")
            + ": run `workbench calibrate` with those settings, or `workbench predict --probe`"
        )
    for config in lacking:
        want = wanted[config.index]
        if found[want.key] is not None:  # probed for an earlier configuration
            continue
        console.print(f"{escape(config.label)}: no stored calibration for {want.settings_text()}")
        calibration = probe_now(binary, models[config.server.model], config.server, console)
        found[want.key] = (save_and_say(calibration, console), calibration)
    chosen = {c.index: found[wanted[c.index].key] for c in configs}
    for index, pair in chosen.items():
        if pair is not None:
            path, calibration = pair
            files[index] = f"{path} ({_why_this_one(calibration)})"
    return {index: pair[1] for index, pair in chosen.items() if pair is not None}


def _why_this_one(calibration: Calibration) -> str:
    if calibration.source == PROBE:
        return "the probe's: it measured each kind of cost over a range set for it"
    return "a session's fit: no probe's is stored for these settings"
