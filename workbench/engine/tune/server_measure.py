"""What a tune measures on the real server: a probe (``predict.probe``) for a calibration,
and short runs through the run layer's own runner, each run one configuration of a session
that grows with the tune.

One session for every verification run (and another for the rate probes, whose Poisson
arrivals a burst's session cannot sweep beside): the tune's experiment is the candidates run
so far, zipped into one sweep, and each new run resumes the session with that experiment
(``run/session_setup``'s resume, after ``store.reopen_session`` makes the finished session
running again), so the finished configurations are kept and only the new one runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import RequestRecord
from workbench.engine.base.states import ConfigStatus
from workbench.engine.config.experiment import Experiment, WorkloadSettings, parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import field_named
from workbench.engine.measure.hardware import fingerprint
from workbench.engine.predict.calibration import (
    Calibration,
    find,
    machine_identity,
    model_identity,
    save,
)
from workbench.engine.predict.probe import probe
from workbench.engine.run.lifecycle import RunLifecycle
from workbench.engine.run.runner import ExperimentRunner, RunOptions
from workbench.engine.store import open_session, reopen_session

Tick = Callable[[], None]
T = TypeVar("T")

FIGURE_KEYS = (
    "requests",
    "failed",
    "makespan_s",
    "agg_tok_s",
    *(f"ttft_p{p}_s" for p in (50, 90, 99)),
    *(f"{m}_p{p}_ms" for m in ("tpot", "itl") for p in (50, 90, 99)),
    *(f"e2e_p{p}_s" for p in (50, 90, 99)),
    "stall_p99_s",
    "stalled_stream_share",
    "spec_acceptance",
)
"""The figures a tune keeps of each candidate, measured or predicted: every one an SLO can
limit, the throughput it is ranked by and what the rate search starts from."""


@dataclass(frozen=True)
class Run:
    """One run a tune asks for: the server settings and workload of one configuration, as
    an experiment file's tables hold them; ``named`` the settings its label names
    (``server.slots``, ``workload.rate``) even where every run has the same."""

    server: dict[str, Any]
    workload: dict[str, Any]
    named: tuple[str, ...] = ()


@dataclass(frozen=True)
class Measured:
    """What one run measured: its figures by catalogue key, its records (for the refit),
    how long it took, its server's start included; ``failed`` says why it has no figures
    to judge (a server that did not start, a run cut short); ``saturated`` why its queue
    grew without bound."""

    figures: dict[str, float | None]
    records: list[RequestRecord] = field(default_factory=list)
    seconds: float = 0.0
    failed: str | None = None
    saturated: str | None = None
    label: str = ""


def zipped_experiment(name: str, runs: list[Run]) -> Experiment:
    """One experiment whose configurations are ``runs``, in order: each setting that differs
    between them (or that a run names) a sweep axis, every axis zipped with the others, so
    configuration k is ``runs[k]`` (its label names those settings)."""
    tables: dict[str, dict[str, Any]] = {"server": {}, "workload": {}}
    for table, cls in (("server", ServerSettings), ("workload", WorkloadSettings)):
        names = dict.fromkeys(n for r in runs for n in getattr(r, table))
        for n in names:
            default = field_named(cls, n).default
            values = [getattr(r, table).get(n, default) for r in runs]
            same = all(v == values[0] for v in values)
            named = any(f"{table}.{n}" in r.named for r in runs)
            tables[table][n] = values[0] if same and not named else values
    axes = [
        f"{table}.{n}"
        for table, values in tables.items()
        for n, v in values.items()
        if isinstance(v, list)
    ]
    experiment = parse_experiment("", name_hint=name)
    experiment = experiment.with_overrides(tables["server"], tables["workload"])
    if len(axes) < 2:
        return experiment
    zipped = replace(experiment, zipped=tuple(axes))
    return replace(zipped, source=zipped.to_toml())


class GrowingSession:
    """A session whose configurations are added one run at a time (see the module's
    docstring); ``path`` is None until the first run made it."""

    def __init__(self, name: str, out_dir: Path, server_bin: str | None) -> None:
        self.name = name
        self.out_dir = out_dir
        self.server_bin = server_bin
        self.runs: list[Run] = []
        self.path: Path | None = None

    def run(self, run: Run, stop: Callable[[], str | None], tick: Tick) -> Measured:
        """Run ``run`` as the session's next configuration until it ends or ``stop()``
        gives a reason to stop (checked ten times a second, as ``tick`` is called)."""
        started = time.monotonic()
        experiment = zipped_experiment(self.name, [*self.runs, run])
        index = len(self.runs)
        if self.path is not None:
            reopen_session(self.path, [])
        options = RunOptions(self.out_dir, server_bin=self.server_bin, resume=self.path)
        runner = ExperimentRunner(experiment, options)
        lifecycle = RunLifecycle(runner)
        lifecycle.prepare()
        self.runs.append(run)
        self.path = runner.session_path
        # Only the new configuration runs: one a resume finds unfinished (its server failed
        # before) stays as it ended.
        runner.configs = [c for c in runner.configs if c.index == index]
        label = runner.configs[0].label

        stopped: list[str] = []

        def follow(events: list[Any]) -> None:
            tick()
            if not lifecycle.cancelled and (why := stop()) is not None:
                stopped.append(why)
                lifecycle.cancel()

        lifecycle.start()
        try:
            lifecycle.follow(follow)
        finally:
            result = lifecycle.finish()
        seconds = time.monotonic() - started
        summary = next((s for s in result.summaries if s.index == index), None)
        if summary is None or summary.status != ConfigStatus.OK:
            why = (summary.error if summary is not None else None) or result.error
            if stopped:  # the runner words its own cancel as the user's
                why = stopped[0]
            cut = "cut short" if lifecycle.cancelled else "failed"
            return Measured({}, [], seconds, f"{label}: {cut}" + (f": {why}" if why else ""))
        with open_session(self.path) as session:
            records = session.records(index)
        figures = {key: number(summary.value(key)) for key in FIGURE_KEYS}
        return Measured(figures, records, seconds, None, summary.over_saturated, label)


def number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


class ServerMeasure:
    """The real server: stored calibrations, probes, and the tune's two sessions (its
    verification runs in ``out_dir``, its rate probes in ``out_dir/rate``)."""

    def __init__(
        self,
        binary: str,
        model: Path,
        out_dir: Path,
        server_bin: str | None,
        cancel: threading.Event,
    ) -> None:
        self.binary = binary
        self.model = model
        self.cancel = cancel
        self.verifying = GrowingSession("tune", out_dir, server_bin)
        self.rating = GrowingSession("tune-rate", out_dir / "rate", server_bin)
        self.log_dir = out_dir / "logs"
        hardware = fingerprint(binary)
        self._identity = (
            machine_identity(hardware),
            model_identity(model),
            hardware.llama_server_build,
        )

    @property
    def session_path(self) -> Path | None:
        return self.verifying.path

    @property
    def rate_session_path(self) -> Path | None:
        return self.rating.path

    def stored(self, settings: ServerSettings) -> Calibration | None:
        machine, model, build = self._identity
        return find(machine, model, build, asdict(settings))

    def probe(
        self, settings: ServerSettings, limit_s: float, tick: Tick
    ) -> tuple[Calibration, list[RequestRecord]]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"probe-{int(time.time())}.log"
        probed = cancellable(
            probe(self.binary, self.model, settings, log, limit_s), self.cancel, tick
        )
        save(probed.calibration)
        return probed.calibration, probed.records

    def verify(self, run: Run, deadline: float, tick: Tick) -> Measured:
        return self.verifying.run(run, lambda: self._stop(deadline), tick)

    def rate_probe(self, run: Run, deadline: float, tick: Tick) -> Measured:
        return self.rating.run(run, lambda: self._stop(deadline), tick)

    def _stop(self, deadline: float) -> str | None:
        """Why a run stops now, if it does: the tune cancelled, or its budget spent."""
        if self.cancel.is_set():
            return "the tune was cancelled"
        if time.monotonic() > deadline:
            return "the tune's budget ran out"
        return None


def cancellable(coroutine: Coroutine[Any, Any, T], cancel: threading.Event, tick: Tick) -> T:
    """Run ``coroutine`` on a loop of its own thread, calling ``tick`` every half second and
    cancelling it once ``cancel`` is set (its own ``finally`` then stops what it started)."""
    loop = asyncio.new_event_loop()
    task = loop.create_task(coroutine)
    outcome: dict[str, Any] = {}

    def main() -> None:
        try:
            outcome["value"] = loop.run_until_complete(task)
        except BaseException as exc:  # handed to the caller's thread below
            outcome["error"] = exc
        finally:
            loop.close()

    thread = threading.Thread(target=main, name="tune-probe", daemon=True)
    thread.start()
    asked = False
    while thread.is_alive():
        thread.join(0.5)
        tick()
        if cancel.is_set() and not asked:
            asked = True
            with contextlib.suppress(RuntimeError):  # the loop has closed: it is over
                loop.call_soon_threadsafe(task.cancel)
    if "error" in outcome:
        error = outcome["error"]
        if isinstance(error, asyncio.CancelledError):
            raise WorkbenchError("cancelled")
        raise error
    return outcome["value"]
