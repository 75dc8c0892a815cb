"""The Tune tab: what ``workbench tune`` is given (SLOs, users or a trace's window, traffic,
the settings to search, a budget), its progress as it goes, the tried configurations
charted, and its answer: the recommended settings, measured or only predicted (always said),
what they hold, the runners-up and why they lost, the server's command line, and "Use these
settings", which fills the experiment form. Its progress line and its verdict are
``workbench tune``'s words (``engine/tune/verdict``); a trace's window is read as its flags
are, by the same parsers within the same bounds (the trace settings'), into the same traffic
(``engine/tune/records.trace_traffic``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QSpinBox,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis.slo import peak_users
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.words import plural
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import (
    TIME_FORMS,
    Field,
    as_typed,
    field_named,
    fields_of,
    seconds_from_text,
)
from workbench.engine.config.workloads import TraceWorkload, kind_of
from workbench.engine.tune.records import (
    METRICS,
    ONLY,
    PERCENTILES,
    TRACE_WINDOW,
    WINDOW_TIMES,
    Recommendation,
    SloTarget,
    TriedConfig,
    TuneProgress,
    TuneRequest,
    trace_traffic,
)
from workbench.engine.tune.search import verification_workload
from workbench.engine.tune.slo_targets import value_ms
from workbench.engine.tune.space import NOT_SEARCHED, parse_space
from workbench.engine.tune.verdict import clock, progress_words, settings_words, verdict_words
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.controllers.tune_controller import TuneController, TuneFunction
from workbench.ui.panels.pickers import ChoiceDialog, model_picker
from workbench.ui.theme.qt_theme import text_style
from workbench.ui.views.charts import discard
from workbench.ui.views.pareto_chart import KEY, ParetoChart
from workbench.ui.widgets.read_only_table import read_only_table

FIXED, TRACE, CONVERSATIONS, BUILTIN = (
    "fixed lengths",
    "a recorded trace",
    "conversations",
    "the built-in prompts",
)
SPACE_EXAMPLE = "slots=1..16; ctx>=4096; cache_type_k=f16,q8_0; flash_attn=on,off; threads"
STEPS = 1000  # the progress bar's range
WHOLE_TRACE = {  # a window field left empty: the trace setting's default, as its flag not given
    "trace_start_s": "0: from its start",
    "trace_duration_s": "to its end",
    "max_requests": "every row",
    "time_scale": "1: as recorded",
}
TRACE_LOAD = "The trace window below is the load."  # a trace's, in place of the users
LIMIT_WIDTH = 95  # px: an SLO's limit box


def narrow(combo: QComboBox, letters: int) -> None:
    """A choice as narrow as ``letters`` letters (its longest entry made the tab, a third
    of a small screen, scroll sideways)."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(letters)


def done_share(progress: TuneProgress) -> float:
    """How much of the tune is done: by its ETA where it has one, else by its budget."""
    if progress.phase == "done":
        return 1.0
    whole = progress.elapsed_s + progress.eta_s if progress.eta_s is not None else progress.budget_s
    return min(1.0, progress.elapsed_s / whole) if whole > 0 else 0.0


HOW_TO_RUN = (
    "repeats",
    "warmup",
    "request_timeout_s",
    "model_name",
    "workers",
    "stop_when_saturated",
)
"""The workload settings that say how the form's experiment is run and measured (how often,
its warm-ups, how long a request may take, the model's name an external server wants, the
client processes, when a saturated repeat stops), not what each request is or when it goes:
"Use these settings" keeps the form's. The schema does not tell these apart, so they are
named here (a test checks each is a workload setting)."""


