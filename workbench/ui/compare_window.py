"""Sessions side by side in the window: the comparison table, the overlaid charts (the same
code as the exported report), warnings where the comparison is unfair, and Export report.

The session files are read in a worker thread (each is opened and summarised, which takes
long enough to freeze a window); the window shows "loading" meanwhile and draws the result
on the GUI thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis.compare import (
    ChartData,
    Comparison,
    chart_data,
    compare_sessions,
    session_column,
)
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.figures.metrics import View, shown_in
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.run.replay import load_session_events
from workbench.engine.store import Session, open_session
from workbench.ui.controllers.replay_controller import with_prediction
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.exports.report import write_report
from workbench.ui.run_model import RunModel
from workbench.ui.theme.qt_theme import session_colors, text_style
from workbench.ui.views.charts import MetricChart, with_predictions
from workbench.ui.views.gantt import GanttView
from workbench.ui.widgets.plot_widget import Plot


@dataclass(frozen=True)
class Loaded:
    """What one refresh shows: the table and the charts."""

    comparison: Comparison
    charts: list[ChartData]
    # Per chart, the places of its series that are a session's prediction (drawn dashed).
    dashed: dict[str, set[int]] = field(default_factory=dict)


@dataclass(frozen=True)
class Timeline:
    """One session as it happened (its run model rebuilt from the file), or why not."""

    path: Path
    model: RunModel | None
    error: str = ""


def load_comparison(paths: list[Path], relative: bool, predicted: bool = False) -> Loaded:
    """Open every session once and compare them (in a worker thread: it reads every record);
    with ``predicted``, each session's stored prediction beside it in the metric charts."""
    with contextlib.ExitStack() as stack:
        sessions = [stack.enter_context(open_session(p)) for p in paths]
        charts = chart_data(sessions, relative)
        guesses = [predicted_summaries(s) for s in sessions] if predicted else []
        if not any(guesses):
            return Loaded(compare_sessions(sessions, relative), charts)
        named = [(session_column(s), s.summaries()) for s in sessions]
        overlaid = {d.key: (d, k) for d, k in with_predictions(named, guesses, relative=relative)}
        charts = [overlaid.get(c.key, (c, set()))[0] for c in charts]
        dashed = {key: places for key, (_, places) in overlaid.items()}
        return Loaded(compare_sessions(sessions, relative), charts, dashed)


def predicted_summaries(session: Session) -> list[ConfigSummary] | None:
    """The configurations its run predicted (None: it made no prediction, or it is damaged:
    the comparison goes on without it)."""
    try:
        prediction = session.predictions()
    except WorkbenchError:
        return None
    return [c.summary for c in prediction.configs] if prediction is not None else None


def load_timelines(paths: list[Path]) -> list[Timeline]:
    """Each session's events folded into a run model (plain Python: fine in a worker thread)."""
    timelines = []
    for path in paths:
        try:
            events = with_prediction(path, load_session_events(path))
        except WorkbenchError as exc:
            timelines.append(Timeline(path, None, str(exc)))
            continue
        model = RunModel()
        model.apply([event for _, event in events])
        timelines.append(Timeline(path, model))
    return timelines


