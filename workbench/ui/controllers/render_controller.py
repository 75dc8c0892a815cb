"""Painting the run model onto the live views, paced: one path for a live run, a reopened
session and a replay.

Events are folded into ``RunModel`` (no Qt) and only what changed is redrawn, on the 16 ms
(60 Hz) frame of whoever feeds the events, with the work of a frame bounded (the grid draws
a share of its panes a frame); the Gantt and the server plots repaint at a slower pace still,
since a repaint per token would be waste.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal

from workbench.engine.base.states import NoticeLevel, RunStatus
from workbench.engine.events import Notice
from workbench.ui.captions import prediction_line
from workbench.ui.panels.server_panel import ServerPanel
from workbench.ui.run_model import RunModel
from workbench.ui.views.gantt import GanttView
from workbench.ui.views.results_view import ResultsView
from workbench.ui.views.server_plots import ServerPlots
from workbench.ui.views.stream_grid import PANE_DRAWS_PER_FRAME, StreamGrid

# ~62 Hz: with a timer at 16.7 ms any jitter makes a frame later than 1/60 s.
PUMP_INTERVAL_MS = 16
PLOT_EVERY_TICKS = 6  # the Gantt's live bars at ~10 Hz: a repaint per token would be waste
SERVER_PLOT_EVERY_TICKS = 16  # memory, queue and slots at ~4 Hz, the pace of /metrics and /slots
# The server plots on odd ticks, the Gantt on even ones: never both in one frame.
SERVER_PLOT_TICK = 1


def progress_line(verb: str, model: RunModel, done: int) -> str:
    """The top bar's line while a run goes: short enough to stay whole beside the replay
    bar at 1366 px ("replaying np=4 (3/3)  ·  16/24 done"; its longer wording was cut to
    "confi...")."""
    server = model.server
    return (
        f"{verb} {server.label} ({server.config_index + 1}/{model.n_configs})  ·  "
        f"{done}/{len(model.requests)} done"
    )


class RenderController(QObject):
    progress = Signal(str)  # the status line while a run is under way (live or replayed)
    warning = Signal(str)  # the engine's latest warning, for the banner
    # What the run's prediction says ("Predicted: about 2 min; ..."), or why there is none;
    # "" for nothing to say.
    predicted = Signal(str)

    def __init__(
        self,
        model: RunModel,
        grid: StreamGrid,
        gantt: GanttView,
        plots: ServerPlots | None,
        results: ResultsView | None,
        server_panel: ServerPanel | None,
        parent: QObject | None = None,
    ) -> None:
        """``plots``, ``results`` and ``server_panel`` None: a run shown beside another,
        whose grid and Gantt alone are its own (the window's show the first run's)."""
        super().__init__(parent)
        self.model = model
        self.grid = grid
        self.gantt = gantt
        self.plots = plots
        self.results = results
        self.server_panel = server_panel
        self._ticks = 0
        self._gantt_stale = False
        self._server_stale = False
        self._warned: Notice | None = None  # the warning the banner was last given
        self._prediction_said = ""

    def render(
        self, events: list[Any], now: float | None, force: bool = False, verb: str = "running"
    ) -> None:
        """Apply events and redraw; ``now`` is the run's clock in seconds (live or replayed),
        ``force`` redraws everything at once (a session opened, a seek), ``verb`` names what
        the status line says is happening."""
        changes = self.model.apply(events)
        running = self.model.status is RunStatus.RUNNING
        if not changes and not running and not force:
            return
        now = max(self.model.last_t, now or 0.0)
        self._ticks += 1
        self._gantt_stale = self._gantt_stale or changes.gantt
        self._server_stale = self._server_stale or changes.samples
        final = not running or force
        gantt_now = (self._gantt_stale or running or force) and (
            final or self._ticks % PLOT_EVERY_TICKS == 0
        )
        server_now = (self._server_stale or force) and (
            final or self._ticks % SERVER_PLOT_EVERY_TICKS == SERVER_PLOT_TICK
        )
        # A frame's work stays within a frame: one that redraws plots leaves the panes' news
        # to the next; the last frame, a session opened or a seek draws everything.
        budget = None if final else 0 if gantt_now or server_now else PANE_DRAWS_PER_FRAME
        self.grid.sync(self.model, changes.requests, changes.layout or force, now, budget)
        if gantt_now:
            self.gantt.sync(self.model, now)  # live bars grow with the clock
            self._gantt_stale = False
        if server_now and self.plots is not None:
            self.plots.sync(self.model)  # new only when the sampler reports
            self._server_stale = False
        if force:
            self._warned = None  # a session opened, a seek: its warning shows again
        if changes.server or force:
            self._sync_server()
        if (changes.results or force) and self.results is not None:
            self.results.sync(self.model.summaries, self.model.prediction)
        if changes.prediction or changes.server or force:  # a configuration started, say
            line = prediction_line(self.model, live=verb == "running")
            if line != self._prediction_said:
                self._prediction_said = line
                self.predicted.emit(line)
        if running:
            done = sum(v.state.finished for v in self.model.requests.values())
            self.progress.emit(progress_line(verb, self.model, done))

    def _sync_server(self) -> None:
        server = self.model.server
        if self.server_panel is not None:
            self.server_panel.show_state(server.state, server.detail)
            self.server_panel.show_server(
                server.base_url,
                server.facts,
                server.log_path,
                server.log_tail,
                self.model.server_binary,
            )
            self.server_panel.show_kind(server.kind_text)
        latest = self.model.notices[-1] if self.model.notices else None
        if (
            latest is not None
            and latest is not self._warned
            and latest.level == NoticeLevel.WARNING
        ):
            self._warned = latest  # once: each banner shown re-polishes, maybe re-lays out
            self.warning.emit(latest.text)
