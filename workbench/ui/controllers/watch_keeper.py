"""A watch kept in its file from the window: the engine's ``Recorder`` on a thread of its
own, so that a commit (once a second, a disk's flush each) never holds the GUI thread.

The watch calls its keeper on the loop's thread; this one hands each call to the
recorder's thread in order. A save hands over a copy of what it reads, as the watch goes on
changing the original meanwhile. Its file is named as ``workbench watch`` names it.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from workbench.engine.watch.record import SAVE_EVERY_S, SUFFIX, Recorder
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.watcher import Load, Watched


def kept_at(folder: Path) -> Path:
    """A new watch file's path in ``folder``, as the CLI's ``kept_at`` makes it (named by
    the time, never an older one's)."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"watch-{time.strftime('%Y%m%d-%H%M%S')}"
    path = folder / f"{stem}{SUFFIX}"
    number = 1
    while path.exists():
        number += 1
        path = folder / f"{stem}-{number}{SUFFIX}"
    return path


def _own_containers(thing: Any) -> Any:
    """A shallow copy of ``thing`` with its own dicts, lists, sets and deques: what they
    hold (tasks, loads, gaps, histograms) is frozen or replaced whole, never changed."""
    copied = copy.copy(thing)
    for name, value in vars(thing).items():
        if isinstance(value, dict | list | set | deque):
            setattr(copied, name, copy.copy(value))
    return copied


def still(watched: Watched) -> Watched:
    """A copy of ``watched`` another thread may read while the watch changes the original
    (its counts, its gaps, its tasks running and ended)."""
    kept = _own_containers(watched)
    kept.tasks = _own_containers(watched.tasks)
    return kept


class KeeperThread:
    """The engine's watch ``Keeper`` (``record.Recorder``) behind one worker thread. A
    write that failed there is raised by the next save, which ends the watch with it."""

    def __init__(self, path: Path, url: str, interval_s: float) -> None:
        self.path = path
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="watch-keeper")
        self._error: BaseException | None = None
        self._saved = time.monotonic()
        self._recorder = self._submit(Recorder, path, url, interval_s)

    def _submit(self, call: Any, *args: Any) -> Future[Any]:
        done = self._pool.submit(call, *args)
        done.add_done_callback(self._note_error)
        return done

    def _note_error(self, done: Future[Any]) -> None:
        if self._error is None and not done.cancelled():
            self._error = done.exception()

    def _on_thread(self, method: str, *args: Any) -> Future[Any]:
        return self._submit(lambda: getattr(self._recorder.result(), method)(*args))

    async def opened(self) -> None:
        """Wait for the file to be made (an unwritable folder raises here, before the watch)."""
        await asyncio.wrap_future(self._recorder)

    def task(self, task: WatchedTask) -> None:
        self._on_thread("task", task)

    def load(self, load: Load) -> None:
        self._on_thread("load", load)

    def save(self, watched: Watched, now: bool = False) -> None:
        if self._error is not None:
            raise self._error
        if not now and time.monotonic() - self._saved < SAVE_EVERY_S:
            return
        self._saved = time.monotonic()
        self._on_thread("save", still(watched), True)

    def close(self, watched: Watched) -> Future[Any]:
        """The last save and the file closed; the thread ends once they are done (even
        where no one waits for it: a window closing mid-watch)."""
        closed = self._on_thread("close", watched)
        self._pool.shutdown(wait=False)
        return closed

    def abandon(self) -> Future[Any]:
        """The address could not be watched: no file."""
        gone = self._on_thread("abandon")
        self._pool.shutdown(wait=False)
        return gone
