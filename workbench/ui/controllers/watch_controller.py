"""One watch of a running server from the window: the engine's ``watch`` coroutine on the
window's loop, with the settings ``workbench watch`` takes on its flags (``WatchSettings``:
the interval, how long, the server's own endpoints), what it says folded into the watch
model, kept in a file as ``workbench watch`` keeps it, and its summary at the end, with the
SLOs judged on the kept file as ``workbench watch --slo`` judges them (``judge_kept``). The
SLOs are kept in the file from its start, so a watch that ends otherwise is judged on them
later (``workbench show``, a replay: ``judged_off_thread``).

It sends no load. Every way out ends the same: Stop, or the time it was given, ends the
watch and keeps it (``ended``); an address that cannot be watched is one line and keeps
nothing (``failed``); the window closing cancels the coroutine, and what was seen is still
kept.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.server.external import api_key_headers, normalise_base_url, split_credentials
from workbench.engine.tune.records import SloTarget
from workbench.engine.watch.record import kept_at
from workbench.engine.watch.slo_judged import Judged, judge_kept
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.watcher import Endpoints, Watched, WatchError, watch
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.controllers.watch_keeper import KeeperThread
from workbench.ui.watch_model import WatchModel
from workbench.ui.watch_settings import WatchSettings


async def judged_off_thread(path: Path, slos: Sequence[SloTarget]) -> tuple[list[Judged], str]:
    """The SLOs on the watch kept at ``path``, as ``workbench watch --slo`` judges them:
    read back from its file off the GUI thread; and why they could not be ('' if they
    were)."""
    try:
        return await asyncio.to_thread(judge_kept, path, slos), ""
    except (WorkbenchError, OSError, sqlite3.Error) as exc:
        return [], f"the SLOs could not be judged on {path}: {exc}"


class WatchController(QObject):
    started = Signal()  # the first poll found something to watch
    failed = Signal(str)  # one line: why the address cannot be watched, or kept
    ended = Signal(object)  # the file the watch is kept in (Path), its summary in the model

    def __init__(
        self,
        model: WatchModel,
        tasks: Tasks,
        out_dir: Path,
        settings: WatchSettings | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.model = model
        self.tasks = tasks
        self.out_dir = out_dir
        self.settings = settings or WatchSettings()
        self.endpoints: Endpoints | None = None  # where each endpoint is read, once started
        self.path: Path | None = None  # where the watch is kept, once it began
        self._stop: asyncio.Event | None = None
        self.stopped = False  # Stop ended it, not the time it was given
        self.task: asyncio.Task[None] | None = None
        self.judged: list[Judged] = []  # the SLOs on the kept watch, once it ended
        self.unjudged = ""  # why they could not be judged, where they could not

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    def start(self, url: str, api_key_env: str | None) -> None:
        """Watch ``url`` (its API key read from the variable ``api_key_env`` names, as a
        run against an external server reads it) with the settings, until ``stop`` or the
        time they give."""
        try:
            url, headers = split_credentials(normalise_base_url(url))
            headers |= api_key_headers(api_key_env)
            self.endpoints = self.settings.endpoints(url)
        except WorkbenchError as exc:
            self.failed.emit(str(exc))
            return
        self.model.url = url
        self._stop = asyncio.Event()
        self.task = self.tasks.spawn(self._watch(url, headers, self._stop, self.endpoints))

    def stop(self) -> None:
        """End the watch at its next poll: it is kept and summed up."""
        if self._stop is not None:
            self.stopped = True
            self._stop.set()

    async def _watch(
        self, url: str, headers: dict[str, str], stop: asyncio.Event, endpoints: Endpoints
    ) -> None:
        keeper: KeeperThread | None = None
        settings = self.settings
        try:
            self.path = await asyncio.to_thread(kept_at, self.out_dir)
            keeper = KeeperThread(self.path, url, settings.interval_s, settings.slos)
            await keeper.opened()
            watched = await watch(
                url,
                settings.interval_s,
                settings.duration_s,
                headers,
                stop=stop,
                on_poll=self.model.polled,
                on_start=self._started,
                endpoints=endpoints,
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
        if settings.slos:
            self.judged, self.unjudged = await judged_off_thread(keeper.path, settings.slos)
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
