"""The commands that run something: ``run`` (an experiment, headless) and ``gui`` (the window).

``run`` takes the experiment through the engine's ``RunLifecycle``, as the window's engine
process does; what is the terminal's own is the display (a live table on a terminal, plain
lines in a log), turning SIGTERM and SIGHUP into the Ctrl-C the lifecycle cancels on, and
the exit status.
"""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape

from workbench.cli.bounds import AT_OR_AFTER_START_S, FONT_PT, WINDOW_SIZE
from workbench.cli.exit_codes import (
    EXIT_CANCELLED,
    EXIT_CONFIG_FAILED,
    EXIT_ERROR,
    EXIT_REQUESTS_FAILED,
)
from workbench.cli.paths import experiment_file, out_folder, session_file
from workbench.cli.progress import ProgressState
from workbench.cli.tables import add_table_flags, event_line, results_table, run_line
from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.base.states import ConfigStatus, RunStatus
from workbench.engine.base.words import plural
from workbench.engine.config.experiment import (
    SETTINGS,
    Experiment,
    load_experiment,
    parse_experiment,
)
from workbench.engine.config.settings import Field, fields_of
from workbench.engine.events import Notice
from workbench.engine.run.lifecycle import STOP_SIGNALS, RunLifecycle
from workbench.engine.run.runner import ExperimentRunner, RunOptions, RunResult
from workbench.engine.store import open_session
from workbench.ui.theme.palette import DEFAULT_FONT_PT, THEMES

QUICK_NAME = "quick"
DEFAULT_EXPERIMENT = Path("experiments/slots-1-2-4.toml")  # the window's, as the app ships it


def add_run(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run an experiment file (or one made of flags) and save a session",
        description="Run an experiment file, or without one an experiment made of the "
        "setting flags below (e.g. `workbench run --slots 1,2,4 --requests 8`).",
    )
    run.add_argument(
        "experiment",
        nargs="?",
        type=experiment_file,
        help="experiment TOML file (see experiments/); optional",
    )
    run.add_argument(
        "--out", type=out_folder, default="results", help="output folder (default: results/)"
    )
    run.add_argument("--base-url", help="measure a server started elsewhere (external mode)")
    run.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="with --base-url: send the bearer token held in this environment variable "
        "(read at run time, never stored)",
    )
    run.add_argument("--server-bin", help="llama-server binary to use")
    run.add_argument("--model", help="GGUF model file (overrides [server] model)")
    run.add_argument("--quiet", action="store_true", help="no live progress, only the results")
    run.add_argument(
        "--resume",
        metavar="SESSION",
        type=session_file,
        help="go on with a session whose run did not finish, in the same file: its finished "
        "configurations are kept, the others run again",
    )
    add_table_flags(run)
    add_setting_flags(run)
    run.set_defaults(handler=cmd_run)


def _flag_fields() -> list[Field]:
    """The settings that get a flag: every one of the schema, less the model (``--model``
    above) and argument lists (not a comma list)."""
    return [f for cls in SETTINGS for f in fields_of(cls) if f.name != "model" and not f.is_args]


def add_setting_flags(
    parser: argparse.ArgumentParser, tables: tuple[str, ...] = ("server", "workload")
) -> None:
    """A flag for each setting of ``tables``."""
    group = parser.add_argument_group(
        "settings", "each replaces the experiment file's value; a comma list is a sweep axis"
    )
    for f in (f for f in _flag_fields() if f.table in tables):
        group.add_argument(
            f"--{f.name.replace('_', '-')}",
            dest=f"setting_{f.name}",
            metavar="V[,V...]",
            help=f"[{f.table}] {f.setting.label}",
        )


def flag_value(f: Field, text: str) -> Any:
    """A flag's text as the file would hold it: one value, or a list (a sweep)."""
    flag = f"--{f.name.replace('_', '-')}"
    values = []
    for part in (p.strip() for p in text.split(",")):
        if f.setting.follows is not None and part == f.setting.follows:
            values.append(part)
        elif f.kind is bool:
            if part.lower() not in BOOL_WORDS:
                raise ExperimentError(f"{flag}: '{part}' is not on or off")
            values.append(BOOL_WORDS[part.lower()])
        elif f.kind in (int, float):
            try:
                values.append(f.kind(part))
            except ValueError:
                noun = "a whole number" if f.kind is int else "a number"
                raise ExperimentError(f"{flag}: '{part}' is not {noun}") from None
        else:
            values.append(part)
    return values[0] if len(values) == 1 else values


