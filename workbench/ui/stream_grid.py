"""One pane per concurrent request: its live text, its state as a colour, TTFT, tokens, tok/s.

Panes are reused across configurations and only touched when their request changed since
the last tick, so 64 streams at full speed cost 30 small updates a second, not one per token.
"""

from __future__ import annotations

import math

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from workbench.ui.run_model import RequestView, RunModel
from workbench.ui.theme import state_color

MAX_PANES = 64


def grid_shape(n: int, area_aspect: float = 1.8, pane_aspect: float = 1.8) -> tuple[int, int]:
    """Columns and rows for n panes: panes about ``pane_aspect`` wide for tall (text reads
    in lines), with few empty cells, in an area ``area_aspect`` wide for tall."""
    if n <= 0:
        return 0, 0

    def cost(cols: int) -> float:
        rows = math.ceil(n / cols)
        shape = area_aspect * rows / cols
        return abs(math.log(shape / pane_aspect)) + (cols * rows - n) / n

    cols = min(range(1, n + 1), key=cost)
    return cols, math.ceil(n / cols)


class StreamPane(QFrame):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setObjectName("streamPane")
        self.title = QLabel()
        self.title.setObjectName("paneTitle")
        self.state = QLabel()
        self.state.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.state.setMinimumWidth(64)
        self.stats = QLabel()
        self.stats.setObjectName("paneStats")
        self.stats.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.body = QPlainTextEdit()
        self.body.setReadOnly(True)
        self.body.setFrameShape(QFrame.Shape.NoFrame)
        self.body.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.body.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.addWidget(self.title)
        header.addWidget(self.state)
        header.addStretch(1)
        header.addWidget(self.stats)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(2)
        layout.addLayout(header)
        layout.addWidget(self.body, 1)
        self.key: tuple[int, int, int] | None = None
        self._state = ""
        self._stats = ""

    def bind(self, view: RequestView, text: str) -> None:
        self.key = (view.config_index, view.repeat, view.index)
        self.title.setText(f"#{view.index}")
        self.body.setPlainText(text)
        self._state = self._stats = ""

    def append(self, text: str) -> None:
        if not text:
            return
        cursor = self.body.textCursor()
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)
        self.body.setTextCursor(cursor)
        self.body.ensureCursorVisible()

    def show_state(self, view: RequestView, now: float) -> None:
        if view.state != self._state:
            self._state = view.state
            color = state_color(view.state)
            self.state.setText(view.state)
            self.state.setStyleSheet(
                f"background:{color.name()}; color:#101114; border-radius:4px; padding:0 6px;"
            )
            self.setStyleSheet(f"#streamPane {{ border: 2px solid {color.name()}; }}")
            if view.error:
                self.setToolTip(view.error)
        stats = pane_stats(view, now)
        if stats != self._stats:
            self._stats = stats
            self.stats.setText(stats)


def pane_stats(view: RequestView, now: float) -> str:
    parts = []
    if view.ttft_s is not None:
        parts.append(f"TTFT {view.ttft_s:.2f}s")
    tokens = view.output_tokens if view.output_tokens is not None else view.chunks
    parts.append(f"{tokens} tok")
    rate = view.tok_s(now)
    if rate is not None:
        parts.append(f"{rate:.0f} tok/s")
    return "  ".join(parts)


class StreamGrid(QWidget):
    """Lays out panes for the requests of the configuration running now (1 to 64)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._layout = QGridLayout(self)
        self._layout.setContentsMargins(4, 4, 4, 4)
        self._layout.setSpacing(4)
        self._pool: list[StreamPane] = []
        self.panes: dict[tuple[int, int, int], StreamPane] = {}
        self._placeholder = QLabel("Press Run: one pane per concurrent request appears here.")
        self._placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._layout.addWidget(self._placeholder, 0, 0)

    def sync(
        self, model: RunModel, changed: set[tuple[int, int, int]], relayout: bool, now: float
    ) -> None:
        if relayout:
            views = model.current_requests()[:MAX_PANES]
            keys = [(v.config_index, v.repeat, v.index) for v in views]
            if keys != list(self.panes):
                self._lay_out(model, views)
        for key, pane in self.panes.items():
            view = model.requests[key]
            if key in changed:
                pane.append(model.take_text(key))
            if key in changed or view.state == "decoding":
                pane.show_state(view, now)

    def _lay_out(self, model: RunModel, views: list[RequestView]) -> None:
        for pane in self.panes.values():
            self._layout.removeWidget(pane)
            pane.hide()
        self.panes = {}
        self._placeholder.setVisible(not views)
        cols, _ = grid_shape(len(views))
        while len(self._pool) < len(views):
            self._pool.append(StreamPane(self))
        font = QFont(self.font())
        font.setPointSizeF(max(7.0, self.font().pointSizeF() * (1.0 if len(views) <= 16 else 0.8)))
        for i, view in enumerate(views):
            pane = self._pool[i]
            key = (view.config_index, view.repeat, view.index)
            pane.bind(view, model.requests[key].text + model.take_text(key))
            pane.body.setFont(font)
            pane.show_state(view, model.last_t)
            self._layout.addWidget(pane, i // cols, i % cols)
            pane.show()
            self.panes[key] = pane
