"""The workbench window: experiment and server on the left, streams and the Gantt in the
middle, server plots and results on the right.

The window lays out the views, creates the controllers (``workbench.ui.controllers``) and
connects the two: a run, a replay, the hand-started server, the session library and the
analyses of the current session each live in a controller of their own, which the window
hears from through signals. What is left here is layout, wiring, the close sequence and
small glue between controllers (a run refused while a hand-started server is up, say).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis.library import SESSION_GLOB
from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.base.states import RunStatus
from workbench.engine.run.lifecycle import Runner
from workbench.engine.run.runner import RunResult
from workbench.engine.server.llama_server import LlamaServer
from workbench.engine.watch.record import SUFFIX as WATCH_SUFFIX
from workbench.ui.compare_window import CompareWindow
from workbench.ui.controllers.analysis_controller import AnalysisController
from workbench.ui.controllers.calibrate_controller import CalibrateController
from workbench.ui.controllers.hosts_controller import (
    LOCAL,
    HostsController,
    Machines,
    engine_machines,
    machine_label,
)
from workbench.ui.controllers.library_controller import LibraryController
from workbench.ui.controllers.render_controller import PUMP_INTERVAL_MS, RenderController
from workbench.ui.controllers.replay_controller import ReplayController
from workbench.ui.controllers.run_controller import RunController
from workbench.ui.controllers.server_controller import ServerController
from workbench.ui.controllers.stack_controller import StackController
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.controllers.watch_replay_controller import kept_watches
from workbench.ui.panels.capacity_panel import CapacityPanel
from workbench.ui.panels.experiment_form import ExperimentForm
from workbench.ui.panels.library_panel import LibraryPanel
from workbench.ui.panels.pickers import ChoiceDialog, binary_dialog
from workbench.ui.panels.replay_bar import ReplayBar
from workbench.ui.panels.server_panel import ServerPanel
from workbench.ui.panels.slo_panel import SloPanel
from workbench.ui.panels.tune_panel import TunePanel
from workbench.ui.presentation import Presentation, Stage
from workbench.ui.run_model import RunModel
from workbench.ui.theme.qt_theme import app_icon, theme_color
from workbench.ui.views.gantt import GanttView
from workbench.ui.views.host_stack import HostStack
from workbench.ui.views.legend import ConversationLegend, StateLegend
from workbench.ui.views.results_view import ResultsView
from workbench.ui.views.server_plots import ServerPlots
from workbench.ui.views.stream_grid import StreamGrid
from workbench.ui.watch_settings import WatchSettings, WatchTexts
from workbench.ui.watch_settings_dialog import WatchSettingsDialog
from workbench.ui.watch_window import WatchWindow
from workbench.ui.widgets.elided_label import ElidedLabel
from workbench.ui.widgets.whole_tabs import WrappedTabs

DROPPED = (".sqlite", ".json", ".jsonl")  # sessions, and other tools' result files


def banner_style(kind: str) -> str:
    """The banner's look for ``kind`` ("info", "ok", "error"): white on the kind's colour."""
    background, text = theme_color("banners", kind).name(), theme_color("text", "on_colour").name()
    return f"background:{background}; color:{text}; padding:6px; border-radius:4px;"


MARGIN = 6  # around the window's contents


def column_widths(width: int, table_width: int) -> tuple[int, int, int]:
    """Left, centre and right columns sharing ``width`` pixels: 23 %, 48 %, 29 %, the left
    at least 300 px; the right widens to the results table's full width when the centre
    keeps 45 % and the left 300 px (a 1600-pixel window), else the table scrolls."""
    left, right = max(300, int(width * 0.23)), int(width * 0.29)
    least_centre = int(width * 0.45)
    if right < table_width <= width - 300 - least_centre:
        right = table_width
        left = max(300, min(left, width - right - least_centre))
    return left, width - left - right, right


class MainWindow(QMainWindow):
    run_finished = Signal(str)
    replay_finished = Signal(str)

    def __init__(
        self,
        out_dir: Path,
        server_bin: str | None = None,
        machines: Machines | None = None,
    ) -> None:
        """``machines``: how this window reaches other machines (None: the engine's SSH
        hosts and agents)."""
        super().__init__()
        machines = machines or engine_machines()
        self.out_dir = out_dir
        self.setWindowTitle("Concurrency Workbench")
        self.setWindowIcon(app_icon())
        self.model = RunModel()
        self.tasks = Tasks()  # every coroutine the window starts, cancelled on close
        self._close_when_stopped = False
        self.confirm_close = True  # ask before stopping a run; off for scripted runs
        self._sized_for = 0
        self._columns_by_hand = False
        self._banner_kind = "info"

        self.form = ExperimentForm(ssh_hosts=machines.ssh_hosts())
        self.server_panel = ServerPanel()
        form_scroll = QScrollArea()
        form_scroll.setWidget(self.form)
        form_scroll.setWidgetResizable(True)
        self.left = WrappedTabs()  # six tabs: their names wrap in a narrow column
        self.left.addTab(form_scroll, "Experiment")
        self.left.addTab(self.server_panel, "Server")
        self.capacity = CapacityPanel()
        self.left.addTab(self.capacity, "Capacity")
        self.slo_panel = SloPanel()
        self.left.addTab(self.slo_panel, "SLO")
        self.tune_panel = TunePanel(self.tasks, out_dir, server_bin, held=self._machine_held)
        self.left.addTab(self.tune_panel, "Tune")
        self.library = LibraryPanel(out_dir)
        self.left.addTab(self.library, "Sessions")
        self.compare_windows: list[CompareWindow] = []
        self.watch_windows: list[WatchWindow] = []
        # A watch's settings as last typed, for the next: for as long as the app runs.
        self.watch_texts = WatchTexts()
        self.watch_dialog: WatchSettingsDialog | None = None
        self.binary_chooser: ChoiceDialog | None = None  # open when no llama-server was found
        self.setAcceptDrops(True)

        self.run_button = QPushButton("▶  Run")
        self.run_button.setObjectName("runButton")
        self.run_button.setStyleSheet(
            f"QPushButton#runButton {{ background:{theme_color('banners', 'ok').name()};"
            f" color:{theme_color('text', 'on_colour').name()}; font-weight:bold;"
            " padding:6px 18px; }"
        )
        self.stop_button = QPushButton("■  Stop")
        self.stop_button.setEnabled(False)
        # "Watch a server", in as few words as the bar has room for at 1366 px: the longer
        # name cut the status line's replay progress short.
        self.watch_button = QPushButton("Watch…")
        self.watch_button.setAccessibleName("Watch a server")
        self.watch_button.setToolTip(
            "Watch a server: the one at the External server address (Experiment tab), in a "
            "window of its own: its slots' tasks, its queue and its token rates, live, from "
            "its /slots and /metrics. It sends no load. First asks how often, how long, the "
            "SLOs to judge it on and, behind a proxy, the server's own endpoints."
        )
        self.open_button = QPushButton("Open session…")
        self.open_button.setToolTip("Open a session, or a kept watch (.watch.sqlite) to replay")
        self.replay_bar = ReplayBar()
        self.status = ElidedLabel("ready")
        self.status.setObjectName("runStatus")
        # The run's prediction ("Predicted: about 2 min; ...") above the Gantt, or why none.
        # A long one wraps: each configuration's figure is what it is read for.
        self.prediction_line = QLabel()
        self.prediction_line.setObjectName("predictionLine")
        self.prediction_line.setTextFormat(Qt.TextFormat.PlainText)
        self.prediction_line.setWordWrap(True)
        self.prediction_line.setStyleSheet("font-weight:bold;")
        self.prediction_line.hide()
        self.banner = QLabel()
        # It shows errors that quote what a server sent: never read them as rich text.
        self.banner.setTextFormat(Qt.TextFormat.PlainText)
        self.banner.setWordWrap(True)
        self.banner.setObjectName("banner")
        self.banner.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.banner.hide()

        self.grid = StreamGrid()
        self.conversation_legend = ConversationLegend()
        self.state_legend = StateLegend()
        self.gantt = GanttView(legend=self.conversation_legend, states=self.state_legend)
        self.plots = ServerPlots()
        self.plots.memory.setXLink(self.gantt)
        self.results = ResultsView()

        self.panel_toggle = QPushButton("Experiment panel")
        self.panel_toggle.setCheckable(True)
        self.panel_toggle.setChecked(True)
        self.panel_toggle.setToolTip(
            "Show or hide the experiment, server and sessions panel "
            "(more room for the live views on a small screen)"
        )
        self._make_actions()
        present = QToolButton()
        present.setDefaultAction(self.present_action)
        self.captions_button = QToolButton()
        self.captions_button.setDefaultAction(self.captions_action)
        self.captions_button.hide()  # a speaker's switch: shown while presenting
        bar = QHBoxLayout()
        bar.addWidget(self.panel_toggle)
        bar.addWidget(self.run_button)
        bar.addWidget(self.stop_button)
        bar.addWidget(self.watch_button)
        bar.addWidget(self.open_button)
        bar.addWidget(self.replay_bar)
        bar.addWidget(self.status, 1)
        bar.addStretch(0)  # the room the status line leaves, presenting: not wider buttons
        bar.addWidget(self.captions_button)
        bar.addWidget(present)
        self.caption = QLabel()
        self.caption.setObjectName("caption")
        self.caption.setTextFormat(Qt.TextFormat.PlainText)
        self.caption.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption.setWordWrap(True)  # a long one takes two lines, not a wider window
        self.views = QSplitter(Qt.Orientation.Vertical)
        self.views.addWidget(self.grid)
        self.views.addWidget(self.gantt)
        self.views.setSizes([500, 400])
        center = QWidget()
        center_layout = QVBoxLayout(center)
        center_layout.setContentsMargins(0, 0, 0, 0)
        self.lanes_box = QCheckBox("Gantt lanes by slot")
        self.lanes_box.setToolTip(
            "One row per server slot (matched from /slots) instead of "
            "one per request: batching shows as parallel lanes"
        )
        legend_row = QHBoxLayout()
        legend_row.addWidget(self.state_legend, 1)
        legend_row.addWidget(self.lanes_box)
        center_layout.addWidget(self.prediction_line)
        center_layout.addLayout(legend_row)
        center_layout.addWidget(self.conversation_legend)
        center_layout.addWidget(self.views, 1)
        self.stack = HostStack()  # a run on several machines: its views, stacked
        self.stack.hide()
        center_layout.addWidget(self.stack, 1)
        self.side = QSplitter(Qt.Orientation.Vertical)
        self.side.addWidget(self.plots)
        self.side.addWidget(self.results)
        self.side.setSizes([500, 400])
        main = QSplitter(Qt.Orientation.Horizontal)
        main.addWidget(self.left)
        main.addWidget(center)
        main.addWidget(self.side)
        self.splitter = main
        main.setStretchFactor(1, 5)
        main.setStretchFactor(2, 3)
        root = QWidget()
        layout = QVBoxLayout(root)
        layout.setContentsMargins(MARGIN, MARGIN, MARGIN, MARGIN)
        layout.addLayout(bar)
        layout.addWidget(self.banner)
        layout.addWidget(self.caption)
        layout.addWidget(main, 1)
        self.setCentralWidget(root)

        self.renderer = RenderController(
            self.model, self.grid, self.gantt, self.plots, self.results, self.server_panel, self
        )
        self.runs = RunController(self.model, self.renderer, self.tasks, out_dir, server_bin, self)
        self.replay = ReplayController(self.model, self.renderer, self.replay_bar.speed, self)
        self.hand_server = ServerController(self.tasks, out_dir, server_bin, self)
        self.sessions = LibraryController(out_dir, self.tasks, self)
        self._watch_listings = 0  # numbers the listings: one a later listing overtook is dropped
        self.analysis = AnalysisController(self.tasks, self)
        self.calibrator = CalibrateController(self.tasks, out_dir, server_bin, parent=self)
        self.hosts = HostsController(
            self.tasks, machines.functions, server_bin, machines.remote_command, self
        )
        self.machines = machines
        self.stack_runs = StackController(
            self.stack,
            (self.plots, self.results, self.server_panel, self.state_legend),
            self.tasks,
            out_dir,
            machines.make_runner,
            server_bin,
            self,
        )
        chrome = (self.panel_toggle, self.open_button, self.status, self.left, self.side)
        self.presentation = Presentation(
            Stage(self, self.splitter, self.views, chrome, self.caption), self.model, self
        )
        self.log_timer = QTimer(self)
        self.log_timer.setInterval(1000)
        self._wire()
        self.log_timer.start()

    def _make_actions(self) -> None:
        """The presentation switch and the speaker's keys. Those keys act only while
        presenting (elsewhere Space or an arrow belongs to the field being edited); F11
        and F5 act always."""

        def action(text: str, *keys: str, checkable: bool = False) -> QAction:
            made = QAction(text, self)
            made.setShortcuts([QKeySequence(k) for k in keys])
            made.setCheckable(checkable)
            self.addAction(made)
            return made

        self.present_action = action("Present", "F5", checkable=True)
        self.present_action.setToolTip(
            "Presentation mode (F5): full screen, large type, captions; Space plays, "
            "arrows step through configurations, Esc stops, Ctrl+= / Ctrl+- zoom, C captions"
        )
        self.full_screen_action = action("Full screen", "F11")
        self.captions_action = action("Captions", "C", checkable=True)
        self.captions_action.setChecked(True)
        self.captions_action.setToolTip("Show or hide the caption over the views (C)")
        self.play_action = action("Run, or play / pause the replay", "Space")
        self.stop_action = action("Stop the run or the replay", "Esc")
        self.next_action = action("Next configuration", "Right")
        self.previous_action = action("Previous configuration", "Left")
        self.zoom_in_action = action("Larger type", "Ctrl+=", "Ctrl++")
        self.zoom_out_action = action("Smaller type", "Ctrl+-")
        self.speaker_actions = (
            self.captions_action,
            self.play_action,
            self.stop_action,
            self.next_action,
            self.previous_action,
            self.zoom_in_action,
            self.zoom_out_action,
        )
        for speaker in self.speaker_actions:
            speaker.setEnabled(False)

    def _wire(self) -> None:
        """Views to controllers and controllers to views: every connection in one place."""
        self.panel_toggle.toggled.connect(self.left.setVisible)
        self.splitter.splitterMoved.connect(self._columns_dragged)
        self.results.table.model().rowsInserted.connect(self._results_grew)
        for ended in (self.runs.finished, self.replay.finished):  # a frame after the last
            ended.connect(lambda *_: QTimer.singleShot(PUMP_INTERVAL_MS, self._fit_columns))
        self.present_action.toggled.connect(self.presentation.set_on)
        self.presentation.toggled.connect(self._presenting)
        self.captions_action.toggled.connect(self.presentation.show_captions)
        for tick in (self.runs.pump.timeout, self.runs.finished, self.replay.moved):
            tick.connect(self.presentation.refresh_caption)
        self.replay.opened.connect(self.presentation.refresh_caption)
        self.full_screen_action.triggered.connect(self.presentation.toggle_full_screen)
        self.play_action.triggered.connect(self.play_or_pause)
        self.stop_action.triggered.connect(self.stop)
        self.next_action.triggered.connect(lambda: self.replay.step_config(1))
        self.previous_action.triggered.connect(lambda: self.replay.step_config(-1))
        self.zoom_in_action.triggered.connect(lambda: self.presentation.zoom(1))
        self.zoom_out_action.triggered.connect(lambda: self.presentation.zoom(-1))
        self.form.changed.connect(self._form_changed)
        self.lanes_box.toggled.connect(self._toggle_lanes)
        self.log_timer.timeout.connect(self.server_panel.refresh_log)

        self.run_button.clicked.connect(self.start_run)
        self.stop_button.clicked.connect(self.stop_run)
        self.watch_button.clicked.connect(self.watch_server)
        self.runs.busy_changed.connect(self._set_busy)
        self.runs.busy_changed.connect(self.replay.hold)
        self.runs.started.connect(lambda: self.results.sync([]))
        self.runs.started.connect(lambda: self.analysis.show_roofline(None))
        self.runs.recorded.connect(self.sessions.set_recorded)
        self.runs.recorded.connect(self.analysis.show_roofline)
        self.runs.finished.connect(self.run_finished)
        self.runs.finished.connect(self._close_if_asked)
        self.runs.banner.connect(self.show_banner)
        self.runs.binary_missing.connect(self.choose_binary)
        self.runs.status.connect(self.status.setText)
        self.renderer.progress.connect(self.status.setText)
        self.renderer.warning.connect(lambda text: self.show_banner(text, "info"))
        self.renderer.predicted.connect(self._show_prediction)

        self.open_button.clicked.connect(self.open_session_dialog)
        self.replay_bar.play_toggled.connect(
            lambda play: self.replay.play() if play else self.replay.pause()
        )
        self.replay_bar.seeked.connect(self.replay.seek)
        self.replay.loaded.connect(self.replay_bar.load)
        self.replay.moved.connect(self.replay_bar.set_position)
        self.replay.playing.connect(self.replay_bar.set_playing)
        self.replay.closed.connect(self.replay_bar.hide)
        self.replay.closed.connect(lambda: self.sessions.set_opened(None))
        self.replay.opened.connect(self.sessions.set_opened)
        self.replay.opened.connect(self.analysis.show_roofline)
        self.replay.experiment.connect(self.form.show_session)
        self.replay.finished.connect(self.replay_finished)
        self.replay.banner.connect(self.show_banner)
        self.replay.status.connect(self.status.setText)

        self.server_panel.start_requested.connect(self._start_server)
        self.server_panel.stop_requested.connect(self.hand_server.stop)
        self.hand_server.changed.connect(self._server_changed)
        self.hand_server.state.connect(self.server_panel.show_state)
        self.hand_server.ready.connect(self.server_panel.show_server)
        self.hand_server.banner.connect(self.show_banner)
        self.server_panel.calibrate_requested.connect(self.calibrate)
        self.server_panel.cancel_calibration.connect(self.calibrator.cancel)
        self.calibrator.busy_changed.connect(self._calibrating)
        self.calibrator.line.connect(self.server_panel.add_calibration_line)
        self.calibrator.failed.connect(self.server_panel.add_calibration_line)
        self.calibrator.stored.connect(self.server_panel.show_calibration)
        self.calibrator.known.connect(self.server_panel.show_calibration_known)

        self.library.open_requested.connect(lambda path: self.tasks.spawn(self.replay.open(path)))
        self.library.watch_requested.connect(self.open_watch)
        self.library.refresh_requested.connect(self.sessions.refresh)
        self.library.compare_requested.connect(self.open_compare)
        self.library.error.connect(lambda text: self.show_banner(text, "error"))
        self.left.currentChanged.connect(
            lambda index: (
                self.sessions.refresh() if self.left.widget(index) is self.library else None
            )
        )
        self.left.currentChanged.connect(
            lambda index: (
                self._check_calibration() if self.left.widget(index) is self.server_panel else None
            )
        )
        self.sessions.scanned.connect(self.library.show_infos)
        self.sessions.scanned.connect(lambda _: self.list_watches())
        self.library.folder_added.connect(self.sessions.add_folder)
        self.library.folder_forgotten.connect(self.sessions.forget_folder)
        self.sessions.folders_changed.connect(
            lambda folders: self.library.show_folders(folders, self.sessions.added)
        )
        self.library.show_folders(self.sessions.folders, self.sessions.added)
        self.sessions.failed.connect(lambda text: self.show_banner(text, "error"))

        self.slo_panel.evaluate_requested.connect(lambda: self.tasks.spawn(self.evaluate_slo()))
        self.analysis.slo_result.connect(self.slo_panel.show_result)
        self.analysis.slo_message.connect(self.slo_panel.show_message)
        self.analysis.roofline.connect(self.results.roofline.show_report)
        self.analysis.roofline_failed.connect(self.results.roofline.summary.setText)
        self.tune_panel.use_settings.connect(self.form.use_settings)
        self.tune_panel.use_settings.connect(lambda *_: self.left.setCurrentIndex(0))
        self._wire_machines()

    def _wire_machines(self) -> None:
        """The Machine picker's checks, and a run on several machines."""
        self.form.machines.attach(self.hosts)
        self.hosts.checked.connect(
            lambda host, facts: self.stack_runs.relabel(host, machine_label(host, facts))
        )
        self.runs.started.connect(lambda: self._stacked(False))
        self.replay.opened.connect(lambda *_: self._stacked(False))
        stacked = self.stack_runs
        stacked.busy_changed.connect(self._set_busy)
        stacked.busy_changed.connect(self.replay.hold)
        stacked.busy_changed.connect(lambda busy: self._stack_started() if busy else None)
        stacked.finished.connect(lambda *_: QTimer.singleShot(PUMP_INTERVAL_MS, self._fit_columns))
        stacked.compared.connect(lambda paths: self.open_compare(paths) if len(paths) > 1 else None)
        stacked.finished.connect(self.run_finished)
        stacked.finished.connect(self._close_if_asked)
        stacked.banner.connect(self.show_banner)
        stacked.status.connect(self.status.setText)
        stacked.binary_missing.connect(self.choose_binary)

    # -- what the tests and the scripted runs reach ------------------------------------------
    @property
    def running(self) -> bool:
        return self.runs.running or self.stack_runs.running

    @property
    def runner(self) -> Runner | None:
        return self.runs.runner

    @property
    def result(self) -> RunResult | None:
        return self.runs.result

    @property
    def pump(self) -> QTimer:
        return self.runs.pump

    @property
    def manual_server(self) -> LlamaServer | None:
        return self.hand_server.server

    # -- layout ----------------------------------------------------------------------------------
    def resizeEvent(self, event: Any) -> None:
        """Keep the three columns in proportion (``column_widths``); presenting, the grid and
        the Gantt share the width."""
        super().resizeEvent(event)
        width = self.width()
        if self.presentation.on:
            self.presentation.relayout()
        elif not self._sized_for or abs(self._sized_for - width) > 50:
            self._sized_for = width
            self._columns_by_hand = False
            self._fit_columns()

    def _fit_columns(self) -> None:
        """The columns' widths for this window and the results table as it is now (new rows
        may widen it), unless the user has dragged them since the window was last resized."""
        if self.presentation.on or self._columns_by_hand:
            return
        inner = self.width() - 2 * MARGIN - 2 * self.splitter.handleWidth()
        self.splitter.setSizes(list(column_widths(inner, self.results.natural_width())))

    def _results_grew(self) -> None:
        """A new row may widen the table: the columns fit it once the row is filled in, or,
        while a run (live or replayed) goes, in the frame after its last. Moved mid-run, the
        columns re-laid out and repainted every view in the frame that ended a configuration
        (0.1-0.3 s at 64 streams); meanwhile the table scrolls sideways, its first column
        pinned."""
        going = (
            self.model.status is RunStatus.RUNNING or self.running or self.replay.timer.isActive()
        )
        if not going:
            QTimer.singleShot(0, self._fit_columns)

    def _columns_dragged(self) -> None:
        self._columns_by_hand = True

    def show_banner(self, text: str, kind: str = "info") -> None:
        self.banner.setText(text)
        self.banner.setStyleSheet(banner_style(kind))
        self._banner_kind = kind
        self._show_banner()

    def _show_banner(self) -> None:
        """Presenting, only errors: the audience need not read "press Replay"."""
        quiet = self.presentation.on and self._banner_kind != "error"
        self.banner.setVisible(bool(self.banner.text()) and not quiet)

    def _presenting(self, on: bool) -> None:
        self.present_action.setChecked(on)
        self.captions_button.setVisible(on)
        for speaker in self.speaker_actions:
            speaker.setEnabled(on)
        self._show_banner()
        if on:
            self.setFocus()  # the speaker's keys, not a field's

    def play_or_pause(self) -> None:
        """Space: play or pause the open session's replay; with none open, run."""
        if self.replay.playback is not None:
            self.replay.toggle()
        elif not self.running:
            self.start_run()

    def stop(self) -> None:
        """Esc: stop the run, or pause the replay."""
        if self.running:
            self.stop_run()
        else:
            self.replay.pause()

    def _form_changed(self) -> None:
        """Keep the capacity panel, and whether the settings are calibrated, in step with
        the server settings being edited."""
        if (experiment := self.form.quietly_built()) is None:
            return
        self.capacity.update_for(experiment)
        self._check_calibration()

    def _check_calibration(self) -> None:
        """The Server tab says whether the form's server settings are calibrated."""
        experiment = self.form.quietly_built()
        if experiment is not None:
            self.calibrator.check(experiment.configs()[0])

    def _machine_held(self) -> str | None:
        """What else has the machine now, for the Tune tab: a tune starts servers of its own."""
        if self.running:
            return "the run"
        if self.calibrator.busy:
            return "the calibration"
        return "the hand-started server" if self.manual_server is not None else None

    def _toggle_lanes(self, on: bool) -> None:
        self.gantt.set_lanes(on)
        self.gantt.sync(self.model, self.model.last_t)
        for pane, model in zip(self.stack.panes, self.stack_runs.models, strict=False):
            pane.gantt.set_lanes(on)
            pane.gantt.sync(model, model.last_t)

    # -- running an experiment -------------------------------------------------------------------
    def start_run(self) -> None:
        """Run the form's experiment, unless it does not validate or the hand-started server
        holds the machine (each a failed run, so a scripted run ends)."""
        if self.running:
            return
        try:
            experiment = self.form.build()
        except ExperimentError as exc:
            self.show_banner(f"Fix the experiment first: {exc}", "error")
            self.run_finished.emit(RunStatus.FAILED)
            return
        if self.tune_panel.controller.running:
            self.show_banner("A tune has the machine: let it end or cancel it (Tune tab).", "error")
            self.run_finished.emit(RunStatus.FAILED)
            return
        if self.manual_server is not None or self.calibrator.busy:
            held = "calibration" if self.calibrator.busy else "hand-started server"
            self.show_banner(f"Stop the {held} first (Server tab).", "error")
            self.run_finished.emit(RunStatus.FAILED)
            return
        hosts = self.form.machines.ticked_hosts()
        if not hosts:
            self.show_banner("Tick a machine to run on (Machines, in the Experiment tab).", "error")
            self.run_finished.emit(RunStatus.FAILED)
            return
        self.form.edit_copy()  # a session's experiment, run again, is a new run's from now on
        url, key = self.form.external_url(), self.form.external_api_key_env()
        if hosts == [LOCAL]:
            self.runs.start(experiment, url, key)
            return
        if url is not None:
            self.show_banner(
                "An external server is measured from this machine alone: untick the other "
                "machines, or External server.",
                "error",
            )
            self.run_finished.emit(RunStatus.FAILED)
            return
        for host in hosts:
            if host not in self.hosts.facts:  # its check names the machine in its pane
                self.hosts.check(host, self.form.machines.model_for(host))
        chosen = [
            (h, machine_label(h, self.hosts.facts.get(h)), self.form.machines.model_for(h))
            for h in hosts
        ]
        self.stack_runs.start(chosen, experiment, url, key)
        self._stacked(True)

    def _stack_started(self) -> None:
        """What the views showed of an earlier run is void; a prediction is one machine's."""
        self.results.sync([])
        self._show_prediction("")

    def _stacked(self, on: bool) -> None:
        """The live views of one run, or the stacked views of a run on several machines;
        the server plots share the time axis of the Gantt(s) shown."""
        self.views.setVisible(not on)
        self.stack.setVisible(on)
        for pane in self.stack.panes if on else []:
            pane.gantt.set_lanes(self.lanes_box.isChecked())
        shown = self.stack.panes[0].gantt if on and self.stack.panes else self.gantt
        self.plots.memory.setXLink(shown)

    def stop_run(self) -> None:
        self.runs.stop()
        self.stack_runs.stop()

    def _set_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy and not self.calibrator.busy)
        self.stop_button.setEnabled(busy)
        self.form.setEnabled(not busy)
        self.server_panel.set_manual(self.manual_server is not None, busy)
        self.server_panel.set_calibrating(self.calibrator.busy, busy)
        self.status.setText("running" if busy else "ready")

    def _show_prediction(self, text: str) -> None:
        self.prediction_line.setText(text)
        self.prediction_line.setVisible(bool(text))

    # -- calibrating -----------------------------------------------------------------------------
    def calibrate(self) -> None:
        """Probe the real server with the experiment's first server settings, unless a run
        or the hand-started server holds the machine."""
        if self.running or self.manual_server is not None or self.tune_panel.controller.running:
            self.show_banner("Calibrate when no run, tune or hand-started server is up.", "error")
            return
        try:
            config = self.form.build().configs()[0]
        except WorkbenchError as exc:
            self.show_banner(f"Fix the experiment first: {exc}", "error")
            return
        self.calibrator.start(config)

    def _calibrating(self, busy: bool) -> None:
        """No run and no hand-started server while the probe has the machine."""
        present = self.manual_server is not None
        self.run_button.setEnabled(not busy and not present and not self.running)
        self.server_panel.set_calibrating(busy, self.running or present)
        self.server_panel.set_manual(present, busy or self.running)

    # -- sessions --------------------------------------------------------------------------------
    def open_session_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Open a session or a kept watch",
            str(self.out_dir),
            f"Sessions and watches ({SESSION_GLOB} *{WATCH_SUFFIX})",
        )
        if path and path.endswith(WATCH_SUFFIX):
            self.open_watch(Path(path))
        elif path:
            self.tasks.spawn(self.replay.open(Path(path)))

    def open_session_later(self, path: Path, replay_speed: int | None = None) -> None:
        """Open a session (and maybe replay it) from a plain slot, e.g. at start-up."""

        async def go() -> None:
            if not await self.replay.open(path):
                self.replay_finished.emit(RunStatus.FAILED)
            elif replay_speed:
                self.replay_bar.set_speed(replay_speed)
                self.replay.play()
            else:
                self.replay_finished.emit(self.model.status)

        self.tasks.spawn(go())

    def dragEnterEvent(self, event: Any) -> None:
        if any(u.toLocalFile().endswith(DROPPED) for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: Any) -> None:
        """A session file dropped on the window opens (from another machine, say); another
        tool's result files are imported into the output folder, and the last one opens."""
        paths = [Path(u.toLocalFile()) for u in event.mimeData().urls()]
        watches = [p for p in paths if p.name.endswith(WATCH_SUFFIX)]
        sessions = [p for p in paths if p.suffix == ".sqlite" and p not in watches]
        results = [p for p in paths if p.name.endswith(DROPPED[1:])]
        for path in watches:  # each kept watch replays in a window of its own
            self.open_watch(path)
            event.acceptProposedAction()
        if sessions:
            self.tasks.spawn(self.replay.open(sessions[0]))
            event.acceptProposedAction()
        elif results:
            self.tasks.spawn(self.import_and_open(results))
            event.acceptProposedAction()

    async def import_and_open(self, paths: list[Path]) -> None:
        imported = await self.sessions.import_files(paths)
        if imported:
            await self.replay.open(imported[-1])

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

    def watch_server(self) -> WatchSettingsDialog | None:
        """Ask the watch's settings of the server at the form's External server address (its
        API key too), starting from the last given; once they are right, watch it in a
        window of its own. A run may go on meanwhile, against it or not."""
        url = self.form.external_url()
        if not url:
            self.show_banner(
                "To watch a server, tick External server and give its address (Experiment tab).",
                "error",
            )
            return None
        key = self.form.external_api_key_env()
        if self.watch_dialog is not None:
            self.watch_dialog.close()
        dialog = WatchSettingsDialog(url, key, self.watch_texts, self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.chosen.connect(lambda texts, settings: self._watch_with(url, key, texts, settings))
        dialog.destroyed.connect(lambda *_: self._dialog_gone(dialog))
        self.watch_dialog = dialog
        dialog.open()
        return dialog

    def _dialog_gone(self, dialog: WatchSettingsDialog) -> None:
        """A settings dialog closed: forgotten, unless a newer one has taken its place."""
        if self.watch_dialog is dialog:
            self.watch_dialog = None

    def _watch_with(
        self, url: str, key: str | None, texts: WatchTexts, settings: WatchSettings
    ) -> WatchWindow:
        """Watch ``url`` with the settings the dialog read; remember what was typed."""
        self.watch_texts = texts
        return self._watch_window(WatchWindow(url, key, self.out_dir, settings))

    def open_watch(self, path: Path) -> WatchWindow:
        """Replay the watch kept at ``path`` in a watch window of its own (its file is read
        there, off the GUI thread; one it cannot read is one line in it)."""
        return self._watch_window(WatchWindow.replaying(path))

    def _watch_window(self, window: WatchWindow) -> WatchWindow:
        window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        window.destroyed.connect(
            lambda *_: self.watch_windows.remove(window) if window in self.watch_windows else None
        )
        self.watch_windows.append(window)
        window.show()
        window.start()
        return window

    def list_watches(self) -> None:
        """List the Sessions tab's kept watches again (as each scan of its sessions ends)."""
        self._watch_listings += 1
        self.tasks.spawn(self._list_watches(self._watch_listings))

    async def _list_watches(self, number: int) -> None:
        """The Sessions tab's kept watches, from the folders it lists sessions from; shown
        only if no later listing began meanwhile, so an older one that ends last (each walks
        every folder) never replaces a newer one's."""
        found = await kept_watches(self.sessions.folders)
        if number == self._watch_listings:
            self.library.show_watches(found)

    async def evaluate_slo(self) -> None:
        """The SLO panel's limits on the session the views show."""
        path = self.sessions.current_session_path()
        await self.analysis.evaluate_slo(path, self.slo_panel.slo())

    # -- a server by hand ------------------------------------------------------------------------
    def _start_server(self) -> None:
        """Start a server with the experiment's first settings."""
        try:
            settings = self.form.build().configs()[0].server
        except WorkbenchError as exc:
            self.show_banner(str(exc), "error")
            return
        self.hand_server.start(settings)

    def choose_binary(self) -> ChoiceDialog:
        """No llama-server was found: offer those on this machine. The choice is remembered
        and runs from the next Run on."""
        self.binary_chooser = binary_dialog(self)
        self.binary_chooser.chosen.connect(self._use_binary)
        self.binary_chooser.open()
        return self.binary_chooser

    def _use_binary(self, path: str, found_by: str) -> None:
        """The choice is remembered: discovery finds it from now on, unless a --server-bin
        given at start (the one that was missing) still came first."""
        self.runs.server_bin = self.hand_server.server_bin = None
        self.show_banner(f"llama-server: {path} ({found_by}). Press Run again.", "ok")

    def _server_changed(self, present: bool) -> None:
        """No run while a hand-started server holds the machine."""
        self.server_panel.set_manual(present, self.running or self.calibrator.busy)
        self.server_panel.set_calibrating(self.calibrator.busy, present or self.running)
        self.run_button.setEnabled(not present and not self.running and not self.calibrator.busy)

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

    def _close_if_asked(self) -> None:
        if self._close_when_stopped:
            QTimer.singleShot(0, self.close)

    def ask_stop_on_close(self) -> bool:
        answer = QMessageBox.question(
            self,
            "Stop the experiment?",
            "An experiment is running. Stop it, keep what finished, and close?",
        )
        return answer == QMessageBox.StandardButton.Yes

    def shutdown(self) -> None:
        """Stop the timers, the hand-started server and every task the window owns."""
        self.runs.pump.stop()
        self.capacity.stop()
        for window in [*self.compare_windows, *self.watch_windows]:
            window.close()
        self.replay.pause()
        self.log_timer.stop()
        self.hand_server.shutdown()
        self.tune_panel.stop()
        self.calibrator.shutdown()
        self.tasks.cancel_all()

    def screenshot(self, path: Path) -> bool:
        """A PNG of the window. Layouts asked for in this same tick (a seek re-binds the
        panes) are settled first: a picture taken before then shows stale sizes."""
        path.parent.mkdir(parents=True, exist_ok=True)
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
        return self.grab().save(str(path))
