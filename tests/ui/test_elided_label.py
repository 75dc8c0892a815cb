"""The top bar's status line gives up width before the window does: a long session name or
replay status made the window 1378 px wide on a 1366-pixel screen."""

from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from workbench.ui.widgets.elided_label import MIN_WIDTH, ElidedLabel

LONG = "session conversations-from-file-20261202-020411.session.sqlite · config 2/2 · 35/35 done"


def test_its_text_is_whole_and_what_it_shows_fits_its_width(qtbot):
    label = ElidedLabel(LONG)
    qtbot.addWidget(label)
    label.show()  # a hidden widget is told its size only when shown
    label.resize(200, 30)
    assert label.text() == LONG
    shown = QLabel.text(label)
    assert shown != LONG and "…" in shown and label.fontMetrics().horizontalAdvance(shown) <= 200
    assert "conversations-from-file" in label.toolTip()
    label.resize(2000, 30)
    assert QLabel.text(label) == LONG and label.toolTip() == ""


def test_a_row_with_it_asks_no_more_width_for_a_longer_text(qtbot):
    row = QWidget()
    qtbot.addWidget(row)
    layout = QHBoxLayout(row)
    label = ElidedLabel("ready")
    layout.addWidget(QPushButton("Run"))
    layout.addWidget(label, 1)
    before = row.minimumSizeHint().width()
    label.setText(LONG * 3)
    assert row.minimumSizeHint().width() == before
    assert label.minimumSizeHint().width() == MIN_WIDTH
