"""The lab's table filling in as configurations finish, and small charts against slots."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis import ConfigSummary
from workbench.ui.theme import series_color

COLUMNS = (
    # (header, tooltip, value, format): short headers so the lab's table fits a side panel.
    ("config", "configuration", lambda s: s.label, ""),
    ("np", "slots (-np)", lambda s: s.slots, ""),
    ("ctx/slot", "n_ctx_slot: context each slot gets", lambda s: s.n_ctx_slot, ""),
    (
        "total s",
        "makespan: first submit to last done",
        lambda s: s.mean.get("makespan_s"),
        "{:.2f}",
    ),
    ("agg tok/s", "aggregate throughput", lambda s: s.mean.get("agg_tok_s"), "{:.1f}"),
    ("TTFT p50", "time to first token, median (s)", lambda s: s.mean.get("ttft_p50_s"), "{:.2f}"),
    ("TTFT max", "time to first token, max (s)", lambda s: s.mean.get("ttft_max_s"), "{:.2f}"),
    (
        "decode",
        "per-request decode tok/s (mean of 1/TPOT)",
        lambda s: s.mean.get("decode_tok_s"),
        "{:.1f}",
    ),
    ("failed", "failed requests", lambda s: s.value("failed"), ""),
)
CHARTS = (
    ("aggregate tok/s", "agg_tok_s", "processing"),
    ("TTFT p50 (s)", "ttft_p50_s", "predicted"),
    ("decode tok/s per request", "decode_tok_s", "rss"),
)


def cell_text(value: object, fmt: str) -> str:
    if value is None:
        return "-"
    return fmt.format(value) if fmt and isinstance(value, int | float) else str(value)


class ResultsView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("resultsTable")
        self.table.setHorizontalHeaderLabels([name for name, _, _, _ in COLUMNS])
        for column, (_, tip, _, _) in enumerate(COLUMNS):
            self.table.horizontalHeaderItem(column).setToolTip(tip)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.charts: dict[str, pg.PlotDataItem] = {}
        self.plots: list[pg.PlotWidget] = []
        charts = QWidget()
        row = QHBoxLayout(charts)
        row.setContentsMargins(0, 0, 0, 0)
        for title, key, color in CHARTS:
            plot = pg.PlotWidget()
            plot.setMinimumSize(80, 120)
            item = plot.getPlotItem()
            item.setTitle(title, size="10pt")
            item.setLabel("bottom", "slots")
            item.showGrid(x=True, y=True, alpha=0.2)
            self.charts[key] = item.plot(
                [],
                [],
                pen=pg.mkPen(series_color(color), width=2),
                symbol="o",
                symbolBrush=series_color(color),
                symbolSize=8,
            )
            self.plots.append(plot)
            row.addWidget(plot)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.table, "Results")
        self.tabs.addTab(charts, "Charts")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.tabs)
        self._shown = 0

    def sync(self, summaries: list[ConfigSummary]) -> None:
        if len(summaries) < self._shown:
            self.table.setRowCount(0)
            self._shown = 0
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
        ok = [s for s in summaries if s.status == "ok"]
        slot_values = {s.slots for s in ok}
        by_slots = len(slot_values) == len(ok)
        for _, key, _ in CHARTS:
            points = [((s.slots if by_slots else s.index + 1), s.mean.get(key)) for s in ok]
            points = sorted(p for p in points if p[1] is not None)
            self.charts[key].setData([p[0] for p in points], [p[1] for p in points])
        for plot in self.plots:
            plot.getPlotItem().setLabel("bottom", "slots" if by_slots else "config")
