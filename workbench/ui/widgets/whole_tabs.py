"""Tabs that show every tab whole.

Qt's tab bar, narrower than its tabs, hides the last ones behind scroll arrows or elides
their names ("Sl..." for Sessions at 1366x768; behind arrows even at 1920x1080): a tab one
cannot see is a feature one does not know exists. ``whole_tabs`` gives a tab widget with
few tabs no arrows and no elision (the widget is then never narrower than its tabs);
``WrappedTabs`` holds more tabs than its column's width allows, their names wrapping onto a
second row instead, so the column keeps its width.
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QLayout,
    QLayoutItem,
    QSizePolicy,
    QStackedWidget,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

TAB_PADDING = "QTabBar::tab { padding: 4px 6px; }"  # Fusion's own is about 12 px a side
GAP = 2  # px between two tabs' names, and between their rows


def whole_tabs(tabs: QTabWidget) -> QTabWidget:
    """``tabs`` with every tab shown whole (see the module); returned for chaining."""
    tabs.setUsesScrollButtons(False)
    tabs.setElideMode(Qt.TextElideMode.ElideNone)
    tabs.tabBar().setStyleSheet(TAB_PADDING)
    return tabs


class FlowLayout(QLayout):
    """Items left to right, wrapping onto the next row where the width runs out (Qt's
    flow layout example, cut to what the tabs need)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setContentsMargins(0, 0, 0, 0)
        self._items: list[QLayoutItem] = []

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:
        """All on one row."""
        hints = [item.sizeHint() for item in self._items]
        width = sum(h.width() for h in hints) + GAP * max(0, len(hints) - 1)
        return QSize(width, max((h.height() for h in hints), default=0))

    def minimumSize(self) -> QSize:
        """One item a row: as narrow as the widest."""
        hints = [item.sizeHint() for item in self._items]
        return QSize(
            max((h.width() for h in hints), default=0), max((h.height() for h in hints), default=0)
        )

    def _place(self, rect: QRect, move: bool) -> int:
        """Lay the items out in ``rect`` (when ``move``); the height they take."""
        x, y, row = rect.x(), rect.y(), 0
        for item in self._items:
            size = item.sizeHint()
            if x > rect.x() and x + size.width() > rect.right() + 1:
                x, y, row = rect.x(), y + row + GAP, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), size))
            x += size.width() + GAP
            row = max(row, size.height())
        return y + row - rect.y()


class WrappedTabs(QWidget):
    """A tab widget whose tabs' names wrap onto more rows rather than hide (see the
    module): the part of ``QTabWidget``'s interface the window uses."""

    currentChanged = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.bar = QWidget()
        self.bar.setObjectName("wrappedTabBar")
        self.flow = FlowLayout(self.bar)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.bar.setSizePolicy(policy)
        self.buttons: list[QToolButton] = []
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.group.idClicked.connect(self.setCurrentIndex)
        self.stack = QStackedWidget()
        self.stack.currentChanged.connect(self._changed)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(GAP)
        layout.addWidget(self.bar)
        layout.addWidget(self.stack, 1)

    def addTab(self, widget: QWidget, text: str) -> int:
        index = self.stack.addWidget(widget)
        button = QToolButton()
        button.setText(text)
        button.setCheckable(True)
        button.setAutoRaise(True)
        button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        button.setStyleSheet(
            "QToolButton { padding: 3px 6px; border: 1px solid palette(mid); }"
            " QToolButton:checked { background: palette(highlight);"
            " color: palette(highlighted-text); border-color: palette(highlight); }"
        )
        self.group.addButton(button, index)
        self.flow.addWidget(button)
        self.buttons.append(button)
        if index == self.stack.currentIndex():
            button.setChecked(True)
        return index

    def count(self) -> int:
        return self.stack.count()

    def widget(self, index: int) -> QWidget | None:
        return self.stack.widget(index)

    def indexOf(self, widget: QWidget) -> int:
        return self.stack.indexOf(widget)

    def tabText(self, index: int) -> str:
        return self.buttons[index].text() if 0 <= index < len(self.buttons) else ""

    def currentIndex(self) -> int:
        return self.stack.currentIndex()

    def currentWidget(self) -> QWidget | None:
        return self.stack.currentWidget()

    def setCurrentIndex(self, index: int) -> None:
        self.stack.setCurrentIndex(index)

    def setCurrentWidget(self, widget: QWidget) -> None:
        self.stack.setCurrentWidget(widget)

    def _changed(self, index: int) -> None:
        if 0 <= index < len(self.buttons):
            self.buttons[index].setChecked(True)
        self.currentChanged.emit(index)
