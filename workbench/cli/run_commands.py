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

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from workbench.cli.agent_commands import add_remote_command
from workbench.cli.bounds import (
    AT_OR_AFTER_START_S,
    FONT_PT,
    LARGE_SWEEP,
    LARGE_SWEEP_FLAG,
    WINDOW_SIZE,
    confirm_sweep,
)
from workbench.cli.exit_codes import (
    EXIT_CANCELLED,
    EXIT_CONFIG_FAILED,
    EXIT_ERROR,
    EXIT_REQUESTS_FAILED,
)
from workbench.cli.paths import experiment_file, out_folder, session_file
from workbench.cli.progress import ProgressState, live_rate_text
from workbench.cli.tables import add_table_flags, event_line, results_table, run_line
from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.base.escaping import printable
from workbench.engine.base.states import ConfigStatus, RunStatus
from workbench.engine.base.words import plural
from workbench.engine.config.experiment import (
    SETTINGS,
    Experiment,
    load_experiment,
    parse_experiment,
)
from workbench.engine.config.settings import Field, fields_of
from workbench.engine.events import Notice, Subscription
from workbench.engine.remote.host_check import facts_line
from workbench.engine.remote.hosts import check_host, host_folder, runner_for
from workbench.engine.remote.load_worker import load_workers
from workbench.engine.run.lifecycle import FOLLOW_INTERVAL_S, STOP_SIGNALS, RunLifecycle, Runner
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
    run.add_argument(
        "--model",
        dest="model_flags",
        metavar="[HOST=]PATH",
        action="append",
        default=[],
        help="GGUF model file (overrides [server] model); with --host, HOST=PATH gives one "
        "host's (a path on that host), PATH alone every host's",
    )
    # ``experiment_of`` reads ``model``: the one model every host runs, worked out from the
    # --model flags once the hosts are known (``_run``, ``run_on_hosts``).
    run.set_defaults(model=None)
    run.add_argument("--quiet", action="store_true", help="no live progress, only the results")
    run.add_argument(
        LARGE_SWEEP_FLAG,
        action="store_true",
        help=f"run a sweep of more than {LARGE_SWEEP} configurations (without it, such a sweep "
        "is refused with an estimate of how long it takes)",
    )
    run.add_argument(
        "--resume",
        metavar="SESSION",
        type=session_file,
        help="go on with a session whose run did not finish, in the same file: its finished "
        "configurations are kept, the others run again",
    )
    add_host_flags(run)
    add_table_flags(run)
    add_setting_flags(run)
    run.set_defaults(handler=cmd_run)


def add_host_flags(run: argparse.ArgumentParser) -> None:
    """``--host`` (again for each host) and the far side's command."""
    run.add_argument(
        "--host",
        dest="hosts",
        metavar="DEST",
        action="append",
        default=[],
        help="run on this host: an SSH destination (its `workbench agent` is started over "
        "SSH), or `local` for this machine; again for each host, all run at once",
    )
    run.add_argument(
        "--load-from",
        dest="load_from",
        metavar="DEST[,DEST...]",
        action="append",
        default=[],
        help="add a client worker on each of these machines (SSH destinations, through "
        "their agent) beside this machine's [workload] workers, for a server one client "
        "cannot saturate; the server must be reachable from them (mainly --base-url)",
    )
    add_remote_command(run)


def load_hosts(flags: list[str]) -> list[str]:
    """``--load-from`` flags (repeated, or comma-separated) as their hosts, in order."""
    hosts = [host.strip() for flag in flags for host in flag.split(",")]
    if any(not host for host in hosts):
        raise WorkbenchError("--load-from takes SSH destinations separated by commas")
    return hosts


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
    """A flag's text as the file would hold it: one value, or a list (a sweep), each part
    converted from text (``Field.from_text``) and validated as a file's is when the
    experiment is checked."""
    flag = f"--{f.name.replace('_', '-')}"
    values = []
    for part in text.split(","):
        try:
            values.append(f.from_text(part))
        except ValueError as exc:
            raise ExperimentError(f"{flag}: {exc}") from None
    return values[0] if len(values) == 1 else values


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
    parser.add_argument(
        "--host",
        dest="hosts",
        metavar="DEST",
        action="append",
        default=[],
        help="tick this machine in the Machine picker instead of those remembered: an SSH "
        "destination, or `local` for this machine; again for each (they run side by side)",
    )
    add_remote_command(parser)
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
    parser.add_argument(
        "--screenshot",
        help="save a PNG of the window when the run ends (with --quit-when-done and neither "
        "--autorun nor --session: of the window as it opens)",
    )
    parser.add_argument(
        "--screenshot-at",
        type=AT_OR_AFTER_START_S,
        metavar="SECONDS",
        help="with --session: take the screenshot at this time of the session instead "
        "(played up to it with --replay, else shown as it stood then)",
    )
    parser.add_argument(
        "--quit-when-done",
        action="store_true",
        help="exit when the run ends; a failure's reason (the banner's) goes to stderr",
    )


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


