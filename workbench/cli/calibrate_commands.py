"""``workbench calibrate``: what one step of the server's work costs on this machine, for a
model and the settings that change it, measured on the real server (``predict.probe``) or
fitted from a session already recorded (``--from``), and stored for the predictions."""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from workbench.cli.paths import SESSION_HELP, out_folder, session_file
from workbench.cli.run_commands import add_setting_flags, experiment_of
from workbench.engine.base.errors import ModelFileError, WorkbenchError
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.models.gguf_header import loadable_model
from workbench.engine.models.model_file import resolve_model
from workbench.engine.models.sliding_window import DEFAULT_UBATCH, micro_batch
from workbench.engine.predict.calibration import (
    PROBE,
    Calibration,
    CalibrationError,
    fit_costs,
    held_settings,
    machine_identity,
    model_identity,
    now,
    path_of,
    replaced_at,
    save,
    stored,
    usable,
)
from workbench.engine.predict.describe import describe, doubts
from workbench.engine.predict.probe import LIMIT_S, probe
from workbench.engine.server.discovery import find_server_binary
from workbench.engine.store import open_session


def add_calibrate(sub: Any) -> None:
    parser = sub.add_parser(
        "calibrate",
        help="measure what a step of the server's work costs on this machine (about a minute)",
    )
    parser.add_argument("--model", help="GGUF model file (default: the default experiment's)")
    parser.add_argument(
        "--from",
        dest="session",
        metavar="SESSION",
        type=session_file,
        help=f"fit from a recorded session instead of measuring: {SESSION_HELP}",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=out_folder,
        help="folder to store the calibration in (default: the workbench's own)",
    )
    parser.add_argument("--server-bin", help="llama-server binary to use")
    add_setting_flags(parser, ("server",))
    parser.set_defaults(handler=cmd_calibrate, experiment=None, resume=None)


def cmd_calibrate(args: argparse.Namespace, console: Console) -> int:
    out = Path(args.out) if args.out else None
    calibration = _from_session(Path(args.session)) if args.session else _probed(args, console)
    earlier = replaced_at(path_of(calibration, out))
    path = save(calibration, out)
    for line in describe(calibration):
        console.print(escape(line))
    for doubt in doubts(calibration):
        console.print(f"warning: {escape(doubt.line())}")
    console.print(f"stored in {escape(str(path))}" + (f" ({escape(earlier)})" if earlier else ""))
    console.print(escape(used_line(calibration, out)))
    return 0


def save_and_say(calibration: Calibration, console: Console) -> Path:
    """Store a probe's calibration where ``predict`` finds it, saying what it replaces."""
    earlier = replaced_at(path_of(calibration))
    path = save(calibration)
    console.print(f"stored in {escape(str(path))}" + (f" ({escape(earlier)})" if earlier else ""))
    return path


def used_line(calibration: Calibration, folder: Path | None = None) -> str:
    """Which stored file ``predict`` (and a run's prediction) uses for this calibration's
    machine, model, build and settings, and why."""
    c = calibration
    found = stored(c.machine, c.model, c.build, c.settings, folder)
    if found is None:
        return "predict uses none of these files: none loads"
    path, used = found
    if used.source == PROBE:
        why = "the probe's, which measured each kind of cost over a range set for it"
        if c.source != PROBE:
            why += f"; `predict --calibration {path_of(c, folder)}` uses this fit"
    else:
        why = "a session's fit, as no probe's is stored (`workbench calibrate` makes one)"
    return f"predict uses {path.name}: {why}"


def _whole_micro_batch(settings: ServerSettings) -> bool:
    """Whether a server ran at its ``-ub`` (a ``-b`` below it cuts the micro-batch down:
    its steps cost what another ``-ub``'s do, so they fit no calibration of this one)."""
    wanted = settings.ubatch_size or DEFAULT_UBATCH
    return micro_batch(settings.batch_size, settings.ubatch_size) == wanted


def _from_session(path: Path) -> Calibration:
    """A calibration fitted from the session's first configuration that has timings to fit
    and ran at its ``-ub`` (``_whole_micro_batch``), with every other one at its held
    settings, ``-b`` and ``-ub`` (a sweep's others cost otherwise, or take other chunks or
    micro-batches). It measures no other ``-ub``: it holds at its own alone."""
    with open_session(path) as session:
        timed = [c for c in session.configs if usable(session.records(c.index))]
        if not timed:
            raise CalibrationError(
                f"{path.name} has no request with the server's timings to fit (an imported "
                "session, or a server that does not send llama.cpp's timings)"
            )
        whole = [c for c in timed if _whole_micro_batch(c.run_config.server)]
        if not whole:
            raise CalibrationError(
                f"{path.name} ran every configuration at a -b below its -ub, which cuts "
                "the micro-batch down: its steps fit no calibration (`workbench calibrate` "
                "probes at the server's own -b)"
            )
        config = whole[0]
        settings = held_settings(config.server)
        server = config.run_config.server
        records = [
            r
            for c in whole
            if held_settings(c.server) == settings
            and (c.run_config.server.batch_size, c.run_config.server.ubatch_size)
            == (server.batch_size, server.ubatch_size)
            for r in usable(session.records(c.index))
        ]
        fit = fit_costs(records, server.batch_size, server.ubatch_size)
        return Calibration(
            fit.costs,
            fit.quality,
            machine_identity(session.hardware),
            _model_named(config.run_config.server.model or "?"),
            session.hardware.llama_server_build,
            settings,
            now(),
            path.name,
            coverage=fit.coverage,
        )


def _model_named(model: str) -> str:
    """A session's model as a calibration names it: the file, where it is still here (a
    session names the path it was given, or ``default``), else the name it was given."""
    try:
        return model_identity(resolve_model(model))
    except ModelFileError:
        return Path(model).name


def _probed(args: argparse.Namespace, console: Console) -> Calibration:
    flags = any(v is not None for k, v in vars(args).items() if k.startswith("setting_"))
    experiment = experiment_of(args) if flags or args.model else parse_experiment("")
    configs = experiment.configs()
    if len(configs) != 1:
        raise WorkbenchError("calibrate holds one value of each setting: give no comma list")
    settings = configs[0].server
    model = loadable_model(settings.model)
    return probe_now(find_server_binary(args.server_bin).path, model, settings, console)


def probe_now(binary: str, model: Path, settings: ServerSettings, console: Console) -> Calibration:
    """A probe of ``model`` with ``settings``, its phases said as they are measured, and
    what it left out (a probe cut short by its bound) on stderr."""
    console.print(f"calibrating {escape(model.name)}: at most {LIMIT_S:g} s of measuring")
    with tempfile.TemporaryDirectory(prefix="workbench-calibrate-") as folder:
        probed = asyncio.run(
            probe(binary, model, settings, Path(folder) / "server.log", say=console.print)
        )
    if probed.calibration.note:
        print(probed.calibration.note, file=sys.stderr)
    return probed.calibration