def form_settings(
    recommendation: Recommendation, request: TuneRequest
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The experiment form's server and workload tables for the recommended configuration:
    its settings and the model tuned, and the traffic it was verified with, of the kind it
    was (its ``kind``, and its ``arrival`` where it has one). Every other setting of that
    kind is None, which the form leaves out, to its default, as the tune's runs had it
    (``ExperimentForm.use_settings``): what the form held for its own load (a trace tune
    sends no ``max_tokens``, no ``requests`` or ``concurrency``; a tune of fixed lengths no
    ``rate``), so that what runs is what was tuned; but for the settings of how it is run
    (``HOW_TO_RUN``), the form's."""
    winner = recommendation.winner
    assert winner is not None
    server = dict(winner.settings)
    if request.model and "model" not in server:
        server["model"] = request.model
    workload = verification_workload(request)
    kind = kind_of(workload)
    stated: dict[str, Any] = {
        f.name: f.default if f.name in ("kind", "arrival") else None
        for f in fields_of(kind)
        if f.name not in HOW_TO_RUN
    }
    return server, {**stated, **workload}


def window_field(name: str) -> Field:
    """A setting of a trace's window, as the trace settings declare it."""
    return field_named(TraceWorkload, name)


def window_tip(f: Field) -> str:
    """A window field's tooltip: what the trace setting means and its bounds, as declared,
    and for a time how it is typed."""
    meaning = f.setting.help.removeprefix("for `trace`: ").replace("`", "")
    bounds = f.range
    assert bounds is not None  # every window setting is a bounded number
    typed = f" A time: {TIME_FORMS}." if f.name in WINDOW_TIMES else ""
    return (
        f"{meaning[0].upper()}{meaning[1:]}. From {as_typed(bounds.low)} to "
        f"{as_typed(bounds.high)} ({bounds.note}); empty: {WHOLE_TRACE[f.name]}.{typed}"
    )


def window_value(f: Field, text: str) -> Any:
    """One window field's text as its flag reads it (a time as ``10m``, a number as one),
    validated as the trace setting is: ValueError (not one) or WorkbenchError (out of its
    bounds)."""
    return f.validated(seconds_from_text(text) if f.name in WINDOW_TIMES else f.from_text(text))


def _file_row(placeholder: str, pick: Callable[[], None]) -> tuple[QLineEdit, QHBoxLayout]:
    """A file's name to type, and a button beside it that picks one."""
    edit = QLineEdit()
    edit.setPlaceholderText(placeholder)
    button = QPushButton("…")
    button.setMaximumWidth(32)
    button.clicked.connect(pick)
    row = QHBoxLayout()
    row.addWidget(edit)
    row.addWidget(button)
    return edit, row


class SloRow(QWidget):
    """One SLO: a metric, a percentile and a limit in ms, and a button that removes it."""

    removed = Signal(object)

    def __init__(self, metric: str = "ttft", percentile: int = 90, limit_ms: float = 2000.0):
        super().__init__()
        # not "metric": it would hide QPaintDevice.metric, which Qt calls to paint the row
        self.metric_box = QComboBox()
        for name in METRICS:
            self.metric_box.addItem(name.upper(), name)
        self.metric_box.setCurrentIndex(METRICS.index(metric))
        self.percentile = QComboBox()
        self._offer_percentiles()
        self.percentile.setCurrentIndex(self.percentile.findData(percentile))
        self.metric_box.currentIndexChanged.connect(self._offer_percentiles)
        self.limit = QDoubleSpinBox()
        self.limit.setRange(0, 3_600_000)
        self.limit.setDecimals(0)
        self.limit.setSuffix(" ms")
        self.limit.setValue(limit_ms)
        self.limit.setMinimumWidth(LIMIT_WIDTH)  # its own, for 3,600,000 ms, overflowed the tab
        remove = QToolButton()
        remove.setText("✕")
        remove.setToolTip("remove this SLO")
        remove.clicked.connect(self._remove)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)  # with the tab's margins, a row fits its column at 1366 px
        layout.addWidget(self.metric_box)
        layout.addWidget(self.percentile)
        layout.addWidget(QLabel("≤"))
        layout.addWidget(self.limit, 1)
        layout.addWidget(remove)

    def _remove(self) -> None:
        self.removed.emit(self)

    def _offer_percentiles(self) -> None:
        """The percentiles the chosen metric has (a stall's p99 only), the one chosen kept
        where the metric has it."""
        chosen = self.percentile.currentData()
        allowed = ONLY.get(self.metric_box.currentData(), PERCENTILES)
        self.percentile.clear()
        for p in allowed:
            self.percentile.addItem(f"p{p}", p)
        self.percentile.setCurrentIndex(max(0, self.percentile.findData(chosen)))

    def target(self) -> SloTarget:
        """The SLO this row says; ValueError (in words) for a limit of 0."""
        return SloTarget(
            self.metric_box.currentData(), self.percentile.currentData(), self.limit.value()
        )


