"""The analyses of the session the window shows: its roofline (decode against this machine's
memory bandwidth) and its goodput under the SLO panel's limits, each computed in a thread."""

from __future__ import annotations

import asyncio
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from workbench.engine.analysis.roofline import session_roofline
from workbench.engine.analysis.slo import Slo
from workbench.engine.base.errors import WorkbenchError
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.panels.slo_panel import evaluate as evaluate_session_slo


class AnalysisController(QObject):
    roofline = Signal(object)  # the RooflineReport, or None: none (yet) for this session
    roofline_failed = Signal(str)
    slo_result = Signal(list, list, object)  # goodput per configuration, summaries, the SLO
    slo_message = Signal(str)  # why there is no SLO result

    def __init__(self, tasks: Tasks, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.tasks = tasks
        self._roofline_for: Path | None = None  # the session the roofline is for

    def show_roofline(self, path: Path | None) -> None:
        """Clear the roofline, then compute ``path``'s (None: leave it clear)."""
        self._roofline_for = path
        self.roofline.emit(None)
        if path is not None:
            self.tasks.spawn(self._roofline(path))

    async def _roofline(self, path: Path) -> None:
        """Measured once per machine, in a thread: about a second the first time. A later
        session or run supersedes it, whichever finishes first."""
        try:
            report = await asyncio.to_thread(session_roofline, path)
        except WorkbenchError as exc:
            if self._roofline_for == path:
                self.roofline_failed.emit(f"No roofline: {exc}")
            return
        if self._roofline_for == path:
            self.roofline.emit(report)

    async def evaluate_slo(self, path: Path | None, slo: Slo | None) -> None:
        if path is None:
            self.slo_message.emit("Run an experiment or open a session first.")
            return
        if slo is None:
            self.slo_message.emit("Set at least one SLO above zero.")
            return
        try:
            results, summaries = await asyncio.to_thread(evaluate_session_slo, path, slo)
        except WorkbenchError as exc:
            self.slo_message.emit(str(exc))
            return
        self.slo_result.emit(results, summaries, slo)
