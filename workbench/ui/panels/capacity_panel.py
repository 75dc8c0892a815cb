"""Next to the experiment editor: will these server settings fit in this machine's memory?

Recomputed whenever the form changes; the model's GGUF header is read once per file, off the
GUI thread (reading it takes seconds for a large vocabulary)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import multiprocessing
from pathlib import Path
from typing import Any

import psutil
from PySide6.QtCore import Qt
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QLabel,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.analysis.planner import plan, request_tokens
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import WorkloadSettings
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import field_named
from workbench.engine.models.memory import ModelFacts, kv_bytes_per_token, read_model_facts
from workbench.engine.models.model_file import resolve_model
from workbench.ui.theme.qt_theme import signal_color, text_style
from workbench.ui.widgets.read_only_table import read_only_table, two_lines

FIT_SIGNALS = {"fits": "ok", "tight": "warning", "does not fit": "error"}
# Two lines each, every column as wide as its header and cells: shared out equally, a
# narrow panel cut "ctx/request" to "tx/reques"; now a narrow one scrolls sideways.
COLUMNS = tuple(
    two_lines(h) for h in ("ctx", "slots", "ctx/request", "KV MiB", "total MiB", "fits?")
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


def _values(table: dict[str, Any], cls: type, name: str) -> list[Any]:
    """A field's values in a form's table: its sweep, its one value, or the schema's default."""
    value = table.get(name, field_named(cls, name).default)
    return value if isinstance(value, list) else [value]


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
        self._pending: tuple[dict[str, Any], dict[str, Any]] | None = None

    def update_for(self, server: dict[str, Any], workload: dict[str, Any]) -> None:
        """Recompute for these settings when the panel is on screen (the latest edit wins):
        reading a model's header costs seconds of CPU that a running experiment should
        not have to share."""
        self._pending = (server, workload)
        if self.isVisible():
            self._start_pending()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._start_pending()

    def _start_pending(self) -> None:
        if self._pending is None:
            return
        server, workload = self._pending
        self._pending = None
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = asyncio.ensure_future(self._update(server, workload))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        stop_reader()

    async def _update(self, server: dict[str, Any], workload: dict[str, Any]) -> None:
        model_field = str(_values(server, ServerSettings, "model")[0])
        try:
            path: Path = await asyncio.to_thread(resolve_model, model_field)
            if str(path) not in _MODELS:
                self.summary.setText("Reading the model's GGUF header…")
            facts = await model_facts(path)
        except WorkbenchError as exc:
            self.summary.setText(str(exc))
            self.table.setRowCount(0)
            return
        kv_type = _values(server, ServerSettings, "cache_type_k")[0] or "f16"  # llama.cpp's own
        per_slots = _values(server, ServerSettings, "kv_unified_per_slot")
        unified = server.get("kv_unified") is True or per_slots != [None]
        need = request_tokens(
            int(max(_values(workload, WorkloadSettings, "input_tokens"))),
            int(max(_values(workload, WorkloadSettings, "max_tokens"))),
        )
        available = psutil.virtual_memory().available
        with contextlib.suppress(WorkbenchError):
            rows = [
                row
                for per_slot in per_slots
                for row in plan(
                    facts,
                    [int(v) for v in _values(server, ServerSettings, "ctx")],
                    [int(v) for v in _values(server, ServerSettings, "slots")],
                    available,
                    unified=unified,
                    type_k=str(kv_type),
                    need_tokens=need,
                    per_slot=per_slot,
                )
            ]
            self._show(facts, rows, available)

    def _show(self, facts: ModelFacts, rows: list[Any], available: int) -> None:
        self.summary.setText(
            f"{facts.name} ({facts.quantization}): weights {facts.tensor_bytes / 2**20:.0f} "
            f"MiB, KV {kv_bytes_per_token(facts) / 1024:.1f} KiB per token. "
            f"Available memory: {available / 2**30:.1f} GiB."
        )
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            cells = (
                str(row.ctx),
                f"{row.slots}{' (unified)' if row.unified else ''}",
                str(row.ctx_per_request),
                f"{row.kv_mib:.0f}",
                f"{row.total_mib:.0f}",
                row.fit,
            )
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if c == len(cells) - 1:
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
