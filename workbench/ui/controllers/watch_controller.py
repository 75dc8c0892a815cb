"""One watch of a running server from the window: the engine's ``watch`` coroutine on the
window's loop, what it says folded into the watch model, kept in a file as ``workbench
watch`` keeps it, and its summary at the end.

It sends no load. Every way out ends the same: Stop ends the watch and keeps it (``ended``);
an address that cannot be watched is one line and keeps nothing (``failed``); the window
closing cancels the coroutine, and what was seen is still kept.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.server.external import api_key_headers, normalise_base_url, split_credentials
from workbench.engine.watch.record import kept_at
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.watcher import Watched, WatchError, watch
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.controllers.watch_keeper import KeeperThread
from workbench.ui.watch_model import WatchModel

INTERVAL_S = 0.1  # between polls, as `workbench watch` polls by default


class WatchController(QObject):
    started = Signal()  # the first poll found something to watch
    failed = Signal(str)  # one line: why the address cannot be watched, or kept
    ended = Signal(object)  # the file the watch is kept in (Path), its summary in the model

    def __init__(
        self,
        model: WatchModel,
        tasks: Tasks,
        out_dir: Path,
        interval_s: float = INTERVAL_S,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.model = model
        self.tasks = tasks
        self.out_dir = out_dir
        self.interval_s = interval_s
        self.path: Path | None = None  # where the watch is kept, once it began
        self._stop: asyncio.Event | None = None
        self.task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def start(self, url: str, api_key_env: str | None) -> None:
        """Watch ``url`` (its API key read from the variable ``api_key_env`` names, as a
        run against an external server reads it) until ``stop``."""
        try:
            url, headers = split_credentials(normalise_base_url(url))
            headers |= api_key_headers(api_key_env)
        except WorkbenchError as exc:
            self.failed.emit(str(exc))
            return
        self.model.url = url
        self._stop = asyncio.Event()
        self.task = self.tasks.spawn(self._watch(url, headers, self._stop))

    def stop(self) -> None:
        """End the watch at its next poll: it is kept and summed up."""
        if self._stop is not None:
            self._stop.set()

    async def _watch(self, url: str, headers: dict[str, str], stop: asyncio.Event) -> None:
        keeper: KeeperThread | None = None
        try:
            self.path = await asyncio.to_thread(kept_at, self.out_dir)
            keeper = KeeperThread(self.path, url, self.interval_s)
            await keeper.opened()
            watched = await watch(
                url,
                self.interval_s,
                None,
                headers,
                stop=stop,
                on_poll=self.model.polled,
                on_start=self._started,
                keeper=keeper,
            )
        except WatchError as exc:  # the address cannot be watched: nothing to keep
            self._keep_what_was_seen(keeper)
            self.failed.emit(str(exc))
            return
        except (OSError, sqlite3.Error) as exc:
            self._keep_what_was_seen(keeper)
            self._cannot_keep(exc)
            return
        except BaseException:  # cancelled: the window closed mid-watch
            self._keep_what_was_seen(keeper)
            raise
        try:
            await asyncio.wrap_future(keeper.close(watched))
        except (OSError, sqlite3.Error) as exc:
            self._cannot_keep(exc)
            return
        self.model.ended(await asyncio.to_thread(summarize, watched))
        self.ended.emit(keeper.path)

    def _started(self, watched: Watched) -> None:
        self.model.started(watched)
        self.started.emit()

    def _cannot_keep(self, exc: Exception) -> None:
        self.failed.emit(f"the watch cannot be kept in {self.out_dir}: {exc}")

    def _keep_what_was_seen(self, keeper: KeeperThread | None) -> None:
        """The watch ended early: its file keeps what it saw, or goes where it saw nothing."""
        if keeper is None:
            return
        if self.model.watched is None:
            self.path = None
            keeper.abandon()
        else:
            keeper.close(self.model.watched)