class TunePanel(QWidget):
    """Emits ``use_settings`` (server table, workload table) when the recommendation is
    taken into the experiment form. ``tune`` stands in for the engine's search (tests);
    ``held`` says what else has the machine now (a run), if anything: a tune then waits."""

    use_settings = Signal(dict, dict)

    def __init__(
        self,
        tasks: Tasks,
        out_dir: Path,
        server_bin: str | None = None,
        tune: TuneFunction | None = None,
        held: Callable[[], str | None] = lambda: None,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.out_dir = out_dir
        self.held = held
        self.server_bin = server_bin
        self.controller = TuneController(tasks, tune, self)
        self.request: TuneRequest | None = None  # the tune running or last run
        self.recommendation: Recommendation | None = None
        self.picker: ChoiceDialog | None = None
        self.chart: ParetoChart | None = None  # made with the first point: most never tune
        self.chart_window: ParetoChart | None = None
        self._drawn: tuple[tuple[TriedConfig, ...], TriedConfig | None] = ((), None)

        self.slo_rows: list[SloRow] = []
        self.slo_box = QVBoxLayout()
        add_slo = QPushButton("Add an SLO")
        add_slo.clicked.connect(lambda: self.add_slo("tpot", 50, 120.0))
        slos = QGroupBox("Service level")
        slos.setToolTip("each SLO limits a percentile of a latency, in ms")
        slos_layout = QVBoxLayout(slos)
        slos_layout.addLayout(self.slo_box)
        slos_layout.addWidget(add_slo)

        self.at_once = QRadioButton("users at once")
        self.at_once.setChecked(True)
        self.from_registered = QRadioButton("registered users")
        self.users = self._count(0, 10_000, 8)
        self.registered = self._count(0, 10_000_000, 400)
        self.online = QDoubleSpinBox()
        self.online.setRange(0, 1)
        self.online.setDecimals(3)
        self.online.setSingleStep(0.01)
        self.online.setValue(0.05)  # as workbench tune's --online
        self.online.setToolTip("the share of registered users online at once")
        self.users_said = QLabel()
        self.load_inputs = QWidget()  # hidden with a trace, whose window is the load
        load_rows = QFormLayout(self.load_inputs)
        load_rows.setContentsMargins(0, 0, 0, 0)
        load_rows.addRow(self.at_once, self.users)
        load_rows.addRow(self.from_registered, self.registered)
        load_rows.addRow("online share", self.online)
        load_rows.addRow("", self.users_said)
        self.trace_load = QLabel(TRACE_LOAD)
        self.trace_load.setWordWrap(True)
        load = QGroupBox("Load")
        load_layout = QVBoxLayout(load)
        load_layout.addWidget(self.load_inputs)
        load_layout.addWidget(self.trace_load)
        for changed in (self.registered.valueChanged, self.online.valueChanged):
            changed.connect(self._say_users)
        self.at_once.toggled.connect(self._say_users)

        self.traffic = QComboBox()
        self.traffic.addItems([FIXED, TRACE, CONVERSATIONS, BUILTIN])
        narrow(self.traffic, 12)
        self.input_tokens = self._count(1, 1_000_000, 512)
        self.max_tokens = self._count(1, 1_000_000, 128)
        self.trace, trace_row = _file_row("a .jsonl trace (Mooncake or AIPerf)", self._pick_trace)
        traffic = QGroupBox("Traffic")
        self.traffic_rows = QFormLayout(traffic)
        self.traffic_rows.addRow("requests", self.traffic)
        self.traffic_rows.addRow("input tokens", self.input_tokens)
        self.traffic_rows.addRow("max tokens", self.max_tokens)
        self.traffic_rows.addRow("trace", trace_row)
        # a box of its own: its labels, the trace settings', would widen the traffic's column
        self.window_box = QGroupBox("Trace window")
        self.window_box.setToolTip("what each verification run replays of the trace")
        window_rows = QFormLayout(self.window_box)
        self.window_edits: dict[str, QLineEdit] = {}  # not "window": QWidget.window()
        for name in TRACE_WINDOW:
            f = window_field(name)
            edit = QLineEdit()
            edit.setPlaceholderText(WHOLE_TRACE[name])
            edit.setToolTip(window_tip(f))
            self.window_edits[name] = edit
            window_rows.addRow(f.setting.label, edit)
        self.traffic.currentTextChanged.connect(self._traffic_changed)

        self.model, model_row = _file_row("the default model", self._pick_model)
        self.space = QLineEdit()
        self.space.setPlaceholderText(SPACE_EXAMPLE)
        names = [f.name for f in fields_of(ServerSettings) if f.name not in NOT_SEARCHED]
        self.space.setToolTip(
            "the server settings to search, ';' between them: name=a,b, name=LOW..HIGH "
            "(the doublings between), name>=N, or a bare name (its usual values); empty: "
            f"slots. Settings: {', '.join(names)}"
        )
        self.budget = self._count(1, 24 * 60, 10)
        self.budget.setSuffix(" min")
        self.budget.setToolTip("the whole search: calibration, predictions and verifying runs")
        self.draft = QLineEdit()
        self.draft.setPlaceholderText("none")
        self.draft.setToolTip(
            "a draft model (GGUF) for speculative decoding: every combination is tried with it "
            "and without, measured (the model does not predict drafting)"
        )
        search = QGroupBox("Search")
        search_rows = QFormLayout(search)
        search_rows.addRow("model", model_row)
        search_rows.addRow("draft model", self.draft)
        search_rows.addRow("space", self.space)
        search_rows.addRow("budget", self.budget)

        self.start_button = QPushButton("Start tuning")
        self.start_button.clicked.connect(self.start)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.cancel_button)
        self.error = QLabel()
        self.error.setObjectName("tuneError")
        self.error.setWordWrap(True)
        self.error.setTextFormat(Qt.TextFormat.PlainText)  # it quotes what was typed
        self.error.setStyleSheet(text_style("error"))
        self.error.hide()
        self.progress = QProgressBar()
        self.progress.setRange(0, STEPS)
        self.progress.setValue(0)
        self.phase = QLabel("Not started.")
        self.phase.setWordWrap(True)
        self.phase.setTextFormat(Qt.TextFormat.PlainText)

        self.chart_place = QVBoxLayout()
        self.enlarge = QPushButton("Chart in a window")
        self.enlarge.setToolTip("the same chart, as large as a window (for a projector)")
        self.enlarge.clicked.connect(self.open_chart_window)
        self.enlarge.hide()
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        self.verdict.setTextFormat(Qt.TextFormat.PlainText)  # settings and reasons as sent
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = read_only_table()
        self.table.hide()
        self.command = QLineEdit()
        self.command.setReadOnly(True)
        self.command.setPlaceholderText("the server's command line, once recommended")
        copy = QPushButton("Copy")
        copy.setToolTip("copy the command line")
        copy.clicked.connect(lambda: QApplication.clipboard().setText(self.command.text()))
        command_row = QHBoxLayout()
        command_row.addWidget(self.command, 1)
        command_row.addWidget(copy)
        self.use_button = QPushButton("Use these settings")
        self.use_button.setToolTip("fill the experiment form with the recommended settings")
        self.use_button.setEnabled(False)
        self.use_button.clicked.connect(self._use)

        # What to tune for: folded away while a tune goes, so its progress and chart show.
        self.inputs_toggle = QToolButton()
        self.inputs_toggle.setText("What to tune for")
        self.inputs_toggle.setCheckable(True)
        self.inputs_toggle.setChecked(True)
        self.inputs_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.inputs = QWidget()
        inputs = QVBoxLayout(self.inputs)
        inputs.setContentsMargins(0, 0, 0, 0)
        for box in (slos, load, traffic, self.window_box, search):
            inputs.addWidget(box)
        self.inputs_toggle.toggled.connect(self._fold_inputs)
        self._fold_inputs(True)
        self.key = QLabel(KEY)
        self.key.setWordWrap(True)
        self.key.hide()

        body = QWidget()
        layout = QVBoxLayout(body)
        margins = layout.contentsMargins()  # narrower at the sides: an SLO row fits 1366 px
        layout.setContentsMargins(6, margins.top(), 6, margins.bottom())
        layout.addLayout(buttons)
        layout.addWidget(self.error)
        layout.addWidget(self.progress)
        layout.addWidget(self.phase)
        layout.addWidget(self.inputs_toggle)
        layout.addWidget(self.inputs)
        layout.addLayout(self.chart_place)
        layout.addWidget(self.key)
        layout.addWidget(self.enlarge)
        layout.addWidget(self.verdict)
        layout.addWidget(self.table)
        layout.addLayout(command_row)
        layout.addWidget(self.use_button)
        layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(body)
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(scroll)

        self.add_slo("ttft", 90, 2000.0)
        self.add_slo("tpot", 50, 120.0)
        self._traffic_changed()
        self._say_users()
        self.controller.busy_changed.connect(self._busy)
        self.controller.progressed.connect(self.show_progress)
        self.controller.finished.connect(self.show_recommendation)
        self.controller.failed.connect(self._failed)

    @staticmethod
    def _count(low: int, high: int, value: int) -> QSpinBox:
        spin = QSpinBox()
        spin.setRange(low, high)
        spin.setValue(value)
        return spin

    # -- the inputs --------------------------------------------------------------------------
    def add_slo(self, metric: str, percentile: int, limit_ms: float) -> SloRow:
        row = SloRow(metric, percentile, limit_ms)
        row.removed.connect(self._remove_slo)
        self.slo_rows.append(row)
        self.slo_box.addWidget(row)
        return row

    def _remove_slo(self, row: SloRow) -> None:
        self.slo_rows.remove(row)
        self.slo_box.removeWidget(row)
        row.deleteLater()

    def traced(self) -> bool:
        """Whether the traffic is a trace, whose window is the load (no users read)."""
        return self.traffic.currentText() == TRACE

    def users_wanted(self) -> int:
        """The users at once: as typed, or the registered users' online share, rounded up."""
        if self.at_once.isChecked():
            return self.users.value()
        return peak_users(self.registered.value(), self.online.value())

    def _say_users(self) -> None:
        registered = self.from_registered.isChecked()
        for widget in (self.registered, self.online):
            widget.setEnabled(registered)
        self.users.setEnabled(not registered)
        self.users_said.setText(
            f"= {plural(self.users_wanted(), 'user')} at once" if registered else ""
        )

    def _traffic_changed(self) -> None:
        kind = self.traffic.currentText()
        for widget in (self.input_tokens, self.max_tokens):
            self.traffic_rows.setRowVisible(widget, kind == FIXED)
        self.traffic_rows.setRowVisible(3, kind == TRACE)
        self.window_box.setVisible(kind == TRACE)
        self.load_inputs.setEnabled(kind != TRACE)
        self.load_inputs.setVisible(kind != TRACE)
        self.trace_load.setVisible(kind == TRACE)

    def traffic_table(self) -> dict[str, Any]:
        """The experiment's ``[workload]`` table the candidates are measured with; a trace's
        is its window, as ``workbench tune --trace`` makes it. ValueError (one line) for a
        trace not chosen or a window setting out of its bounds."""
        kind = self.traffic.currentText()
        if kind == FIXED:
            return {
                "input_tokens": self.input_tokens.value(),
                "max_tokens": self.max_tokens.value(),
            }
        if kind == TRACE:
            if not (trace := self.trace.text().strip()):
                raise ValueError("Choose the trace file to replay, or another kind of requests.")
            return trace_traffic(trace, self.window_settings())
        if kind == CONVERSATIONS:
            return {"kind": CONVERSATIONS}
        return {}

    def window_settings(self) -> dict[str, float | None]:
        """The trace window's settings as typed (None: left empty), each read as its flag
        is and checked as the trace setting is: ValueError naming the field and its
        bounds."""
        settings: dict[str, float | None] = {}
        for name, edit in self.window_edits.items():
            f = window_field(name)
            text = edit.text().strip()
            try:
                settings[name] = window_value(f, text) if text else None
            except ValueError as exc:  # not a number, not a time
                raise ValueError(f"Trace window: {f.setting.label}: {exc}.") from None
            except WorkbenchError:
                assert f.range is not None
                raise ValueError(
                    f"Trace window: {f.setting.label} {f.range.words()}, got {text}."
                ) from None
        return settings

    def _pick_trace(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Trace", "", "Traces (*.jsonl)")
        if path:
            self.trace.setText(path)

    def _pick_model(self) -> None:
        self.picker = model_picker(self)
        self.picker.chosen.connect(lambda path, _: self.model.setText(path))
        self.picker.open()

    def tune_request(self) -> TuneRequest:
        """What the tab says, checked: ValueError (one line, in words) for what is wrong."""
        if not self.slo_rows:
            raise ValueError("Add at least one SLO: a tune looks for settings that meet one.")
        slos = tuple(row.target() for row in self.slo_rows)
        names = [s.name for s in slos]
        if twice := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"{twice[0]} is limited twice: keep one of them.")
        traffic = self.traffic_table()
        users = None if self.traced() else self.users_wanted()  # a trace: its window is the load
        if users is not None and users < 1:
            raise ValueError("The load is under one user at once: give at least one.")
        space = self.space.text().strip()
        try:
            parse_space(space)
        except WorkbenchError as exc:
            raise ValueError(str(exc)) from None
        return TuneRequest(
            slos=slos,
            users=users,
            model=self.model.text().strip() or None,
            traffic=traffic,
            space=space,
            budget_s=60.0 * self.budget.value(),
            out_dir=self.out_dir,
            server_bin=self.server_bin,
            draft_model=self.draft.text().strip() or None,
        )

    # -- a tune --------------------------------------------------------------------------------
    def start(self) -> None:
        if self.controller.running:
            return
        try:
            request = self.tune_request()
        except ValueError as exc:
            self.show_error(str(exc))
            return
        if (holder := self.held()) is not None:
            self.show_error(f"Wait until {holder} is done: a tune starts servers of its own.")
            return
        self.error.hide()
        self.request = request
        self.recommendation = None
        self.verdict.setText("")
        self.table.hide()
        self.command.clear()
        self.use_button.setEnabled(False)
        self.progress.setValue(0)
        self.phase.setText("Starting…")
        self._draw((), None)
        self.inputs_toggle.setChecked(False)
        self.controller.start(request)

    def cancel(self) -> None:
        self.controller.cancel()
        self.phase.setText("Cancelling: stopping what it started, keeping what it found…")

    def stop(self) -> None:
        """The window closes: the search is told to stop, the chart's window closes."""
        self.controller.cancel()
        if self.chart_window is not None:  # pyqtgraph's close() frees the plot: not twice
            self.chart_window.hide()
            discard(self.chart_window)
            self.chart_window = None

    def _fold_inputs(self, shown: bool) -> None:
        self.inputs.setVisible(shown)
        self.inputs_toggle.setArrowType(
            Qt.ArrowType.DownArrow if shown else Qt.ArrowType.RightArrow
        )

    def _busy(self, busy: bool) -> None:
        self.start_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)

    def show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.show()

    def _failed(self, text: str) -> None:
        """The search could not go on (nothing fits, a model not found): said, and the
        inputs shown again to change."""
        self.show_error(text)
        self.phase.setText("The tune stopped without an answer.")
        self.progress.setValue(0)
        self.inputs_toggle.setChecked(True)

    def show_progress(self, progress: TuneProgress) -> None:
        self.progress.setValue(round(STEPS * done_share(progress)))
        self.phase.setText(progress_words(progress))
        if progress.tried:
            self._draw(progress.tried, None)

    def show_recommendation(self, recommendation: Recommendation) -> None:
        self.recommendation = recommendation
        self.progress.setValue(STEPS)
        self.phase.setText(f"Finished in {clock(recommendation.elapsed_s)}.")
        self._draw(recommendation.tried, recommendation.winner)
        self.verdict.setText("\n".join(verdict_words(recommendation)))
        self._fill_table(recommendation)
        self.command.setText(recommendation.command_line or "")
        self.command.setCursorPosition(0)  # the binary's name first
        self.use_button.setEnabled(recommendation.winner is not None)

    def _use(self) -> None:
        if self.recommendation is None or self.recommendation.winner is None or not self.request:
            return
        self.use_settings.emit(*form_settings(self.recommendation, self.request))

    # -- the chart and the answer --------------------------------------------------------------
    def _draw(self, tried: tuple[TriedConfig, ...], winner: TriedConfig | None) -> None:
        """The chart (and its window) redrawn when what it shows changed."""
        if (tried, winner) == self._drawn:
            return
        self._drawn = (tried, winner)
        if self.chart is None:
            if not tried:
                return
            self.chart = ParetoChart()
            self.chart.setMinimumHeight(280)
            self.chart_place.addWidget(self.chart)
            self.key.show()
            self.enlarge.show()
        slos = self.request.slos if self.request is not None else ()
        for chart in (self.chart, self.chart_window):
            if chart is not None:
                chart.show_tried(tried, slos, winner)

    def open_chart_window(self) -> ParetoChart:
        if self.chart_window is None:
            self.chart_window = ParetoChart()
            self.chart_window.setWindowTitle("Tune: the tried configurations")
            self.chart_window.resize(1000, 650)
            self.chart_window.show_tried(
                self._drawn[0], self.request.slos if self.request else (), self._drawn[1]
            )
        self.chart_window.show()
        self.chart_window.activateWindow()
        return self.chart_window

    def _fill_table(self, recommendation: Recommendation) -> None:
        rows = [c for c in (recommendation.winner, *recommendation.runners_up) if c is not None]
        slos = recommendation.slos
        headers = [
            "configuration",
            "figures",
            *(f"{s.metric.upper()} p{s.percentile} ms" for s in slos),
            "agg tok/s",
            "why not",
        ]
        self.table.clear()
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(rows))
        for r, config in enumerate(rows):
            figures = config.measured if config.measured is not None else config.predicted
            shown = [value_ms(s, figures) for s in slos]
            tok_s = config.figure("agg_tok_s")
            cells = (
                config.label,
                config.source,
                *("–" if v is None else f"{v:.0f}" for v in shown),
                "–" if tok_s is None else f"{tok_s:.1f}",
                "recommended" if config is recommendation.winner else config.why_lost or "",
            )
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setToolTip(settings_words(config.settings))
                self.table.setItem(r, c, item)
        self.table.setVisible(bool(rows))
