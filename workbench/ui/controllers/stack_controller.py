"""One experiment on several machines at once, shown side by side: a ``RunController`` per
machine, each with its own run model, painter and pump, its views in the host stack.

The runs share one time origin (this machine's clock when Run was pressed; another
machine's clock is moved onto it by its runner's measured offset), so the stacked Gantts
line up. A machine that fails to prepare ends alone, said in the banner; the others run on.
Stop stops all. When the last has ended, the banner says how each ended and the sessions
they wrote are handed on (the window compares them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from workbench.engine.base.states import RunStatus
from workbench.engine.config.experiment import Experiment
from workbench.engine.remote.hosts import host_folder
from workbench.engine.run.lifecycle import Runner
from workbench.engine.run.runner import RunOptions
from workbench.ui.controllers.hosts_controller import LOCAL, MakeRunner, machine_name
from workbench.ui.controllers.render_controller import RenderController
from workbench.ui.controllers.run_controller import RunController
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.panels.server_panel import ServerPanel
from workbench.ui.run_model import RunModel
from workbench.ui.views.host_stack import HostStack
from workbench.ui.views.legend import StateLegend
from workbench.ui.views.results_view import ResultsView
from workbench.ui.views.server_plots import ServerPlots


@dataclass
class HostRun:
    host: str
    controller: RunController
    said: str = ""  # the host's last banner: how it ended, or why it could not start
    status: str | None = None  # set once it has ended
    session: Path | None = None


class StackController(QObject):
    busy_changed = Signal(bool)
    finished = Signal(str)  # complete (every machine), cancelled or failed (any)
    banner = Signal(str, str)
    status = Signal(str)
    compared = Signal(list)  # the sessions the machines wrote (Path), once all have ended
    binary_missing = Signal()  # this machine found no llama-server

    def __init__(
        self,
        stack: HostStack,
        window_views: tuple[ServerPlots, ResultsView, ServerPanel, StateLegend],
        tasks: Tasks,
        out_dir: Path,
        make_runner: MakeRunner,
        server_bin: str | None = None,
        parent: QObject | None = None,
    ) -> None:
        """``window_views``: the window's server plots, results, server panel and state
        legend, which show the first machine's run."""
        super().__init__(parent)
        self.stack = stack
        self.window_views = window_views
        self.tasks = tasks
        self.out_dir = out_dir
        self.make_runner = make_runner
        self.server_bin = server_bin
        self.runs: list[HostRun] = []
        self._progress: dict[str, str] = {}

    @property
    def running(self) -> bool:
        return any(run.status is None for run in self.runs)

    @property
    def models(self) -> list[RunModel]:
        return [run.controller.model for run in self.runs]

    def relabel(self, host: str, label: str) -> None:
        """A machine's name once its check has said what it is (its hostname, its GPU)."""
        for run, pane in zip(self.runs, self.stack.panes, strict=False):
            if run.host == host:
                pane.set_label(label)

    def start(
        self,
        hosts: list[tuple[str, str, str | None]],
        experiment: Experiment,
        base_url: str | None,
        api_key_env: str | None,
    ) -> None:
        """Run ``experiment`` on each of ``hosts`` (host, label, model), each in an output
        subfolder of its own."""
        if self.running:
            return
        plots, results, server_panel, states = self.window_views
        panes = self.stack.show_hosts([label for _, label, _ in hosts], states)
        origin_ns = time.perf_counter_ns()
        for ended in self.runs:  # an earlier run's controllers, their views gone
            ended.controller.renderer.deleteLater()
            ended.controller.deleteLater()
        self.runs, self._progress = [], {}
        for index, ((host, _, model), pane) in enumerate(zip(hosts, panes, strict=True)):
            own = (plots, results, server_panel) if index == 0 else (None, None, None)
            renderer = RenderController(RunModel(), pane.grid, pane.gantt, *own, parent=self)
            controller = RunController(
                renderer.model,
                renderer,
                self.tasks,
                self.out_dir / host_folder(host),
                self.server_bin,
                self,
                make_runner=partial(self._runner, host, model),
            )
            controller.origin_ns = origin_ns
            run = HostRun(host, controller)
            controller.banner.connect(partial(self._said, run))
            controller.recorded.connect(partial(self._recorded, run))
            controller.finished.connect(partial(self._ended, run))
            renderer.progress.connect(partial(self._progressed, run))
            if host == LOCAL:
                controller.binary_missing.connect(self.binary_missing)
            self.runs.append(run)
        self.busy_changed.emit(True)
        self.banner.emit(f"Running on {len(self.runs)} machines. Kept in {self.out_dir}", "info")
        for run in self.runs:
            run.controller.start(experiment, base_url, api_key_env)

    def _runner(
        self, host: str, model: str | None, experiment: Experiment, options: RunOptions
    ) -> Runner:
        return self.make_runner(host, experiment, options, model)

    def stop(self) -> None:
        for run in self.runs:
            run.controller.stop()

    def _said(self, run: HostRun, text: str, kind: str) -> None:
        run.said = text

    def _recorded(self, run: HostRun, path: Path | None) -> None:
        run.session = path

    def _progressed(self, run: HostRun, text: str) -> None:
        self._progress[run.host] = f"{machine_name(run.host)}: {text}"
        self.status.emit("   |   ".join(self._progress.values()))

    def _ended(self, run: HostRun, status: str) -> None:
        run.status = status
        self._progress.pop(run.host, None)
        if self.running:
            return
        self.stack.fit(self.models)
        statuses = {run.status for run in self.runs}
        if statuses == {RunStatus.COMPLETE}:
            status, kind = RunStatus.COMPLETE, "ok"
        elif RunStatus.FAILED in statuses or RunStatus.INCOMPLETE in statuses:
            status, kind = RunStatus.FAILED, "error"
        else:
            status, kind = RunStatus.CANCELLED, "info"
        lines = [f"{machine_name(run.host)}: {run.said or run.status}" for run in self.runs]
        if any(run.status != RunStatus.COMPLETE and run.session is None for run in self.runs):
            kind = "error"  # a machine that never started is said as an error
        self.banner.emit("\n".join(lines), kind)
        self.busy_changed.emit(False)
        sessions = [run.session for run in self.runs if run.session is not None]
        self.compared.emit([path for path in sessions if path.is_file()])
        self.finished.emit(status)