class CompareWindow(QWidget):
    def __init__(self, paths: list[Path], parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Compare sessions")
        self.paths = paths
        self.tasks = Tasks()  # the loads under way, cancelled when the window closes
        self._refreshes = 0  # numbers the refreshes: one that a later one overtook is dropped
        self.loading = QLabel()
        self.loading.setStyleSheet(text_style("quiet"))
        self.relative = QCheckBox("relative to 1 slot")
        self.relative.toggled.connect(self.refresh)
        self.predicted = QCheckBox("predicted (dashed)")
        self.predicted.setToolTip(
            "Beside each session's measured line, what its run predicted before it started "
            "(from the calibration of the machine it ran on), dashed in the same colour"
        )
        self.predicted.toggled.connect(self.refresh)
        self.export_button = export = QPushButton("Export report…")
        export.clicked.connect(self._export_dialog)
        self.warnings = QLabel()
        self.warnings.setWordWrap(True)
        self.warnings.setStyleSheet(text_style("warning"))
        self.table = QTableWidget()
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.charts = {f.key: MetricChart() for f in shown_in(View.CHART)}
        grid = QWidget()
        grid_layout = QGridLayout(grid)
        for i, chart in enumerate(self.charts.values()):
            grid_layout.addWidget(chart, i // 3, i % 3)
        after = len(self.charts)  # the memory curves take the next cell
        # Each run as it happened, on one time axis: its Gantt, and all memory curves together.
        self.memory = Plot()
        memory = self.memory.getPlotItem()
        memory.setTitle("Server memory (each from its own start)", size="11pt")
        memory.setLabel("left", "RSS", units="MiB")
        memory.setLabel("bottom", "time since start", units="s")
        memory.showGrid(x=True, y=True, alpha=0.25)
        memory.addLegend(offset=(10, 10), labelTextSize="9pt")
        grid_layout.addWidget(self.memory, after // 3, after % 3)
        self.gantts: list[GanttView] = []
        timelines = QWidget()
        self.timeline_layout = QVBoxLayout(timelines)
        self.timeline_layout.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        top.addWidget(self.relative)
        top.addWidget(self.predicted)
        top.addWidget(self.loading)
        top.addStretch(1)
        top.addWidget(export)
        # The trade-off and the TTFT distributions: as many charts as configurations, in
        # rows of three that scroll, each tall enough to read.
        trade_offs = QScrollArea()
        trade_offs.setWidgetResizable(True)
        inner = QWidget()
        self.trade_off_layout = QGridLayout(inner)
        trade_offs.setWidget(inner)
        tabs = QTabWidget()
        tabs.addTab(self.table, "Table")
        tabs.addTab(trade_offs, "Throughput vs TTFT, TTFT distributions")
        tabs.addTab(timelines, "Gantts")
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(grid)
        split.addWidget(tabs)
        # Fixed shares: the table and the Gantts arrive after the first layout, which would
        # otherwise give the charts what the table needs.
        split.setSizes([475, 525])
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.warnings)
        layout.addWidget(split, 1)
        self.resize(1500, 950)
        self.refresh()
        self.tasks.spawn(self._build_timelines())

    def refresh(self) -> None:
        """Reload the table and the charts from the session files, in a worker thread."""
        self._refreshes += 1
        self.loading.setText(f"loading {len(self.paths)} sessions…")
        self.loading.show()
        self.tasks.spawn(
            self._refresh(self._refreshes, self.relative.isChecked(), self.predicted.isChecked())
        )

    async def _refresh(self, number: int, relative: bool, predicted: bool) -> None:
        loaded: Loaded | str
        try:
            loaded = await asyncio.to_thread(load_comparison, self.paths, relative, predicted)
        except WorkbenchError as exc:
            loaded = str(exc)
        if number != self._refreshes:
            return  # the toggle changed meanwhile: the later refresh's result counts
        self.loading.hide()
        if isinstance(loaded, str):
            self.warnings.setText(loaded)
        else:
            self._show(loaded)

    def _show(self, loaded: Loaded) -> None:
        comparison = loaded.comparison
        self.warnings.setText("\n".join(f"Not like for like: {w}" for w in comparison.warnings))
        for data in loaded.charts:
            if data.key not in self.charts:
                cell = len(self.charts) - len(shown_in(View.CHART))
                self.charts[data.key] = MetricChart()
                self.charts[data.key].setMinimumHeight(260)
                self.trade_off_layout.addWidget(self.charts[data.key], cell // 3, cell % 3)
            self.charts[data.key].show_data(data, loaded.dashed.get(data.key, ()))
        rows = comparison.rows()
        headers = ["configuration", "metric", *comparison.columns]
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            values = [row["configuration"], row["metric"]] + [
                comparison.cell_text(row, c) for c in comparison.columns
            ]
            for c, text in enumerate(values):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

    async def _build_timelines(self) -> None:
        """The sessions' Gantts stacked (x linked) and their memory curves overlaid, rebuilt
        from the session files through the same views as a live run."""
        timelines = await asyncio.to_thread(load_timelines, self.paths)
        for number, timeline in enumerate(timelines):
            path, model = timeline.path, timeline.model
            if model is None:
                self.warnings.setText(timeline.error)
                continue
            gantt = GanttView()
            gantt.getPlotItem().setTitle(f"{path.name}: {model.name}", size="10pt")
            gantt.setMinimumHeight(160)
            gantt.sync(model, model.last_t)
            if self.gantts:
                gantt.setXLink(self.gantts[0])
            self.gantts.append(gantt)
            self.timeline_layout.addWidget(gantt)
            colors = session_colors()
            color = colors[number % len(colors)]
            self.memory.getPlotItem().plot(
                *model.rss, pen=pg.mkPen(color, width=2), name=f"{model.name} ({path.name})"
            )

    def closeEvent(self, event: QCloseEvent) -> None:
        """A load still under way would draw on a closed (deleted) window: cancel it."""
        self.tasks.cancel_all()
        super().closeEvent(event)

    def _export_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Report folder")
        if folder:
            self.export(Path(folder))

    def export(self, folder: Path) -> Path | None:
        """Write the report (its charts are drawn here, on the GUI thread). The button waits
        meanwhile: drawing lets events through, and a second click would start another."""
        self.export_button.setEnabled(False)
        try:
            return self._export(folder)
        finally:
            self.export_button.setEnabled(True)

    def _export(self, folder: Path) -> Path | None:
        try:
            with contextlib.ExitStack() as stack:
                sessions = [stack.enter_context(open_session(p)) for p in self.paths]
                report = write_report(sessions, folder, relative=self.relative.isChecked())
        except WorkbenchError as exc:
            self.warnings.setText(str(exc))
            return None
        self.warnings.setText(f"Report written: {report}")
        return report