BOOL_WORDS = {"on": True, "true": True, "yes": True, "off": False, "false": False, "no": False}


def experiment_of(args: argparse.Namespace) -> Experiment:
    """The experiment file with the flags' values, or without a file, one made of them."""
    chosen: dict[str, dict[str, Any]] = {"server": {}, "workload": {}}
    for f in _flag_fields():
        text = getattr(args, f"setting_{f.name}", None)
        if text is not None:
            chosen[f.table][f.name] = flag_value(f, text)
    if args.resume:
        if args.experiment or any(chosen.values()):
            raise WorkbenchError(
                "--resume runs the session's own experiment: give no file or settings"
            )
        return resumed_experiment(Path(args.resume), args.model)
    if args.model:
        chosen["server"]["model"] = args.model
    if args.experiment:
        experiment = load_experiment(args.experiment)
    elif not any(chosen.values()):
        raise WorkbenchError(
            "give an experiment file, or settings as flags "
            "(e.g. workbench run --slots 1,2,4 --requests 8 --max-tokens 64)"
        )
    else:
        experiment = parse_experiment("", name_hint=QUICK_NAME)
    if not any(chosen.values()):
        return experiment
    return experiment.with_overrides(chosen["server"], chosen["workload"])


def add_gui(sub: Any) -> None:
    gui = sub.add_parser("gui", help="the desktop workbench")
    add_gui_arguments(gui)
    gui.set_defaults(handler=cmd_gui)


def add_gui_arguments(parser: argparse.ArgumentParser) -> None:
    """``workbench gui``'s flags (the window reads them as ``run_gui``'s ``args``)."""
    parser.add_argument(
        "--experiment",
        default=str(DEFAULT_EXPERIMENT),
        help="experiment file to load (default: experiments/slots-1-2-4.toml)",
    )
    parser.add_argument("--out", default="results", help="output folder (default: results/)")
    parser.add_argument("--session", help="open a recorded session (to look at or replay)")
    parser.add_argument(
        "--replay",
        type=int,
        choices=(1, 2, 5, 10),
        help="with --session: play it back at this speed at start",
    )
    parser.add_argument("--base-url", help="start in external mode against this server")
    parser.add_argument(
        "--api-key-env", metavar="NAME", help="environment variable with the server's API key"
    )
    parser.add_argument("--server-bin", help="llama-server binary to use")
    parser.add_argument("--theme", choices=THEMES, default="dark")
    parser.add_argument(
        "--font-size",
        type=FONT_PT,
        default=DEFAULT_FONT_PT,
        help=f"base font size in points, {FONT_PT.low:g} to {FONT_PT.high:g}",
    )
    parser.add_argument(
        "--size",
        type=WINDOW_SIZE,
        default="1600x950",
        help=f"window size WIDTHxHEIGHT (at least {WINDOW_SIZE.min_width}x"
        f"{WINDOW_SIZE.min_height})",
    )
    parser.add_argument("--autorun", action="store_true", help="press Run at start")
    parser.add_argument(
        "--present",
        action="store_true",
        help="start in presentation mode: full screen, large fonts, captions (F5 leaves it)",
    )
    parser.add_argument("--screenshot", help="save a PNG of the window when the run ends")
    parser.add_argument(
        "--screenshot-at",
        type=AT_OR_AFTER_START_S,
        metavar="SECONDS",
        help="with --session: take the screenshot at this time of the session instead "
        "(played up to it with --replay, else shown as it stood then)",
    )
    parser.add_argument("--quit-when-done", action="store_true", help="exit when the run ends")


