"""Sessions side by side in the window: the comparison table, the overlaid charts (the same
code as the exported report), warnings where the comparison is unfair, and Export report."""

from __future__ import annotations

import contextlib
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.compare import CHART_METRICS, chart_data, compare_sessions
from workbench.engine.errors import WorkbenchError
from workbench.engine.session import open_session
from workbench.ui.charts import MetricChart
from workbench.ui.report import write_report


class CompareWindow(QWidget):
    def __init__(self, paths: list[Path], parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)
        self.setWindowTitle("Compare sessions")
        self.paths = paths
        self.relative = QCheckBox("relative to 1 slot")
        self.relative.toggled.connect(self.refresh)
        export = QPushButton("Export report…")
        export.clicked.connect(self._export_dialog)
        self.warnings = QLabel()
        self.warnings.setWordWrap(True)
        self.warnings.setStyleSheet("color:#e8a33d;")
        self.table = QTableWidget()
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.charts = {key: MetricChart() for key, _, _ in CHART_METRICS}
        grid = QWidget()
        grid_layout = QGridLayout(grid)
        for i, chart in enumerate(self.charts.values()):
            grid_layout.addWidget(chart, i // 3, i % 3)
        top = QHBoxLayout()
        top.addWidget(self.relative)
        top.addStretch(1)
        top.addWidget(export)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(grid)
        split.addWidget(self.table)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.warnings)
        layout.addWidget(split, 1)
        self.resize(1500, 950)
        self.refresh()

    def refresh(self) -> None:
        relative = self.relative.isChecked()
        try:
            with contextlib.ExitStack() as stack:
                sessions = [stack.enter_context(open_session(p)) for p in self.paths]
                comparison = compare_sessions(sessions, relative)
                charts = chart_data(sessions, relative)
        except WorkbenchError as exc:
            self.warnings.setText(str(exc))
            return
        self.warnings.setText("\n".join(f"Not like for like: {w}" for w in comparison.warnings))
        for data in charts:
            self.charts[data.key].show_data(data)
        rows = comparison.rows()
        headers = ["configuration", "metric", *comparison.columns]
        self.table.setColumnCount(len(headers))
        self.table.setHorizontalHeaderLabels(headers)
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            values = [row["configuration"], row["metric"]] + [
                "-" if row[c] is None else f"{row[c]:.3g}" for c in comparison.columns
            ]
            for c, text in enumerate(values):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)

    def _export_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Report folder")
        if folder:
            self.export(Path(folder))

    def export(self, folder: Path) -> Path | None:
        try:
            with contextlib.ExitStack() as stack:
                sessions = [stack.enter_context(open_session(p)) for p in self.paths]
                report = write_report(sessions, folder, relative=self.relative.isChecked())
        except WorkbenchError as exc:
            self.warnings.setText(str(exc))
            return None
        self.warnings.setText(f"Report written: {report}")
        return report
