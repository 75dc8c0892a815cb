"""The workbench window: experiment and server on the left, streams and the Gantt in the
middle, server plots and results on the right.

The window owns one ``ProcessRunner`` at a time. The engine measures in a child process;
the window drains its events on a 30 Hz timer and hands them to the views. Every way out
(Stop, closing the window, the end of the run) goes through the runner's own shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis.export import write_concurrency_csv, write_requests_csv
from workbench.engine.analysis.library import data_folder, scan
from workbench.engine.analysis.roofline import session_roofline
from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.events import Subscription
from workbench.engine.run.process_runner import ProcessRunner
from workbench.engine.run.replay import Playback, load_session_events
from workbench.engine.run.runner import RunOptions, RunResult
from workbench.engine.server.discovery import find_server_binary, resolve_model
from workbench.engine.server.llama_server import LlamaServer
from workbench.engine.store.session import open_session
from workbench.ui.capacity_panel import CapacityPanel
from workbench.ui.compare_window import CompareWindow
from workbench.ui.experiment_form import ExperimentForm
from workbench.ui.gantt import GanttView
from workbench.ui.legend import StateLegend
from workbench.ui.library_panel import LibraryPanel
from workbench.ui.replay_bar import ReplayBar
from workbench.ui.results_view import ResultsView
from workbench.ui.run_model import RunModel
from workbench.ui.server_panel import ServerPanel
from workbench.ui.server_plots import ServerPlots
from workbench.ui.slo_panel import SloPanel
from workbench.ui.slo_panel import evaluate as evaluate_session_slo
from workbench.ui.stream_grid import StreamGrid
from workbench.ui.theme import app_icon

# ~33 Hz: with a timer at exactly 33 ms any jitter makes a frame later than 1/30 s.
PUMP_INTERVAL_MS = 30
PLOT_EVERY_TICKS = 3  # the Gantt's live bars at ~11 Hz: a repaint per token would be waste
SERVER_PLOT_EVERY_TICKS = 8  # memory, queue and slots at ~4 Hz, the pace of /metrics and /slots
BANNER_STYLES = {
    "info": "background:#23407a; color:white; padding:6px; border-radius:4px;",
    "ok": "background:#1f6b4a; color:white; padding:6px; border-radius:4px;",
    "error": "background:#8e2a2e; color:white; padding:6px; border-radius:4px;",
}


def write_tables(result: RunResult, out_dir: Path) -> None:
    """The same CSVs as ``workbench run`` writes, from the session file."""
    with open_session(result.session_path) as session:
        write_concurrency_csv(out_dir / "concurrency.csv", session.summaries())
        write_requests_csv(out_dir / "requests.csv", session)


class MainWindow(QMainWindow):
    run_finished = Signal(str)
    replay_finished = Signal(str)

    def __init__(self, out_dir: Path, server_bin: str | None = None) -> None:
        super().__init__()
        self.out_dir = out_dir
        self.server_bin = server_bin
        self.setWindowTitle("Concurrency Workbench")
        self.setWindowIcon(app_icon())
        self.model = RunModel()
        self.runner: ProcessRunner | None = None
        self.result: RunResult | None = None
        self.subscription: Subscription | None = None
        self.manual_server: LlamaServer | None = None
        self.tasks: set[asyncio.Task[Any]] = set()
        self._close_when_stopped = False
        self.confirm_close = True  # ask before stopping a run; off for scripted runs
        self._ticks = 0
        self._sized_for = 0
        self._gantt_stale = False
        self._server_stale = False
        self._plots_deferred = False
        self._roofline_for: Path | None = None  # the session the Roofline tab is for

        self.form = ExperimentForm()
        self.server_panel = ServerPanel()
        self.server_panel.start_requested.connect(lambda: self._spawn(self._start_manual()))
        self.server_panel.stop_requested.connect(lambda: self._spawn(self._stop_manual()))
        form_scroll = QScrollArea()
        form_scroll.setWidget(self.form)
        form_scroll.setWidgetResizable(True)
        self.left = QTabWidget()
        self.left.addTab(form_scroll, "Experiment")
        self.left.addTab(self.server_panel, "Server")
        self.capacity = CapacityPanel()
        self.left.addTab(self.capacity, "Capacity")
        self.slo_panel = SloPanel()
        self.left.addTab(self.slo_panel, "SLO")
        self.slo_panel.evaluate_requested.connect(lambda: self._spawn(self.evaluate_slo()))
        self.library = LibraryPanel(out_dir)
        self.left.addTab(self.library, "Sessions")
        self.library.open_requested.connect(lambda path: self._spawn(self.open_session_file(path)))
        self.library.refresh_requested.connect(self.refresh_library)
        self.library.compare_requested.connect(self.open_compare)
        self.compare_windows: list[CompareWindow] = []
        self.library.error.connect(lambda text: self.show_banner(text, "error"))
        self.left.currentChanged.connect(
            lambda index: (
                self.refresh_library() if self.left.widget(index) is self.library else None
            )
        )
        self.setAcceptDrops(True)
        self.form.changed.connect(self._form_changed)

        self.run_button = QPushButton("▶  Run")
        self.run_button.setObjectName("runButton")
        self.run_button.setStyleSheet(
            "QPushButton#runButton { background:#1f6b4a; color:white;"
            " font-weight:bold; padding:6px 18px; }"
        )
        self.stop_button = QPushButton("■  Stop")
        self.stop_button.setEnabled(False)
        self.run_button.clicked.connect(self.start_run)
        self.stop_button.clicked.connect(self.stop_run)
        self.open_button = QPushButton("Open session…")
        self.open_button.clicked.connect(self.open_session_dialog)
        self.playback: Playback | None = None
        self.replay_bar = ReplayBar()
        self.replay_bar.play_toggled.connect(
            lambda play: self.start_replay() if play else self.stop_replay()
        )
        self.replay_bar.seeked.connect(self.seek_replay)
        self.status = QLabel("ready")
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setObjectName("runStatus")
        self.banner = QLabel()
        # It shows errors that quote what a server sent: never read them as rich text.
        self.banner.setTextFormat(Qt.TextFormat.PlainText)
        self.banner.setWordWrap(True)
        self.banner.setObjectName("banner")
        self.banner.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner.hide()

        self.grid = StreamGrid()
        self.gantt = GanttView()
        self.plots = ServerPlots()
        self.plots.memory.setXLink(self.gantt)
        self.results = ResultsView()

        self.settings_toggle = QPushButton("Settings")
        self.settings_toggle.setCheckable(True)
        self.settings_toggle.setChecked(True)
        self.settings_toggle.setToolTip(
            "Show or hide the experiment and server panel "
            "(more room for the live views on a small screen)"
        )
        self.settings_toggle.toggled.connect(self.left.setVisible)
        bar = QHBoxLayout()
        bar.addWidget(self.settings_toggle)
        bar.addWidget(self.run_button)
        bar.addWidget(self.stop_button)
        bar.addWidget(self.open_button)
        bar.addWidget(self.replay_bar)
        bar.addWidget(self.status, 1)
        center_split = QSplitter(Qt.Orientation.Vertical)
        center_split.addWidget(self.grid)
        center_split.addWidget(self.gantt)
        center_split.setSizes([500, 400])
        center = QWidget()
        center_layout = QVBoxLayout(center)
        center_layout.setContentsMargins(0, 0, 0, 0)
        self.lanes_box = QCheckBox("Gantt lanes by slot")
        self.lanes_box.setToolTip(
            "One row per server slot (matched from /slots) instead of "
            "one per request: batching shows as parallel lanes"
        )
        self.lanes_box.toggled.connect(self._toggle_lanes)
        legend_row = QHBoxLayout()
        legend_row.addWidget(StateLegend(), 1)
        legend_row.addWidget(self.lanes_box)
        center_layout.addLayout(legend_row)
        center_layout.addWidget(center_split, 1)
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.plots)
        right.addWidget(self.results)
        right.setSizes([500, 400])
        main = QSplitter(Qt.Orientation.Horizontal)
        main.addWidget(self.left)
        main.addWidget(center)
        main.addWidget(right)
        self.splitter = main
        main.setStretchFactor(1, 5)
        main.setStretchFactor(2, 3)
        root = QWidget()
        layout = QVBoxLayout(root)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(bar)
        layout.addWidget(self.banner)
        layout.addWidget(main, 1)
        self.setCentralWidget(root)

        self.pump = QTimer(self)
        self.pump.setInterval(PUMP_INTERVAL_MS)
        self.pump.setTimerType(Qt.TimerType.PreciseTimer)
        self.pump.timeout.connect(self.drain)
        self.replay_timer = QTimer(self)
        self.replay_timer.setInterval(PUMP_INTERVAL_MS)
        self.replay_timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.replay_timer.timeout.connect(self._replay_tick)
        self.log_timer = QTimer(self)
        self.log_timer.setInterval(1000)
        self.log_timer.timeout.connect(self.server_panel.refresh_log)
        self.log_timer.start()

    def resizeEvent(self, event: Any) -> None:
        """Keep the three columns in proportion (left 23 %, centre 48 %, right 29 %)."""
        super().resizeEvent(event)
        width = self.width()
        if not self._sized_for or abs(self._sized_for - width) > 50:
            self._sized_for = width
            left = max(300, int(width * 0.23))
            right = int(width * 0.29)
            self.splitter.setSizes([left, width - left - right, right])

    def open_compare(self, paths: list[Path]) -> CompareWindow:
        window = CompareWindow(paths)
        window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        window.destroyed.connect(
            lambda *_: (
                self.compare_windows.remove(window) if window in self.compare_windows else None
            )
        )
        self.compare_windows.append(window)
        window.show()
        return window

    def current_session_path(self) -> Path | None:
        """The session the views show: the opened one, or the last run's."""
        if self.playback is not None and self.model.session_path:
            return Path(self.model.session_path)
        return self.result.session_path if self.result is not None else None

    async def evaluate_slo(self) -> None:
        path, slo = self.current_session_path(), self.slo_panel.slo()
        if path is None:
            self.slo_panel.show_message("Run an experiment or open a session first.")
            return
        if slo is None:
            self.slo_panel.show_message("Set at least one SLO above zero.")
            return
        try:
            results, summaries = await asyncio.to_thread(evaluate_session_slo, path, slo)
        except WorkbenchError as exc:
            self.slo_panel.show_message(str(exc))
            return
        self.slo_panel.show_result(results, summaries, slo)

    def refresh_library(self) -> None:
        async def scan_folder() -> None:
            folders = [self.out_dir, data_folder()]
            self.library.show_infos(await asyncio.to_thread(scan, folders))

        self._spawn(scan_folder())

    def dragEnterEvent(self, event: Any) -> None:
        if any(u.toLocalFile().endswith(".sqlite") for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: Any) -> None:
        """A session file dropped on the window opens (from another machine, say)."""
        paths = [Path(u.toLocalFile()) for u in event.mimeData().urls()]
        sessions = [p for p in paths if p.suffix == ".sqlite"]
        if sessions:
            self._spawn(self.open_session_file(sessions[0]))
            event.acceptProposedAction()

    def _form_changed(self) -> None:
        """Keep the capacity panel in step with the server settings being edited."""
        try:
            server, workload = self.form.values()
        except ExperimentError:
            return
        self.capacity.update_for(server, workload)

    def _toggle_lanes(self, on: bool) -> None:
        self.gantt.set_lanes(on)
        self.gantt.sync(self.model, self.model.last_t)

    # -- tasks -----------------------------------------------------------------------------------
    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        """Every coroutine the window starts is owned here and cancelled on close."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    @property
    def running(self) -> bool:
        return self.runner is not None

    # -- messages --------------------------------------------------------------------------------
    def show_banner(self, text: str, kind: str = "info") -> None:
        self.banner.setText(text)
        self.banner.setStyleSheet(BANNER_STYLES[kind])
        self.banner.setVisible(bool(text))

    # -- running an experiment -------------------------------------------------------------------
    def start_run(self) -> None:
        if self.running:
            return
        try:
            experiment = self.form.build()
        except ExperimentError as exc:
            self.show_banner(f"Fix the experiment first: {exc}", "error")
            self.run_finished.emit("failed")
            return
        if self.manual_server is not None:
            self.show_banner("Stop the hand-started server first (Server tab).", "error")
            self.run_finished.emit("failed")
            return
        options = RunOptions(
            self.out_dir,
            base_url=self.form.external_url(),
            server_bin=self.server_bin,
            api_key_env=self.form.external_api_key_env(),
        )
        self.stop_replay()
        self.playback = None
        self.replay_bar.hide()
        self.runner = ProcessRunner(experiment, options)
        self._set_busy(True)
        self._spawn(self._run(self.runner))

    async def _run(self, runner: ProcessRunner) -> None:
        """Prepare, run and finish one experiment; every way out ends the same: the window
        usable again, ``run_finished`` emitted, a requested close carried out."""
        status = "failed"
        try:
            status = await self._run_steps(runner)
        except WorkbenchError as exc:
            self.show_banner(str(exc), "error")
        finally:
            self.pump.stop()
            if self.subscription is not None:
                runner.bus.unsubscribe(self.subscription)
                self.subscription = None
            self.runner = None
            self._set_busy(False)
            self.run_finished.emit(status)
            if self._close_when_stopped:
                QTimer.singleShot(0, self.close)

    async def _run_steps(self, runner: ProcessRunner) -> str:
        # In the status line, not the banner: a banner coming and going re-lays out every
        # view just as the run starts.
        self.show_banner("")
        self.status.setText("preparing: finding the server and model, checking the output folder…")
        await asyncio.to_thread(runner.prepare)
        self.status.setText("running")
        self.model.reset()
        self.results.sync([])
        self._roofline_for = None
        self.results.roofline.show_report(None)
        self.subscription = runner.bus.subscribe()
        runner.start()
        self.pump.start()
        try:
            while runner.running:
                await asyncio.sleep(0.1)
        finally:
            if runner.running:  # the window is closing: this task was cancelled
                runner.cancel()
        result = await asyncio.to_thread(runner.wait, 60.0)
        self.pump.stop()
        self.drain()
        self.result = result
        if result is None:
            self.show_banner("The run did not stop within 60 s.", "error")
            return "failed"
        try:
            await asyncio.to_thread(write_tables, result, self.out_dir)
        except WorkbenchError as exc:
            self.show_banner(str(exc), "error")
        self._report(result)
        self._spawn(self.update_roofline(result.session_path))
        return result.status

    def _report(self, result: RunResult) -> None:
        failed = [s for s in result.summaries if s.status != "ok"]
        where = f"Session: {result.session_path}"
        if result.status == "cancelled":
            self.show_banner(f"Stopped. What finished is kept. {where}", "info")
        elif result.status == "failed" or failed:
            errors = "\n".join(f"{s.label}: {s.error}" for s in failed) or result.error or ""
            self.show_banner(f"Finished with errors. {where}\n{errors}", "error")
        else:
            self.show_banner(f"Finished. {where}", "ok")

    def stop_run(self) -> None:
        if self.runner is not None:
            self.status.setText("stopping…")
            self.runner.cancel()

    def _set_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy)
        self.stop_button.setEnabled(busy)
        self.form.setEnabled(not busy)
        self.server_panel.set_manual(self.manual_server is not None, busy)
        self.status.setText("running" if busy else "ready")

    # -- the 30 Hz pump --------------------------------------------------------------------------
    def drain(self) -> None:
        """Fold what arrived since the last tick into the model and redraw what changed."""
        events = self.subscription.drain() if self.subscription is not None else []
        now = None
        if self.model.t0_ns is not None and self.model.status == "running":
            now = (time.perf_counter_ns() - self.model.t0_ns) / 1e9
        self.render(events, now)

    def render(self, events: list[Any], now: float | None, force: bool = False) -> None:
        """Apply events and redraw; ``now`` is the run's clock in seconds (live or replayed)."""
        changes = self.model.apply(events)
        running = self.model.status == "running"
        if not changes and not running and not force:
            return
        now = max(self.model.last_t, now or 0.0)
        laid_out = self.grid.sync(self.model, changes.requests, changes.layout or force, now)
        self._ticks += 1
        self._gantt_stale = self._gantt_stale or changes.gantt
        self._server_stale = self._server_stale or changes.samples
        gantt_due = self._plots_deferred or self._ticks % PLOT_EVERY_TICKS == 0
        server_due = self._plots_deferred or self._ticks % SERVER_PLOT_EVERY_TICKS == 0
        # A frame that laid out the grid (up to 64 panes) is full: plots wait one tick.
        self._plots_deferred = (gantt_due or server_due) and laid_out and running and not force
        final = not running or force
        if self._plots_deferred:
            gantt_due = server_due = False
        if (self._gantt_stale or running or force) and (gantt_due or final):
            self.gantt.sync(self.model, now)  # live bars grow with the clock
            self._gantt_stale = False
        if (self._server_stale or force) and (server_due or final):
            self.plots.sync(self.model)  # new only when the sampler reports
            self._server_stale = False
        if changes.server or force:
            self._sync_server()
        if changes.results or force:
            self.results.sync(self.model.summaries)
        if running:
            done = sum(v.state in ("done", "failed") for v in self.model.requests.values())
            self.status.setText(
                f"{'replaying' if self.playback else 'running'} {self.model.server.label}  ·  "
                f"config {self.model.server.config_index + 1}/{self.model.n_configs}  ·  "
                f"{done}/{len(self.model.requests)} requests done"
            )

    # -- reopening and replaying a session -------------------------------------------------------
    def open_session_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open session", str(self.out_dir), "Sessions (*.session.sqlite *.sqlite)"
        )
        if path:
            self._spawn(self.open_session_file(Path(path)))

    async def open_session_file(self, path: Path) -> None:
        """Rebuild every view from the session file alone (its final state)."""
        if self.running:
            self.show_banner("Stop the run before opening a session.", "error")
            return
        try:
            events = await asyncio.to_thread(load_session_events, path)
        except WorkbenchError as exc:
            self.show_banner(str(exc), "error")
            return
        self.stop_replay()
        self.playback = Playback(events)
        self.model.reset()
        self.render([e for _, e in events], self.playback.duration_s, force=True)
        self.playback.seek_forward(self.playback.duration_s)
        self.replay_bar.load(self.playback)
        status = self.model.status
        kind = "ok" if status == "complete" else "info"
        self.show_banner(f"Session {path.name} ({status}): press Replay to watch it again.", kind)
        self.status.setText(f"session {path.name}")
        self._spawn(self.update_roofline(path))

    async def update_roofline(self, path: Path) -> None:
        """The session's decode against this machine's memory bandwidth (measured once per
        machine, in a thread: about a second the first time). A later session or run
        supersedes it, whichever finishes first."""
        self._roofline_for = path
        self.results.roofline.show_report(None)
        try:
            report = await asyncio.to_thread(session_roofline, path)
        except WorkbenchError as exc:
            if self._roofline_for == path:
                self.results.roofline.summary.setText(f"No roofline: {exc}")
            return
        if self._roofline_for == path:
            self.results.roofline.show_report(report)

    def open_session_later(self, path: Path, replay_speed: int | None = None) -> None:
        """Open a session (and maybe replay it) from a plain slot, e.g. at start-up."""

        async def go() -> None:
            await self.open_session_file(path)
            if self.playback is None:
                self.replay_finished.emit("failed")
            elif replay_speed:
                self.replay_bar.set_speed(replay_speed)
                self.start_replay()
            else:
                self.replay_finished.emit(self.model.status)

        self._spawn(go())

    def start_replay(self) -> None:
        if self.playback is None or self.running:
            return
        if self.playback.finished:
            self.seek_replay(0.0)
        self.replay_timer.start()
        self.replay_bar.set_playing(True)

    def stop_replay(self) -> None:
        self.replay_timer.stop()
        self.replay_bar.set_playing(False)

    def seek_replay(self, position_s: float) -> None:
        """Jump anywhere: the views are rebuilt from the start up to that moment."""
        if self.playback is None:
            return
        self.model.reset()
        self.playback.rewind()
        self.render(self.playback.seek_forward(position_s), position_s, force=True)
        self.replay_bar.set_position(self.playback)

    def _replay_tick(self) -> None:
        assert self.playback is not None
        step = PUMP_INTERVAL_MS / 1000 * self.replay_bar.speed()
        self.render(self.playback.advance(step), self.playback.position_s)
        self.replay_bar.set_position(self.playback)
        if self.playback.finished:
            self.stop_replay()
            self.render([], self.playback.position_s, force=True)
            self.replay_finished.emit(self.model.status)

    def _sync_server(self) -> None:
        server = self.model.server
        self.server_panel.show_state(server.state, server.detail)
        self.server_panel.show_server(
            server.base_url, server.facts, server.log_path, server.log_tail
        )
        for notice in self.model.notices[-1:]:
            if notice.level == "warning":
                self.show_banner(notice.text, "info")

    # -- a server by hand ------------------------------------------------------------------------
    async def _start_manual(self) -> None:
        try:
            experiment = self.form.build()
            settings = experiment.configs()[0].server
            binary = await asyncio.to_thread(lambda: find_server_binary(self.server_bin).path)
            model = await asyncio.to_thread(resolve_model, settings.model)
        except WorkbenchError as exc:
            self.show_banner(str(exc), "error")
            return
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        server = LlamaServer(
            binary,
            model,
            settings,
            self.out_dir / "logs" / f"manual-{stamp}.log",
            on_state=self._state_from_any_thread(asyncio.get_running_loop()),
        )
        self.manual_server = server
        self.server_panel.set_manual(True, False)
        self.run_button.setEnabled(False)
        try:
            await server.start()
        except WorkbenchError as exc:
            self.manual_server = None
            self.server_panel.set_manual(False, False)
            self.run_button.setEnabled(True)
            self.show_banner(str(exc), "error")
            return
        self.server_panel.show_server(server.base_url, server.facts.to_dict(), str(server.log_path))
        self.show_banner(f"Server running at {server.base_url} (started by hand).", "ok")

    def _state_from_any_thread(self, loop: asyncio.AbstractEventLoop) -> Callable[[str, str], None]:
        """Server states can come from a worker thread (stop runs there): hop to the GUI."""

        def show(state: str, detail: str) -> None:
            loop.call_soon_threadsafe(self.server_panel.show_state, state, detail)

        return show

    async def _stop_manual(self) -> None:
        server, self.manual_server = self.manual_server, None
        if server is not None:
            await asyncio.to_thread(server.stop)
        self.server_panel.set_manual(False, self.running)
        self.run_button.setEnabled(not self.running)

    # -- closing -------------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:
        if self.running:
            asked = self._close_when_stopped or not self.confirm_close
            if not asked and not self.ask_stop_on_close():
                event.ignore()
                return
            self._close_when_stopped = True
            self.stop_run()
            event.ignore()  # closes itself once the runner has shut down
            return
        self.shutdown()
        event.accept()

    def ask_stop_on_close(self) -> bool:
        answer = QMessageBox.question(
            self,
            "Stop the experiment?",
            "An experiment is running. Stop it, keep what finished, and close?",
        )
        return answer == QMessageBox.StandardButton.Yes

    def shutdown(self) -> None:
        """Stop the timers, the hand-started server and every task the window owns."""
        self.pump.stop()
        self.capacity.stop()
        for window in list(self.compare_windows):
            window.close()
        self.replay_timer.stop()
        self.log_timer.stop()
        if self.manual_server is not None:
            self.manual_server.stop()
            self.manual_server = None
        for task in list(self.tasks):
            task.cancel()
        with contextlib.suppress(RuntimeError):
            self.tasks.clear()

    def screenshot(self, path: Path) -> bool:
        path.parent.mkdir(parents=True, exist_ok=True)
        return self.grab().save(str(path))
