"""The machines' views: one above the other, side by side where each gets room enough; the
time axes linked; an earlier run's panes dropped."""

from __future__ import annotations

from PySide6.QtCore import Qt

from workbench.ui.views.host_stack import SIDE_BY_SIDE_PX, HostStack


def test_the_panes_stack_or_sit_side_by_side_by_the_room_there_is(qtbot):
    stack = HostStack()
    qtbot.addWidget(stack)
    stack.resize(900, 800)
    stack.show()
    first = stack.show_hosts(["This machine", "gpubox  ·  gpu-01  ·  NVIDIA H200 (139 GiB)"])
    assert stack.splitter.orientation() == Qt.Orientation.Vertical
    assert [p.title.text() for p in first][1].startswith("gpubox")
    stack.resize(2 * SIDE_BY_SIDE_PX, 800)  # presenting, full screen
    qtbot.waitUntil(lambda: stack.splitter.orientation() == Qt.Orientation.Horizontal)
    stack.resize(900, 800)
    qtbot.waitUntil(lambda: stack.splitter.orientation() == Qt.Orientation.Vertical)
    again = stack.show_hosts(["This machine", "a", "b"])
    assert stack.splitter.count() == 3 and not set(again) & set(first)
    assert all(p.gantt.getViewBox().linkedView(0) is again[0].gantt.getViewBox() for p in again[1:])
    again[2].gantt.setXRange(5, 25, padding=0)  # dragged on one machine: all follow
    assert {tuple(round(x) for x in r) for r in stack.x_range()} == {(5, 25)}
