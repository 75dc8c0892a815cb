"""SLOs on what was measured: goodput per configuration, the recommended slot count, and the
TTFT curve with the SLO line drawn on it (the same numbers as ``workbench slo``)."""

from __future__ import annotations

from pathlib import Path

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QPushButton,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis.compare import chart_data_from
from workbench.engine.analysis.slo import SHOWN, ConfigGoodput, Slo, goodput, recommend
from workbench.engine.figures.metrics import figure
from workbench.engine.store import open_session
from workbench.ui.theme.qt_theme import signal_color
from workbench.ui.views.charts import MetricChart
from workbench.ui.widgets.read_only_table import read_only_table


def evaluate(path: Path, slo: Slo) -> tuple[list[ConfigGoodput], list]:
    with open_session(path) as session:
        return goodput(session, slo), session.summaries()


class SloPanel(QWidget):
    evaluate_requested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.ttft = self._spin(" s", 2.0)
        self.decode = self._spin(" tok/s", 0.0)
        form = QFormLayout()
        form.addRow("TTFT at most", self.ttft)
        form.addRow("decode at least", self.decode)
        self.button = QPushButton("Evaluate the last run or opened session")
        self.button.clicked.connect(self.evaluate_requested)
        self.recommendation = QLabel("Set SLOs (0 = no limit) and evaluate.")
        self.recommendation.setWordWrap(True)
        headers = [figure(key).header for key in SHOWN]
        self.table = read_only_table(["config", "good/requests", *headers, "meets SLO", "why not"])
        # The chart and its SLO line are made with the first result: a plot costs about
        # 20 ms to build, and most windows never evaluate an SLO.
        self.chart: MetricChart | None = None
        self.slo_line: pg.InfiniteLine | None = None
        self._layout = QVBoxLayout(self)
        self._layout.addLayout(form)
        self._layout.addWidget(self.button)
        self._layout.addWidget(self.recommendation)
        self._layout.addWidget(self.table, 1)

    def _make_chart(self) -> tuple[MetricChart, pg.InfiniteLine]:
        if self.chart is None or self.slo_line is None:
            self.chart = MetricChart(legend=False)
            self.slo_line = pg.InfiniteLine(
                angle=0,
                pen=pg.mkPen(signal_color("error"), width=2, style=Qt.PenStyle.DashLine),
                label="SLO",
                labelOpts={"color": signal_color("error"), "position": 0.95},
            )
            self.chart.getPlotItem().addItem(self.slo_line)
            self._layout.addWidget(self.chart, 1)
        return self.chart, self.slo_line

    @staticmethod
    def _spin(suffix: str, value: float) -> QDoubleSpinBox:
        spin = QDoubleSpinBox()
        spin.setRange(0.0, 10000.0)
        spin.setDecimals(2)
        spin.setSuffix(suffix)
        spin.setValue(value)
        return spin

    def slo(self) -> Slo | None:
        ttft = self.ttft.value() or None
        decode = self.decode.value() or None
        try:
            return Slo(ttft_s=ttft, decode_tok_s=decode)
        except ValueError:
            return None

    def show_result(self, results: list[ConfigGoodput], summaries: list, slo: Slo) -> None:
        self.recommendation.setText(f"SLO: {slo.describe()}.  Run: {recommend(results).text}")
        self.table.setRowCount(len(results))
        for r, row in enumerate(results):
            cells = (
                row.label,
                f"{row.good}/{row.requests}",
                *(figure(key).text(getattr(row, key)) for key in SHOWN),
                "yes" if row.acceptable else "no",
                "; ".join(row.reasons),
            )
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QTableWidgetItem(text))
        (data,) = chart_data_from([("run", summaries)], metrics=(figure("ttft_p50_s"),))
        chart, slo_line = self._make_chart()
        chart.show_data(data)
        if slo.ttft_s is not None:
            slo_line.setPos(slo.ttft_s * data.y_scale)  # in the chart's unit
            slo_line.show()
        else:
            slo_line.hide()

    def show_message(self, text: str) -> None:
        self.recommendation.setText(text)
