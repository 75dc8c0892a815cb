"""Next to the experiment editor: will these server settings fit in this machine's memory?

Recomputed whenever the form changes; the model's GGUF header is read once per file, off the
GUI thread (reading it takes seconds for a large vocabulary)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
from pathlib import Path

import psutil
from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QLabel,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis.planner import PlanRow, plan_settings, request_tokens
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import Experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.models.memory import ModelFacts, kv_bytes_per_token, read_model_facts
from workbench.engine.models.model_file import resolve_model
from workbench.ui.theme.qt_theme import signal_color, text_style
from workbench.ui.widgets.read_only_table import read_only_table, two_lines

FIT_SIGNALS = {"fits": "ok", "tight": "warning", "does not fit": "error"}
FIT_COLUMN = 3  # beside the context, where a narrow panel still shows it
# Two lines each, every column as wide as its header and cells: shared out equally, a
# narrow panel cut "ctx/request" to "tx/reques"; now a narrow one scrolls sideways.
COLUMNS = tuple(
    two_lines(h)
    for h in ("ctx", "slots", "ctx/request", "fits?", "total MiB", "KV MiB", "compute MiB")
)


_MODELS: dict[str, ModelFacts] = {}
_READER: concurrent.futures.ProcessPoolExecutor | None = None


async def model_facts(path: Path) -> ModelFacts:
    """Read once per file for the whole app, in a helper process: parsing a GGUF header
    takes seconds of pure Python, which in this process would stall painting (and the
    engine's events) through the interpreter lock."""
    global _READER
    key = str(path)
    if key not in _MODELS:
        if _READER is None:
            _READER = concurrent.futures.ProcessPoolExecutor(
                max_workers=1, mp_context=multiprocessing.get_context("spawn")
            )
        loop = asyncio.get_running_loop()
        _MODELS[key] = await loop.run_in_executor(_READER, read_model_facts, path)
    return _MODELS[key]


def stop_reader() -> None:
    global _READER
    if _READER is not None:
        _READER.shutdown(wait=False, cancel_futures=True)
        _READER = None


class CapacityPanel(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel("Edit the experiment: its memory needs show here.")
        self.summary.setWordWrap(True)
        self.table = read_only_table(COLUMNS)
        self.warnings = QLabel()
        self.warnings.setWordWrap(True)
        self.warnings.setStyleSheet(text_style("warning"))
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.warnings)
        self._task: asyncio.Task[None] | None = None
        self._pending: Experiment | None = None

    def update_for(self, experiment: Experiment) -> None:
        """Recompute for these settings when the panel is on screen (the latest edit wins):
        reading a model's header costs seconds of CPU that a running experiment should
        not have to share."""
        self._pending = experiment
        if self.isVisible():
            self._start_pending()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._start_pending()

    def _start_pending(self) -> None:
        if self._pending is None:
            return
        experiment, self._pending = self._pending, None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = asyncio.ensure_future(self._update(experiment))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        stop_reader()

    async def _update(self, experiment: Experiment) -> None:
        configs = experiment.configs()
        try:
            path: Path = await asyncio.to_thread(resolve_model, configs[0].server.model)
            if str(path) not in _MODELS:
                self.summary.setText("Reading the model's GGUF header…")
            facts = await model_facts(path)
        except WorkbenchError as exc:
            self.summary.setText(str(exc))
            self.table.setRowCount(0)
            return
        # A row a server setting: the longest request any workload beside it sends.
        need: dict[ServerSettings, int] = {}
        for c in configs:
            tokens = request_tokens(c.workload.longest_prompt_tokens, c.workload.max_tokens)
            need[c.server] = max(need.get(c.server, 0), tokens)
        available = psutil.virtual_memory().available
        rows = [plan_settings(facts, s, available, tokens) for s, tokens in need.items()]
        self._show(facts, rows, available)

    def _show(self, facts: ModelFacts, rows: list[PlanRow], available: int) -> None:
        self.summary.setText(
            f"{facts.name} ({facts.quantization}): weights {facts.tensor_bytes / 2**20:.0f} "
            f"MiB, KV {kv_bytes_per_token(facts) / 1024:.1f} KiB per token. Total = weights + "
            f"KV + compute buffers + the server's own {rows[0].runtime_mib if rows else 0:.0f} "
            f"MiB. Available memory: {available / 2**30:.1f} GiB."
        )
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            cells = (
                str(row.ctx),
                f"{row.slots}{' (unified)' if row.unified else ''}",
                str(row.ctx_per_request),
                row.fit,
                f"{row.total_mib:.0f}",
                f"{row.kv_mib:.0f}",
                f"{row.compute_mib:.0f}",
            )
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if c == FIT_COLUMN:
                    item.setForeground(signal_color(FIT_SIGNALS[row.fit]))
                self.table.setItem(r, c, item)
        self.warnings.setText(
            "\n".join(
                sorted(
                    {
                        f"ctx {row.ctx}, {row.slots} slots: {row.warning}"
                        for row in rows
                        if row.warning
                    }
                )
            )
        )
