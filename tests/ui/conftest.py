"""Window fixtures: one qasync loop per test, and a guard against leaked windows, timers
and tasks."""

from __future__ import annotations

import asyncio

import pyqtgraph as pg
import pytest
import qasync
from PySide6.QtWidgets import QApplication

from tests.ui.driving import run
from workbench.ui.gui_thread_gc import GuiThreadGarbageCollection
from workbench.ui.main_window import MainWindow
from workbench.ui.theme.palette import DEFAULT_FONT_PT
from workbench.ui.theme.qt_theme import THEME_PROPERTY, apply_theme, theme


def ensure_dark_theme(app: QApplication) -> None:
    """The window's default theme, applied again only where a test changed it: re-styling
    the whole application costs about 25 ms a test."""
    plots = pg.getConfigOption("background"), pg.getConfigOption("foreground")
    colors = theme("dark").colors
    if (
        app.property(THEME_PROPERTY) != "dark"
        or app.font().pointSizeF() != DEFAULT_FONT_PT
        or plots != (colors["plot_background"], colors["plot_foreground"])
    ):
        apply_theme(app, "dark")


class TestLoop(qasync.QEventLoop):
    """qasync's loop, seen by asyncio as this thread's running loop between two runs too.

    qasync's ``run_until_complete`` passes Qt's pending events once more after it has unset
    the running loop, and a test processes Qt events outside a run (a click, a close): a
    poll's answer or a thread's result delivered then resumed a task with no running loop
    ("no running event loop"), a rare failure of whichever test it fell in. The app runs
    its loop once, for good, so it never meets this."""

    def run_forever(self):
        try:
            return super().run_forever()
        finally:
            asyncio.events._set_running_loop(self)


@pytest.fixture
def loop(qapp):
    ensure_dark_theme(qapp)
    qapp.setQuitOnLastWindowClosed(False)  # a test closes windows; the loop must go on
    event_loop = TestLoop(qapp, already_running=False)
    asyncio.set_event_loop(event_loop)
    asyncio.events._set_running_loop(event_loop)
    collection = GuiThreadGarbageCollection()  # as the app does: see gui_thread_gc
    collection.start()
    yield event_loop
    pending = [t for t in asyncio.all_tasks(event_loop) if not t.done()]
    leftover = [t for t in pending if not t.cancelling()]  # cancelled by their owner: fine
    for task in leftover:
        task.cancel()
    if pending:
        event_loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    asyncio.events._set_running_loop(None)
    event_loop.close()  # also ends the executor's threads that asyncio.to_thread used
    asyncio.set_event_loop(None)
    collection.stop()
    assert not leftover, f"test leaked asyncio tasks: {leftover}"


@pytest.fixture
def window(qtbot, loop, tmp_path):
    win = MainWindow(tmp_path / "out")
    qtbot.addWidget(win)
    win.resize(1600, 900)
    win.show()
    yield win
    if win.isVisible():
        win.ask_stop_on_close = lambda: True
        win.close()
        run(loop, lambda: not win.running and not win.isVisible(), 60)
    win.shutdown()
    assert not win.pump.isActive() and not win.log_timer.isActive(), "test leaked a timer"
    assert not win.tasks, f"test leaked window tasks: {win.tasks}"


@pytest.fixture(autouse=True)
def no_leaked_windows(qapp):
    yield
    visible = [w for w in QApplication.topLevelWidgets() if w.isVisible()]
    for widget in visible:
        widget.close()
    assert not visible, f"test left windows open: {visible}"
