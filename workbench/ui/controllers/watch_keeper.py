"""A watch kept in its file from the window: the engine's ``Recorder`` on a thread of its
own, so that a commit (once a second, a disk's flush each) never holds the GUI thread.

The watch calls its keeper on the loop's thread; this one hands each call to the
recorder's thread in order. A save hands over a copy of what it reads, as the watch goes on
changing the original meanwhile (``Watched.snapshot``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from workbench.engine.tune.records import SloTarget
from workbench.engine.watch.record import SAVE_EVERY_S, Recorder
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.watcher import Load, Watched


class KeeperThread:
    """The engine's watch ``Keeper`` (``record.Recorder``) behind one worker thread. A
    write that failed there is raised by the next save, which ends the watch with it."""

    def __init__(
        self, path: Path, url: str, interval_s: float, slos: Sequence[SloTarget] = ()
    ) -> None:
        self.path = path
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="watch-keeper")
        self._error: BaseException | None = None
        self._saved = time.monotonic()
        self._recorder = self._submit(Recorder, path, url, interval_s, slos)

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
        self._on_thread("save", watched.snapshot(), True)

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