def _confirm_sweep(experiment: Experiment, args: argparse.Namespace, console: Console) -> None:
    """A large sweep runs only when confirmed, and says first how long it takes at least."""
    estimate = confirm_sweep(experiment.count(bool(args.base_url)), args.large_sweep)
    if estimate is not None:
        console.print(f"note: {estimate}", style="yellow", highlight=False, markup=False)


def resumed_experiment(path: Path, model: str | None) -> Experiment:
    """The experiment a session ran, from the text it stored. A path in a session is never
    acted on: prompts from a file cannot be resumed, and a model given by path must be given
    again with --model."""
    with open_session(path) as session:
        text, name = session.meta["experiment_toml"], session.meta["name"]
    experiment = parse_experiment(
        text, name_hint=name, path=f"{path} (stored experiment)", stored=True
    )
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
    if args.hosts:
        return run_on_hosts(args, console)
    if len(args.model_flags) > 1:
        raise WorkbenchError("--model is given once (with --host: once per host, HOST=PATH)")
    args.model = args.model_flags[0] if args.model_flags else None
    experiment = experiment_of(args)
    _confirm_sweep(experiment, args, console)
    if args.api_key_env and not args.base_url:
        raise WorkbenchError("--api-key-env is for an external server: give --base-url too")
    resume = Path(args.resume) if args.resume else None
    options = RunOptions(
        resume.parent if resume else Path(args.out),
        base_url=args.base_url,
        server_bin=args.server_bin,
        api_key_env=args.api_key_env,
        resume=resume,
        load_from=load_workers(load_hosts(args.load_from), args.remote_workbench),
    )
    if options.load_from and not args.base_url:
        console.print(
            "note: the server this run starts listens on 127.0.0.1: a load machine other "
            "than this one reaches it only through a tunnel (--base-url is the usual way)",
            style="yellow",
            highlight=False,
            markup=False,
        )
    return _run_one(ExperimentRunner(experiment, options), experiment, args, console)


def _run_one(
    runner: Runner, experiment: Experiment, args: argparse.Namespace, console: Console
) -> int:
    """One runner followed on the terminal, from prepare to its exit status."""
    lifecycle = RunLifecycle(
        runner,
        while_stopping=lambda: console.print(
            "[yellow]already stopping: the session is being closed[/yellow]"
        ),
    )
    lifecycle.prepare()
    # What a resumed session finished already (a run on another host never resumes).
    kept = runner.summaries if isinstance(runner, ExperimentRunner) else []
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
    if result.status == RunStatus.INCOMPLETE:
        console.print(f"[red]run incomplete: {escape(result.error or '')}[/red]", highlight=False)
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


# -- runs on hosts (``--host``) -------------------------------------------------------------


def host_models(flags: list[str], hosts: list[str]) -> tuple[str | None, dict[str, str]]:
    """``--model`` flags as the model of every host and each host's own (``HOST=PATH``,
    where HOST is one of ``hosts``; any other text is a path)."""
    every: str | None = None
    own: dict[str, str] = {}
    for text in flags:
        host, _, path = text.partition("=")
        if path and host in hosts:
            if host in own:
                raise WorkbenchError(f"--model {host}=... is given twice")
            own[host] = path
        elif every is not None:
            raise WorkbenchError("--model without HOST= is given once: it is every host's")
        else:
            every = text
    return every, own


def run_on_hosts(args: argparse.Namespace, console: Console) -> int:
    """``run --host``: every host checked (one line each, and one per problem) before any
    starts; one host is followed as a local run is, several at once, a line each."""
    hosts = list(args.hosts)
    if len(set(hosts)) != len(hosts):
        raise WorkbenchError("each --host is given once")
    if args.base_url or args.resume or args.load_from:
        flag = "--base-url" if args.base_url else "--resume" if args.resume else "--load-from"
        raise WorkbenchError(f"{flag} is for a run from this machine: give no --host")
    every, own = host_models(args.model_flags, hosts)
    args.model = every
    experiment = experiment_of(args)
    _confirm_sweep(experiment, args, console)
    models = {host: own.get(host) or every for host in hosts}
    _check_hosts(hosts, models, experiment, args, console)
    out = Path(args.out)

    def runner(host: str) -> Runner:
        folder = out if len(hosts) == 1 else out / host_folder(host)
        options = RunOptions(folder, server_bin=args.server_bin)
        return runner_for(host, experiment, options, args.remote_workbench, models[host])

    if len(hosts) == 1:
        return _run_one(runner(hosts[0]), experiment, args, console)
    return _run_several({host: runner(host) for host in hosts}, experiment, args, console)


