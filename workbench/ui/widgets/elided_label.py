"""A one-line label that gives up width before its row does.

The top bar's status line names the session it shows; a long file name made the bar, and so
the window, wider than a 1366-pixel screen (1378 px with a conversations session). This label
asks for no width of its own: it shows its text elided in the middle to the width the row
leaves it, and the whole text in its tooltip.
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget

from workbench.ui.widgets import plain_text

MIN_WIDTH = 80  # pixels: a few words, whatever the text


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._full = ""
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setText(text)

    def setText(self, text: str) -> None:
        self._full = text
        self._fit()

    def text(self) -> str:
        """The whole text, as set (what is shown may be elided)."""
        return self._full

    def minimumSizeHint(self) -> QSize:
        return QSize(MIN_WIDTH, super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        shown = self.fontMetrics().elidedText(
            self._full, Qt.TextElideMode.ElideMiddle, self.width()
        )
        QLabel.setText(self, shown)
        self.setToolTip(plain_text.tooltip(self._full) if shown != self._full else "")
