"""Painting the run model onto the live views, paced: one path for a live run, a reopened
session and a replay.

Events are folded into ``RunModel`` (no Qt) and only what changed is redrawn, on the 30 ms
frame of whoever feeds the events; the Gantt and the server plots repaint at a slower pace
still, since a repaint per token would be waste.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject, Signal

from workbench.ui.gantt import GanttView
from workbench.ui.results_view import ResultsView
from workbench.ui.run_model import RunModel
from workbench.ui.server_panel import ServerPanel
from workbench.ui.server_plots import ServerPlots
from workbench.ui.stream_grid import StreamGrid

# ~33 Hz: with a timer at exactly 33 ms any jitter makes a frame later than 1/30 s.
PUMP_INTERVAL_MS = 30
PLOT_EVERY_TICKS = 3  # the Gantt's live bars at ~11 Hz: a repaint per token would be waste
SERVER_PLOT_EVERY_TICKS = 8  # memory, queue and slots at ~4 Hz, the pace of /metrics and /slots


class RenderController(QObject):
    progress = Signal(str)  # the status line while a run is under way (live or replayed)
    warning = Signal(str)  # the engine's latest warning, for the banner

    def __init__(
        self,
        model: RunModel,
        grid: StreamGrid,
        gantt: GanttView,
        plots: ServerPlots,
        results: ResultsView,
        server_panel: ServerPanel,
        parent: QObject | None = None,
    ) -> None:
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
        self._plots_deferred = False

    def render(
        self, events: list[Any], now: float | None, force: bool = False, verb: str = "running"
    ) -> None:
        """Apply events and redraw; ``now`` is the run's clock in seconds (live or replayed),
        ``force`` redraws everything at once (a session opened, a seek), ``verb`` names what
        the status line says is happening."""
        changes = self.model.apply(events)
        running = self.model.status == "running"
        if not changes and not running and not force:
            return
        now = max(self.model.last_t, now or 0.0)
        laid_out = self.grid.sync(self.model, changes.requests, changes.layout or force, now)
        self._ticks += 1
        self._gantt_stale = self._gantt_stale or changes.gantt
        self._server_stale = self._server_stale or changes.samples
        gantt_due = self._plots_deferred or self._ticks % PLOT_EVERY_TICKS == 0
        server_due = self._plots_deferred or self._ticks % SERVER_PLOT_EVERY_TICKS == 0
        # A frame that laid out the grid (up to 64 panes) is full: plots wait one tick.
        self._plots_deferred = (gantt_due or server_due) and laid_out and running and not force
        final = not running or force
        if self._plots_deferred:
            gantt_due = server_due = False
        if (self._gantt_stale or running or force) and (gantt_due or final):
            self.gantt.sync(self.model, now)  # live bars grow with the clock
            self._gantt_stale = False
        if (self._server_stale or force) and (server_due or final):
            self.plots.sync(self.model)  # new only when the sampler reports
            self._server_stale = False
        if changes.server or force:
            self._sync_server()
        if changes.results or force:
            self.results.sync(self.model.summaries)
        if running:
            done = sum(v.state in ("done", "failed") for v in self.model.requests.values())
            self.progress.emit(
                f"{verb} {self.model.server.label}  ·  "
                f"config {self.model.server.config_index + 1}/{self.model.n_configs}  ·  "
                f"{done}/{len(self.model.requests)} requests done"
            )

    def _sync_server(self) -> None:
        server = self.model.server
        self.server_panel.show_state(server.state, server.detail)
        self.server_panel.show_server(
            server.base_url,
            server.facts,
            server.log_path,
            server.log_tail,
            self.model.server_binary,
        )
        self.server_panel.show_kind(server.kind_text)
        for notice in self.model.notices[-1:]:
            if notice.level == "warning":
                self.warning.emit(notice.text)
