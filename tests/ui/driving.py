"""Driving the window from a test: run the Qt + asyncio loop until something holds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from PySide6.QtCore import QTimer


def run(loop: asyncio.AbstractEventLoop, condition: Callable[[], bool], timeout_s: float) -> None:
    """Run the Qt + asyncio loop until ``condition`` holds (or fail after ``timeout_s``)."""

    async def wait() -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met within {timeout_s} s")
            await asyncio.sleep(0.05)

    loop.run_until_complete(wait())


def click_later(callback: Callable[[], None], ms: int = 0) -> None:
    QTimer.singleShot(ms, callback)
