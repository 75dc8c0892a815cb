"""A recorded session on the live views: open it (its final state), play it back at the
replay bar's speed through the same painter as a live run, and seek anywhere in it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.states import RunStatus
from workbench.engine.config.experiment import Experiment
from workbench.engine.events import ConfigStarted, PredictionMade, RequestSubmitted
from workbench.engine.run.replay import Playback, load_session
from workbench.engine.store import open_session
from workbench.ui.controllers.render_controller import PUMP_INTERVAL_MS, RenderController
from workbench.ui.run_model import RunModel

# A step back within this much (session time) of a configuration's start goes to the one
# before, as a media player's "previous chapter" does.
BACK_TO_PREVIOUS_S = 1.0
# A start is shown just past its first request, so that request's pane is there.
PAST_START_S = 0.001


def with_prediction(path: Path, events: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """A session's events with the prediction its run made (``Session.predictions``) right
    after its start, where a live run publishes it: opened, replayed or sought, the session
    shows it as the run did. A damaged prediction is left out (the rest still opens)."""
    try:
        with open_session(path) as session:
            prediction = session.predictions()
    except WorkbenchError:
        return events
    if prediction is None or not events:
        return events
    return [events[0], (events[0][0], PredictionMade(prediction)), *events[1:]]


def load_predicted(path: Path) -> tuple[list[tuple[int, Any]], Experiment | None]:
    """``load_session`` with the session's prediction (``with_prediction``)."""
    events, experiment = load_session(path)
    return with_prediction(path, events), experiment


def config_starts(playback: Playback) -> list[float]:
    """Where each configuration begins, in session seconds: when its first measured request
    is sent (its server's start-up is skipped), or when it started if it sent none."""
    started: dict[int, int] = {}
    sent: dict[int, int] = {}
    for t_ns, event in playback.events:
        if isinstance(event, ConfigStarted):
            started.setdefault(event.config.index, t_ns)
        elif isinstance(event, RequestSubmitted) and not event.warmup:
            sent.setdefault(event.config_index, t_ns)
    return [(sent.get(i, t) - playback.start_ns) / 1e9 for i, t in sorted(started.items())]


