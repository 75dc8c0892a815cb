"""Watching a running server, in a window of its own: what its own users make it do, live
(its slots' tasks, its queue, its token rates, its memory), and at the end (Stop, or the
window closed) what the watch saw and the verdict. It sends no load.

A window apart from the main one: a watch is not a run (nothing is sent, nothing is
configured), it may go on while the main window runs an experiment against the same
server, and its views need the width the main window gives its three columns.

The engine polls on the window's loop (``WatchController``); what the polls say is kept in
the ``WatchModel``, and this window draws it on a timer a few times a second.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QCloseEvent, QGuiApplication
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.controllers.tasks import Tasks
from workbench.ui.controllers.watch_controller import INTERVAL_S, WatchController
from workbench.ui.theme.qt_theme import app_icon, text_style
from workbench.ui.views.slot_watch import ContextBars, SlotGantt
from workbench.ui.views.watch_plots import TimeAxis, WatchPlots
from workbench.ui.watch_model import WatchModel
from workbench.ui.widgets.elided_label import ElidedLabel
from workbench.ui.widgets.read_only_table import read_only_table

DRAW_EVERY_MS = 250  # the views redrawn four times a second, however often the polls come
SIDE_WIDTH = 340  # px: the figures' column
CONTEXT_WIDTH = 150  # px: the context bars beside the slots
NO_SLOTS = "no /slots (vLLM and SGLang have none; llama-server: --no-slots): no tasks"


class WatchWindow(QWidget):
    """One watch of the server at ``url``; ``start`` begins it."""

    def __init__(
        self,
        url: str,
        api_key_env: str | None,
        out_dir: Path,
        interval_s: float = INTERVAL_S,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.url, self.api_key_env = url, api_key_env
        self.setWindowTitle(f"Watching {url} — Concurrency Workbench")
        self.setWindowIcon(app_icon())
        self.tasks = Tasks()  # the watch's coroutine: cancelled when the window closes
        self.model = WatchModel()
        self.controller = WatchController(self.model, self.tasks, out_dir, interval_s, self)
        self.interval_s = interval_s
        self.over = False  # the watch ended, or never began: its last word stays
        self.notes: list[str] = []  # what the watch cannot see at this address

        self.stop_button = QPushButton("■  Stop")
        self.stop_button.setToolTip("End the watch: it is kept, and summed up here")
        self.stop_button.setEnabled(False)
        self.status = ElidedLabel(f"connecting to {url}…")
        self.status.setObjectName("watchStatus")
        # One line: a fault (the address, the server down) or, at the end, the verdict.
        self.line = QLabel()
        self.line.setObjectName("watchLine")
        self.line.setTextFormat(Qt.TextFormat.PlainText)  # it may quote what a server said
        self.line.setWordWrap(True)
        self.line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.line.hide()

        self.gantt = SlotGantt()
        self.context = ContextBars(self.gantt)
        self.context.setFixedWidth(CONTEXT_WIDTH)
        self.plots = WatchPlots()
        self.plots.requests.setXLink(self.gantt)
        self.time_axis = TimeAxis()
        self.slots_row = QWidget()
        row = QHBoxLayout(self.slots_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.gantt, 1)
        row.addWidget(self.context)
        self.views = QSplitter(Qt.Orientation.Vertical)
        for widget in (self.slots_row, self.plots.requests, self.plots.tokens, self.plots.memory):
            self.views.addWidget(widget)
        self.views.setSizes([360, 160, 160, 120])

        self.figures = read_only_table(["", "now"])
        self.figures.setObjectName("watchFigures")
        self.figures.setWordWrap(True)
        self.kept = QLabel()
        self.kept.setTextFormat(Qt.TextFormat.PlainText)
        self.kept.setWordWrap(True)
        self.kept.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        side = QWidget()
        side.setFixedWidth(SIDE_WIDTH)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        side_layout.addWidget(self.figures, 1)
        side_layout.addWidget(self.kept)

        bar = QHBoxLayout()
        bar.addWidget(self.stop_button)
        bar.addWidget(self.status, 1)
        body = QHBoxLayout()
        body.addWidget(self.views, 1)
        body.addWidget(side)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(bar)
        layout.addWidget(self.line)
        layout.addLayout(body, 1)

        self.timer = QTimer(self)
        self.timer.setInterval(DRAW_EVERY_MS)
        self.timer.timeout.connect(self.draw)
        self.stop_button.clicked.connect(self.stop)
        self.controller.started.connect(self._started)
        self.controller.failed.connect(self._failed)
        self.controller.ended.connect(self._ended)
        self._fit_screen()

    def _fit_screen(self) -> None:
        """As large as a 1366x768 screen leaves room for, and no larger than it needs."""
        screen = QGuiApplication.primaryScreen()
        room = screen.availableGeometry() if screen is not None else None
        width, height = 1500, 920
        if room is not None:
            width, height = min(width, room.width()), min(height, room.height() - 32)
        self.resize(width, height)

    def start(self) -> None:
        self.controller.start(self.url, self.api_key_env)
        if self.controller.running:
            self.stop_button.setEnabled(True)
            self.timer.start()

    def stop(self) -> None:
        self.stop_button.setEnabled(False)
        self.status.setText(f"stopping the watch of {self.model.url}…")
        self.controller.stop()

    def _started(self) -> None:
        watched = self.model.watched
        assert watched is not None
        if not watched.slots_on:
            self.notes.append(NO_SLOTS)
            self.slots_row.hide()
        said = [
            f"watching {self.model.url} every {self.interval_s:g} s (it sends no load)",
            f"kept as it goes in {self.controller.path}",
            *self.notes,
        ]
        self.status.setText("; ".join(said))

    def _failed(self, text: str) -> None:
        self.over = True
        self.timer.stop()
        self.stop_button.setEnabled(False)
        self.status.setText(f"not watching {self.model.url or self.url}")
        self._say(text, "error")
        self.draw()

    def _ended(self, path: Path) -> None:
        self.over = True
        self.timer.stop()
        self.draw()
        summary = self.model.summary
        assert summary is not None
        watched = f"watched {self.model.url} for {summary.seconds:.1f} s"
        self.status.setText("; ".join([watched, *self.notes]))
        self._say(f"verdict: {summary.verdict}", "ok")
        self.kept.setText(f"kept in {path} (workbench show reads it)")

    def _say(self, text: str, signal: str) -> None:
        self.line.setText(text)
        self.line.setStyleSheet(text_style(signal) + "font-weight:bold;")
        self.line.setVisible(bool(text))

    def draw(self) -> None:
        """One frame: the views redrawn from the model, if a poll came since the last."""
        model = self.model
        if not model.changed:
            return
        model.changed = False
        if model.slots_on:
            self.gantt.sync(model)
            self.context.sync(model)
        self.plots.sync(model)
        top = self.gantt if model.slots_on else self.plots.requests
        self.time_axis.follow(top, model.now, ended=model.summary is not None)
        if not self.over and self.line.text() != (fault := model.fault()):
            self._say(fault, "warning")
        self._show_figures(model.figures(), "summary" if model.summary else "now")

    def _show_figures(self, rows: list[tuple[str, str]], heading: str) -> None:
        table = self.figures
        table.horizontalHeaderItem(1).setText(heading)
        if table.rowCount() != len(rows):
            table.setRowCount(len(rows))
        for index, (name, value) in enumerate(rows):
            for column, text in enumerate((name, value)):
                item = table.item(index, column)
                if item is None:
                    table.setItem(index, column, QTableWidgetItem(text))
                elif item.text() != text:
                    item.setText(text)
        table.resizeRowsToContents()

    def closeEvent(self, event: QCloseEvent) -> None:
        """Closing ends the watch: its coroutine is cancelled, and what it saw is kept."""
        self.timer.stop()
        self.tasks.cancel_all()
        super().closeEvent(event)