def cmd_gui(args: argparse.Namespace, console: Console) -> int:
    from workbench.ui.app import run_gui  # Qt only for the window

    return run_gui(args)


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    def on_signal(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # SIGTERM and SIGHUP (a closed terminal) end the run like Ctrl-C, from the start: a
    # signal while preparing must say so, not end the process in silence.
    previous = {sig: signal.signal(sig, on_signal) for sig in STOP_SIGNALS}
    try:
        return _run(args, console)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def resumed_experiment(path: Path, model: str | None) -> Experiment:
    """The experiment a session ran, from the text it stored. A path in a session is never
    acted on: prompts from a file cannot be resumed, and a model given by path must be given
    again with --model."""
    with open_session(path) as session:
        text, name = session.meta["experiment_toml"], session.meta["name"]
    experiment = parse_experiment(text, name_hint=name, path=f"{path} (stored experiment)")
    if any(c.workload.prompts != "builtin" for c in experiment.configs()):
        raise WorkbenchError(
            f"{path} sent prompts from a file named in the session; a path in a session is "
            "never opened: run the experiment file again instead"
        )
    models = {c.server.model for c in experiment.configs()} - {"default"}
    if models and model is None:
        raise WorkbenchError(
            f"{path} ran the model {sorted(models)[0]}: a path in a session is never opened, "
            "so give the model again with --model"
        )
    return experiment.with_overrides({"model": model}) if model else experiment


def _run(args: argparse.Namespace, console: Console) -> int:
    experiment = experiment_of(args)
    if args.api_key_env and not args.base_url:
        raise WorkbenchError("--api-key-env is for an external server: give --base-url too")
    resume = Path(args.resume) if args.resume else None
    options = RunOptions(
        resume.parent if resume else Path(args.out),
        base_url=args.base_url,
        server_bin=args.server_bin,
        api_key_env=args.api_key_env,
        resume=resume,
    )
    runner = ExperimentRunner(experiment, options)
    lifecycle = RunLifecycle(
        runner,
        while_stopping=lambda: console.print(
            "[yellow]already stopping: the session is being closed[/yellow]"
        ),
    )
    lifecycle.prepare()
    kept = runner.summaries  # what a resumed session finished already
    state = ProgressState(columns=args.results_columns, summaries=list(kept))
    console.print(
        run_line(experiment.name, len(runner.configs) + len(kept), len(kept), runner.session_path),
        highlight=False,
        soft_wrap=True,
    )
    show_live = console.is_terminal and not args.quiet
    lifecycle.start()
    try:
        if show_live:
            with Live(state.render(), console=console, auto_refresh=False, transient=True) as live:
                _follow(lifecycle, state, console, live)
        else:
            _follow(lifecycle, state, console, None)
    finally:
        result = lifecycle.finish()
    console.print(
        results_table(result.summaries, title=experiment.name, columns=args.results_columns)
    )
    tables = result.tables
    assert tables is not None  # the lifecycle wrote them
    if tables.error is not None:
        raise WorkbenchError(tables.error)
    console.print(
        f"session: {result.session_path}\ntables: {tables.concurrency}, {tables.requests}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    return _exit_status(result, console)


def _exit_status(result: RunResult, console: Console) -> int:
    """0 only when every request of every configuration succeeded, so a script can tell."""
    if result.status == RunStatus.CANCELLED:
        console.print("[yellow]run cancelled; the session is marked cancelled[/yellow]")
        return EXIT_CANCELLED
    if result.status == RunStatus.FAILED:
        console.print(f"[red]run failed: {escape(result.error or '')}[/red]", highlight=False)
        return EXIT_ERROR
    if any(s.status != ConfigStatus.OK for s in result.summaries):
        return EXIT_CONFIG_FAILED
    failed = sum(s.value("failed") or 0 for s in result.summaries)
    if failed:
        console.print(f"[red]{plural(failed, 'request')} failed[/red]", highlight=False)
        return EXIT_REQUESTS_FAILED
    return 0


def _follow(
    lifecycle: RunLifecycle, state: ProgressState, console: Console, live: Live | None
) -> None:
    """Fold events into the display until the run ends; Ctrl-C cancels the run."""

    def show(events: list[Any]) -> None:
        now = time.monotonic()
        for event in events:
            state.apply(event, now)
            line = event_line(event)
            if line and (live is None or isinstance(event, Notice)):
                console.print(line, highlight=False)
        if live is not None:
            live.update(state.render(now), refresh=True)

    def say_stopping() -> None:
        console.print(
            "[yellow]stopping: cancelling streams and servers; "
            "the session keeps what finished[/yellow]"
        )

    lifecycle.follow(show, on_interrupt=say_stopping)