def _check_hosts(
    hosts: list[str],
    models: dict[str, str | None],
    experiment: Experiment,
    args: argparse.Namespace,
    console: Console,
) -> None:
    """A line per host of what would run there, a line per problem; any stops the run."""
    named = {c.server.model for c in experiment.configs()} - {"default"}
    problems = 0
    for host in hosts:
        model = models[host] or (next(iter(named)) if len(named) == 1 else None)
        try:
            facts = check_host(host, model, args.server_bin, args.remote_workbench)
        except WorkbenchError as exc:
            lines = [str(exc) if str(exc).startswith(f"{host}:") else f"{host}: {exc}"]
        else:
            console.print(facts_line(host, facts), highlight=False, markup=False, soft_wrap=True)
            lines = [f"{host}: {printable(p)}" for p in facts.problems]
        for line in lines:
            console.print(f"[red]{escape(line)}[/red]", highlight=False, soft_wrap=True)
        problems += len(lines)
    if problems:
        raise WorkbenchError(f"nothing was started: {plural(problems, 'problem')} above")


def _run_several(
    runners: dict[str, Runner], experiment: Experiment, args: argparse.Namespace, console: Console
) -> int:
    """Every host's run at once, a progress line each; Ctrl-C stops them all; the exit
    status is the worst of theirs."""
    lifecycles = {host: RunLifecycle(r) for host, r in runners.items()}
    prepared: list[RunLifecycle] = []
    try:
        for host, lifecycle in lifecycles.items():
            lifecycle.prepare()
            prepared.append(lifecycle)
            console.print(
                f"{escape(host)}: "
                + run_line(
                    experiment.name, len(lifecycle.runner.configs), 0, lifecycle.runner.session_path
                ),
                highlight=False,
                soft_wrap=True,
            )
    except BaseException:
        for lifecycle in prepared:  # prepared, never started: each is ended unrun
            lifecycle.cancel()
        raise
    states = {host: ProgressState(columns=args.results_columns) for host in lifecycles}
    subscriptions = {host: lifecycle.start() for host, lifecycle in lifecycles.items()}
    results: dict[str, RunResult] = {}
    try:
        _follow_several(lifecycles, subscriptions, states, console, not args.quiet)
    finally:
        for host, lifecycle in lifecycles.items():
            results[host] = lifecycle.finish()
    statuses = []
    for host, result in results.items():
        console.print(
            results_table(
                result.summaries, title=f"{host}: {experiment.name}", columns=args.results_columns
            )
        )
        console.print(
            f"{host}: session {result.session_path}", highlight=False, markup=False, soft_wrap=True
        )
        statuses.append(_exit_status(result, console))
    return max(statuses, key=_EXIT_RANK.index)


# The exit statuses, best first: several hosts' run exits with the worst.
_EXIT_RANK = [0, EXIT_REQUESTS_FAILED, EXIT_CONFIG_FAILED, EXIT_ERROR, EXIT_CANCELLED]


def _follow_several(
    lifecycles: dict[str, RunLifecycle],
    subscriptions: dict[str, Subscription],
    states: dict[str, ProgressState],
    console: Console,
    live_wanted: bool,
) -> None:
    """Fold each host's events into its line until every run has ended; Ctrl-C cancels
    them all and following goes on, so their shutdowns are shown too."""
    live = None
    if console.is_terminal and live_wanted:
        live = Live(console=console, auto_refresh=False, transient=True)
        live.start()
    try:
        while True:
            try:
                finished = not any(lc.running for lc in lifecycles.values())
                now = time.monotonic()
                for host, subscription in subscriptions.items():
                    for event in subscription.drain():
                        states[host].apply(event, now)
                        line = event_line(event)
                        if line and (live is None or isinstance(event, Notice)):
                            console.print(f"{escape(host)}: {line}", highlight=False)
                if live is not None:
                    live.update(
                        Group(*(host_line(h, s, now) for h, s in states.items())), refresh=True
                    )
                if finished:
                    return
                time.sleep(FOLLOW_INTERVAL_S)
            except KeyboardInterrupt:
                console.print(
                    "[yellow]stopping every host's run; the sessions keep what finished[/yellow]"
                )
                for lifecycle in lifecycles.values():
                    lifecycle.cancel()
    finally:
        if live is not None:
            live.stop()


def host_line(host: str, state: ProgressState, now: float) -> Text:
    """One host's progress in one line: its configuration, server, requests and rate."""
    failed = f" ({state.failed} failed)" if state.failed else ""
    return Text("  ").join(
        [
            Text(host, style="bold"),
            Text(f"config {state.config_index + 1}/{state.n_configs}: {state.config_label}"),
            Text(f"server: {state.server_state}"),
            Text(f"requests {state.done}/{state.total}{failed}"),
            Text(live_rate_text(state.chunk_rate(now))),
        ]
    )
