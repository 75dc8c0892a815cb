"""Driving the window from a test: run the Qt + asyncio loop until something holds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QWidget


def run(loop: asyncio.AbstractEventLoop, condition: Callable[[], bool], timeout_s: float) -> None:
    """Run the Qt + asyncio loop until ``condition`` holds (or fail after ``timeout_s``)."""

    async def wait() -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout_s} s")
            await asyncio.sleep(0.01)

    loop.run_until_complete(wait())


def click_later(callback: Callable[[], None], ms: int = 0) -> None:
    QTimer.singleShot(ms, callback)


def click(loop: asyncio.AbstractEventLoop, widget: QWidget) -> None:
    """Click ``widget`` from inside the running loop.

    A click processes Qt events; clicked outside the loop, an asyncio timer that fires then
    resumes a window task while no loop runs ("no running event loop"), a rare flaky failure.
    """
    clicked: list[bool] = []

    def press() -> None:
        QTest.mouseClick(widget, Qt.MouseButton.LeftButton)
        clicked.append(True)

    QTimer.singleShot(0, press)
    run(loop, lambda: clicked, 10)


def click_until(
    loop: asyncio.AbstractEventLoop,
    widget: QWidget,
    condition: Callable[[], bool],
    timeout_s: float,
) -> None:
    """Click ``widget`` and run until ``condition`` holds, in one run of the loop.

    Clicked in one run and waited for in the next, a task the click starts can finish an
    ``asyncio.to_thread`` step while the loop is stopping in between; qasync then resumes
    it with no running loop and its next step fails ("no running event loop").
    """
    QTimer.singleShot(0, lambda: QTest.mouseClick(widget, Qt.MouseButton.LeftButton))
    run(loop, condition, timeout_s)
