"""The lab's table filling in as configurations finish, and small charts against slots."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QTableView,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.base.states import ConfigStatus
from workbench.engine.figures.metrics import Figure, View, shown_in
from workbench.engine.figures.predicted import RunPrediction
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.predict.sweep import COMPARED, prediction_error
from workbench.ui.theme.qt_theme import signal_color
from workbench.ui.views.charts import MetricChart, with_predictions
from workbench.ui.views.roofline_view import RooflineView
from workbench.ui.views.verdicts_view import VerdictsView
from workbench.ui.widgets import plain_text
from workbench.ui.widgets.read_only_table import read_only_table, two_lines
from workbench.ui.widgets.shown_late import DrawnWhenShown
from workbench.ui.widgets.whole_tabs import whole_tabs

# A warning sign after the label of a configuration whose numbers the client shaped or whose
# cross-checks disagree: short, so the lab's columns stay in view at 1366 px; the tooltip says why.
TRUST_MARK = "\u26a0"


def tooltip(figure: Figure) -> str:
    return f"{figure.heading}: {figure.definition}. Over repeats: {figure.combine.value}"


BESIDE = "predicted / measured"  # a compared column's third header line, with a prediction


def predicted_by_config(prediction: RunPrediction | None) -> dict[int, ConfigSummary]:
    """Each predicted configuration's summary, by its place in the sweep."""
    if prediction is None:
        return {}
    return {config.config_index: config.summary for config in prediction.configs}


def compared_cell(figure: Figure, predicted: ConfigSummary, measured: ConfigSummary) -> str:
    """A compared figure's cell beside its prediction: ``1.55 / 1.62 (-4%)``, the error
    ((predicted - measured) / measured) where both have the figure."""
    error = prediction_error(predicted, measured, figure.key)
    shown = f"{figure.cell(predicted)} / {figure.cell(measured)}"
    return shown if error is None else f"{shown} ({error:+.0%})"


class PinnedFirstColumn(QTableView):
    """The table's first column (which configuration a row is), drawn over the table so it
    stays in view while the others scroll sideways: at 1366 px they do not all fit. It
    shows the table's own model, so its cells, colours and tooltips are the table's."""

    def __init__(self, table: QTableWidget) -> None:
        super().__init__(table)
        self.table = table
        self.setModel(table.model())
        self.setSelectionModel(table.selectionModel())
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().hide()
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        for column in range(1, table.columnCount()):
            self.setColumnHidden(column, True)
        table.viewport().stackUnder(self)
        table.horizontalHeader().sectionResized.connect(self._place)
        table.horizontalHeader().geometriesChanged.connect(self._place)
        table.verticalScrollBar().valueChanged.connect(self.verticalScrollBar().setValue)
        self.verticalScrollBar().valueChanged.connect(table.verticalScrollBar().setValue)
        table.installEventFilter(self)
        self._place()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            self._place()
        return False

    def _place(self) -> None:
        """Over the table's first column, header included, as wide and tall as it."""
        table, frame = self.table, self.table.frameWidth()
        header = table.horizontalHeader().height()
        self.horizontalHeader().setFixedHeight(header)
        self.setColumnWidth(0, table.columnWidth(0))
        self.setGeometry(frame, frame, table.columnWidth(0), table.viewport().height() + header)


