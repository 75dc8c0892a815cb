"""The coroutines a window starts, owned in one place so that closing it cancels them all."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class Tasks:
    """A set of running tasks: a task leaves it when done; ``cancel_all`` empties it.

    A task nobody holds may be garbage-collected mid-flight, and one left running after its
    window closed would touch deleted widgets; keeping them here avoids both.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()

    def __len__(self) -> int:
        return len(self._tasks)

    def __repr__(self) -> str:
        return f"Tasks({self._tasks!r})"
