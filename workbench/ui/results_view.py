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
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis import ConfigSummary
from workbench.ui.theme import series_color

COLUMNS = (
    ("config", lambda s: s.label, ""),
    ("slots", lambda s: s.slots, ""),
    ("n_ctx_slot", lambda s: s.n_ctx_slot, ""),
    ("total s", lambda s: s.mean.get("makespan_s"), "{:.2f}"),
    ("agg tok/s", lambda s: s.mean.get("agg_tok_s"), "{:.1f}"),
    ("TTFT p50 s", lambda s: s.mean.get("ttft_p50_s"), "{:.3f}"),
    ("TTFT max s", lambda s: s.mean.get("ttft_max_s"), "{:.3f}"),
    ("decode tok/s", lambda s: s.mean.get("decode_tok_s"), "{:.1f}"),
    ("failed", lambda s: s.value("failed"), ""),
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
        self.table.setHorizontalHeaderLabels([name for name, _, _ in COLUMNS])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.charts: dict[str, pg.PlotDataItem] = {}
        self.plots: list[pg.PlotWidget] = []
        row = QHBoxLayout()
        for title, key, color in CHARTS:
            plot = pg.PlotWidget()
            plot.setMinimumHeight(120)
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
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.table, 3)
        layout.addLayout(row, 2)
        self._shown = 0

    def sync(self, summaries: list[ConfigSummary]) -> None:
        if len(summaries) < self._shown:
            self.table.setRowCount(0)
            self._shown = 0
        for summary in summaries[self._shown :]:
            r = self.table.rowCount()
            self.table.insertRow(r)
            for c, (_, get, fmt) in enumerate(COLUMNS):
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