class ResultsView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.columns: tuple[Figure, ...] = ()
        self.table = read_only_table()
        self.table.setObjectName("resultsTable")
        self.table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        # A stretched last column keeps the width it was stretched to when the others grow
        # with the rows, and then scrolls out of sight: each column is as wide as it needs.
        self.table.horizontalHeader().setStretchLastSection(False)
        self.pinned = PinnedFirstColumn(self.table)
        self._set_columns(shown_in(View.WINDOW))
        self._charts_page = LiveCharts()
        self.charts = self._charts_page.charts
        self.live_charts = self._charts_page.figures
        self.tabs = whole_tabs(QTabWidget())
        self.tabs.addTab(self.table, "Results")
        self.tabs.addTab(self._charts_page, "Charts")
        self.verdicts = VerdictsView()
        self.tabs.addTab(self.verdicts, "Verdicts")
        self.roofline = RooflineView()
        self.tabs.addTab(self.roofline, "Roofline")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)
        self._shown = 0
        self._summaries: list[ConfigSummary] = []
        self._prediction: RunPrediction | None = None

    def _set_columns(self, columns: tuple[Figure, ...], predicted: bool = False) -> None:
        """The catalogue's figures as this table's columns, each header's tooltip its
        definition; with a prediction, the compared ones say they hold both."""
        self.columns = columns
        self.table.setColumnCount(len(columns))
        beside = set(COMPARED) if predicted else set()
        self.table.setHorizontalHeaderLabels(
            [two_lines(f.header) + (f"\n{BESIDE}" if f.key in beside else "") for f in columns]
        )
        for column, figure in enumerate(columns):
            note = f"\n{BESIDE} (error)" if figure.key in beside else ""
            self.table.horizontalHeaderItem(column).setToolTip(tooltip(figure) + note)

    def sync(self, summaries: list[ConfigSummary], prediction: RunPrediction | None = None) -> None:
        """The table (and charts, verdicts) for ``summaries``; with the run's
        ``prediction``, each compared figure shows its predicted value beside the measured
        one with the error, and the charts draw the predicted values dashed."""
        shown = summaries[: self._shown]
        # The optional figures (steady state, TTFO, conversations) are columns only where a
        # configuration has them: a plain burst's table keeps the lab's columns alone.
        columns = shown_in(View.WINDOW, having=summaries)
        if (
            columns != self.columns
            or len(summaries) < self._shown
            or any(a is not b for a, b in zip(shown, self._summaries, strict=False))
            or prediction is not self._prediction
        ):
            self.table.setRowCount(0)  # another run, session, prediction or set of columns
            self._shown = 0
            self._set_columns(columns, predicted=prediction is not None)
        self._summaries = list(summaries)
        self._prediction = prediction
        guessed = predicted_by_config(prediction)
        for summary in summaries[self._shown :]:
            r = self.table.rowCount()
            self.table.insertRow(r)
            guess = guessed.get(summary.index)
            for c, figure in enumerate(self.columns):
                beside = guess is not None and figure.key in COMPARED
                text = compared_cell(figure, guess, summary) if beside else figure.cell(summary)
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if summary.status != ConfigStatus.OK or summary.not_same_task:
                    why = summary.error or summary.not_same_task or summary.status
                    item.setToolTip(plain_text.tooltip(why))
                    item.setForeground(signal_color("error"))
                elif summary.trust_notes:  # measured, but not by the server's numbers alone
                    item.setToolTip(plain_text.tooltip("\n".join(summary.trust_notes)))
                    item.setForeground(signal_color("warning"))
                if figure.key == "label" and summary.not_same_task:
                    item.setText(f"{item.text()} ✖ not the same task")
                elif figure.key == "label" and summary.trust_notes:
                    item.setText(f"{item.text()} {TRUST_MARK}")
                self.table.setItem(r, c, item)
        self._shown = len(summaries)
        self._charts_page.sync(summaries, list(guessed.values()) or None)
        self.verdicts.sync(summaries)

    def natural_width(self) -> int:
        """How wide the table is with every column whole (no sideways scrolling)."""
        table, header = self.table, self.table.horizontalHeader()
        columns = sum(
            max(header.sectionSizeHint(c), table.sizeHintForColumn(c))
            for c in range(table.columnCount())
        )
        return columns + 2 * table.frameWidth() + table.verticalScrollBar().sizeHint().width()


class LiveCharts(DrawnWhenShown, QWidget):
    """The results' small charts against the swept setting, made and drawn while their tab
    shows: most windows stay on the table, and a session opened or a configuration ended
    redrew three unseen charts."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.figures = shown_in(View.LIVE_CHART)
        self.charts: dict[str, MetricChart] = {}
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._summaries: list[ConfigSummary] = []
        self._predicted: list[ConfigSummary] | None = None
        self.content_changed()  # made (empty) when first shown

    def sync(
        self, summaries: list[ConfigSummary], predicted: list[ConfigSummary] | None = None
    ) -> None:
        """``predicted``: the run's predicted configurations (None: no prediction)."""
        self._summaries = list(summaries)
        self._predicted = predicted
        self.content_changed()

    def draw_content(self) -> None:
        if not self.charts:
            for figure in self.figures:
                self.charts[figure.key] = MetricChart()
                self._row.addWidget(self.charts[figure.key])
        shown = [("measured" if self._predicted else "this run", self._summaries)]
        for data, dashed in with_predictions(shown, [self._predicted], self.figures):
            chart = self.charts[data.key]
            chart.show_data(data, dashed)
            if chart.legend is not None:  # small charts: a legend only to tell the two apart
                chart.legend.setVisible(bool(dashed))
