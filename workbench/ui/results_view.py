"""The lab's table filling in as configurations finish, and small charts against slots."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis import ConfigSummary
from workbench.engine.compare import CHART_METRICS, chart_data_from
from workbench.ui.charts import MetricChart
from workbench.ui.roofline_view import RooflineView
from workbench.ui.tables import read_only_table
from workbench.ui.verdicts_view import VerdictsView

COLUMNS = (
    # (header, tooltip, value, format): short headers on two lines, so the lab's table fits
    # the side panel of a 1366-pixel-wide screen.
    ("config", "configuration", lambda s: s.label, ""),
    ("np", "slots (-np)", lambda s: s.slots, ""),
    ("ctx/\nslot", "n_ctx_slot: context each slot gets", lambda s: s.n_ctx_slot, ""),
    (
        "total\ns",
        "makespan: first submit to last done",
        lambda s: s.mean.get("makespan_s"),
        "{:.2f}",
    ),
    ("agg\ntok/s", "aggregate throughput", lambda s: s.mean.get("agg_tok_s"), "{:.1f}"),
    ("TTFT\np50", "time to first token, median (s)", lambda s: s.mean.get("ttft_p50_s"), "{:.2f}"),
    ("TTFT\nmax", "time to first token, max (s)", lambda s: s.mean.get("ttft_max_s"), "{:.2f}"),
    (
        "decode\ntok/s",
        "per-request decode tok/s (mean of 1/TPOT)",
        lambda s: s.mean.get("decode_tok_s"),
        "{:.1f}",
    ),
    ("failed", "failed requests", lambda s: s.value("failed"), ""),
)
LIVE_CHARTS = tuple(m for m in CHART_METRICS if m[0] in ("agg_tok_s", "ttft_p50_s", "decode_tok_s"))


def cell_text(value: object, fmt: str) -> str:
    if value is None:
        return "-"
    return fmt.format(value) if fmt and isinstance(value, int | float) else str(value)


class ResultsView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.table = read_only_table([name for name, _, _, _ in COLUMNS])
        self.table.setObjectName("resultsTable")
        for column, (_, tip, _, _) in enumerate(COLUMNS):
            self.table.horizontalHeaderItem(column).setToolTip(tip)
        self.charts: dict[str, MetricChart] = {}
        charts = QWidget()
        row = QHBoxLayout(charts)
        row.setContentsMargins(0, 0, 0, 0)
        for key, _, _ in LIVE_CHARTS:
            self.charts[key] = MetricChart(legend=False)
            row.addWidget(self.charts[key])
        self.tabs = QTabWidget()
        self.tabs.addTab(self.table, "Results")
        self.tabs.addTab(charts, "Charts")
        self.verdicts = VerdictsView()
        self.tabs.addTab(self.verdicts, "Verdicts")
        self.roofline = RooflineView()
        self.tabs.addTab(self.roofline, "Roofline")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)
        self._shown = 0
        self._summaries: list[ConfigSummary] = []

    def sync(self, summaries: list[ConfigSummary]) -> None:
        shown = summaries[: self._shown]
        if len(summaries) < self._shown or any(
            a is not b for a, b in zip(shown, self._summaries, strict=False)
        ):
            self.table.setRowCount(0)  # another run or session: start the table again
            self._shown = 0
        self._summaries = list(summaries)
        for summary in summaries[self._shown :]:
            r = self.table.rowCount()
            self.table.insertRow(r)
            for c, (_, _, get, fmt) in enumerate(COLUMNS):
                item = QTableWidgetItem(cell_text(get(summary), fmt))
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if summary.status != "ok":
                    item.setToolTip(summary.error or summary.status)
                    item.setForeground(pg.mkColor("#e5484d"))
                self.table.setItem(r, c, item)
        self._shown = len(summaries)
        for data in chart_data_from([("this run", summaries)], metrics=LIVE_CHARTS):
            self.charts[data.key].show_data(data)
        self.verdicts.sync(summaries)