class ReplayController(QObject):
    opened = Signal(Path)  # a session's final state is on the views
    closed = Signal()  # the open session let go of the views (a run took them)
    loaded = Signal(object)  # the Playback of the session just opened
    # The experiment it ran (when it parses), its file name, and the address of the server
    # it ran against when that was started elsewhere (None: the workbench started its own).
    experiment = Signal(object, str, object)
    moved = Signal(object)  # the Playback, at its new position
    playing = Signal(bool)
    finished = Signal(str)  # a replay reached the end: the session's status
    banner = Signal(str, str)  # text, kind (info, ok, error)
    status = Signal(str)

    def __init__(
        self,
        model: RunModel,
        renderer: RenderController,
        speed: Callable[[], float],
        parent: QObject | None = None,
    ) -> None:
        """``speed``: how many seconds of the session one second of replay shows, asked at
        every frame (the replay bar's choice, which may change while playing)."""
        super().__init__(parent)
        self.model = model
        self.renderer = renderer
        self.speed = speed
        self.playback: Playback | None = None
        self.path: Path | None = None  # the open session's file
        self.playback_status: RunStatus | None = None  # and how its run ended
        self.starts: list[float] = []  # config_starts of the open session
        self._held = False
        self.timer = QTimer(self)
        self.timer.setInterval(PUMP_INTERVAL_MS)
        self.timer.setTimerType(Qt.TimerType.PreciseTimer)
        self.timer.timeout.connect(self._tick)

    def hold(self, busy: bool) -> None:
        """While a run owns the views no session opens or plays; a starting run closes the
        open one."""
        self._held = busy
        if busy:
            self.pause()
            self.playback = None
            self.closed.emit()

    async def open(self, path: Path) -> bool:
        """Rebuild every view from the session file alone (its final state); False when it
        could not be opened (the banner says why)."""
        if self._held:
            self.banner.emit("Stop the run before opening a session.", "error")
            return False
        try:
            events, experiment = await asyncio.to_thread(load_predicted, path)
        except WorkbenchError as exc:
            self.banner.emit(str(exc), "error")
            return False
        self.pause()
        self.playback = Playback(events)
        self.starts = config_starts(self.playback)
        self.model.reset()
        self._render([e for _, e in events], self.playback.duration_s, force=True)
        self.playback.seek_forward(self.playback.duration_s)
        self.loaded.emit(self.playback)
        self.path, self.playback_status = path, self.model.status
        self._say_session(playing=False)
        self.status.emit(f"session {path.name}")
        self.opened.emit(path)
        if experiment is not None:
            external = self.model.server.base_url if self.model.mode == "external" else None
            self.experiment.emit(experiment, path.name, external)
        return True

    def play(self) -> None:
        if self.playback is None or self._held:
            return
        if self.playback.finished:
            self.seek(0.0)
        self.timer.start()
        self.playing.emit(True)
        self._say_session(playing=True)

    def _say_session(self, playing: bool) -> None:
        """The banner names the open session and how it ended; "press Replay" only while
        it is not playing (the top bar says "replaying" then)."""
        if self.path is None or self.playback is None:
            return
        with_status = f"Session {self.path.name} ({self.playback_status})"
        kind = "ok" if self.playback_status is RunStatus.COMPLETE else "info"
        self.banner.emit(
            f"{with_status}." if playing else f"{with_status}: press Replay to watch it again.",
            kind,
        )

    def pause(self) -> None:
        """Stop playing; a replay paused mid-way is drawn whole as it stands (a frame of
        a playing replay leaves some panes' numbers to the next)."""
        playing = self.timer.isActive()
        self.timer.stop()
        if playing and self.playback is not None and not self.playback.finished:
            self._render([], self.playback.position_s, force=True)
        self.playing.emit(False)

    def seek(self, position_s: float) -> None:
        """Jump anywhere: the views are rebuilt from the start up to that moment."""
        if self.playback is None:
            return
        self.model.reset()
        # The panes may show the same requests before and after (a seek within the last
        # configuration, a step back to its start): let them go, so they are bound anew
        # with what the new position has, not the text and numbers they showed.
        self.renderer.grid.sync(self.model, set(), relayout=True, now=0.0)
        self.playback.rewind()
        self._render(self.playback.seek_forward(position_s), position_s, force=True)
        self.moved.emit(self.playback)

    def step_config(self, direction: int) -> None:
        """Show the next configuration (``direction`` 1) from its first request, or the end
        after the last; -1: back to the start of the one shown, or of the one before when
        it has just begun. Playing goes on playing from there."""
        if self.playback is None or self._held or not self.starts:
            return
        here = self.playback.position_s
        if direction > 0:
            ahead = [s + PAST_START_S for s in self.starts if s + PAST_START_S > here]
            self.seek(min(ahead, default=self.playback.duration_s))
        else:
            behind = [s for s in self.starts if s + PAST_START_S < here - BACK_TO_PREVIOUS_S]
            self.seek(max(behind, default=self.starts[0]) + PAST_START_S)

    def toggle(self) -> None:
        """Play, or pause a replay that plays."""
        if self.timer.isActive():
            self.pause()
        else:
            self.play()

    def _tick(self) -> None:
        assert self.playback is not None
        step = PUMP_INTERVAL_MS / 1000 * self.speed()
        self._render(self.playback.advance(step), self.playback.position_s)
        self.moved.emit(self.playback)
        if self.playback.finished:
            self.pause()
            self._render([], self.playback.position_s, force=True)
            self._say_session(playing=False)
            self.finished.emit(self.model.status)

    def _render(self, events: list[object], now: float, force: bool = False) -> None:
        self.renderer.render(events, now, force, verb="replaying")
