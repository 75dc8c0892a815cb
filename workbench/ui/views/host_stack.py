"""Runs on several machines, one above the other (side by side where wide): each machine's
stream grid and Gantt under its name (the host, its hostname and GPU), their time axes
linked, so that requests sent at the same moment line up whichever machine measured them
(each run's times are placed on one origin: see ``RunController.origin_ns``).
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget

from workbench.ui.run_model import RunModel
from workbench.ui.views.gantt import FINAL_MIN_SPAN_S, GanttView
from workbench.ui.views.legend import StateLegend
from workbench.ui.views.stream_grid import StreamGrid
from workbench.ui.widgets.elided_label import ElidedLabel

END_MARGIN = 1.03  # room after the last bar, as a single run's Gantt leaves it
SIDE_BY_SIDE_PX = 800  # the least width a machine's views are given beside another's


class HostPane(QWidget):
    """One machine's live views under its name."""

    def __init__(self, label: str, states: StateLegend | None = None) -> None:
        super().__init__()
        self.title = ElidedLabel(label)
        self.title.setObjectName("machineTitle")
        self.title.setStyleSheet("font-weight:bold;")
        self.title.setToolTip(label)
        self.grid = StreamGrid()
        self.gantt = GanttView(states=states)
        views = QSplitter(Qt.Orientation.Vertical)
        views.addWidget(self.grid)
        views.addWidget(self.gantt)
        views.setSizes([400, 500])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.title)
        layout.addWidget(views, 1)

    def set_label(self, label: str) -> None:
        self.title.setText(label)
        self.title.setToolTip(label)


class HostStack(QWidget):
    """The panes of the machines a run went to, the first's time axis shared by all."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("hostStack")
        self.panes: list[HostPane] = []
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.splitter)

    def show_hosts(self, labels: list[str], states: StateLegend | None = None) -> list[HostPane]:
        """Fresh panes, one per machine (an earlier run's are dropped); ``states`` is the
        window's state legend, kept in step with the first machine's Gantt."""
        for pane in self.panes:
            pane.hide()
            pane.setParent(None)
            pane.deleteLater()
        self.panes = [HostPane(label, states if i == 0 else None) for i, label in enumerate(labels)]
        for pane in self.panes:
            self.splitter.addWidget(pane)
            if pane is not self.panes[0]:
                pane.gantt.setXLink(self.panes[0].gantt)
        self._orient()
        self.splitter.setSizes([1000] * len(self.panes))
        return self.panes

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._orient()

    def _orient(self) -> None:
        """One above the other, or side by side where each machine's views get
        ``SIDE_BY_SIDE_PX`` (presenting, full screen); changed only when that flips."""
        wide = len(self.panes) > 1 and self.width() >= SIDE_BY_SIDE_PX * len(self.panes)
        orientation = Qt.Orientation.Horizontal if wide else Qt.Orientation.Vertical
        if self.splitter.orientation() != orientation:
            self.splitter.setOrientation(orientation)
            self.splitter.setSizes([1000] * len(self.panes))

    def fit(self, models: list[RunModel]) -> None:
        """Every run has ended: the shared time axis ends with the last machine's data (each
        Gantt fits its own, and the last to end would otherwise decide for all)."""
        if self.panes:
            end = max(FINAL_MIN_SPAN_S, max((m.last_t for m in models), default=0.0) * END_MARGIN)
            self.panes[0].gantt.setXRange(0, end, padding=0)

    def x_range(self) -> list[tuple[float, float]]:
        """Each Gantt's time axis as shown (for tests: linked, they are one)."""
        return [tuple(p.gantt.getPlotItem().viewRange()[0]) for p in self.panes]
