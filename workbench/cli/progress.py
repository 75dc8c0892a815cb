"""Live progress for ``workbench run``: which config, how many requests done, and the live
chunk rate: an estimate, named apart from the aggregate tok/s that the results table gives."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.text import Text

from workbench.cli.tables import ResultColumns, results_table
from workbench.engine.base.records import StartupFacts
from workbench.engine.base.states import ServerState
from workbench.engine.events import (
    ConfigFinished,
    ConfigStarted,
    ExperimentStarted,
    Notice,
    RequestFinished,
    ServerReady,
    ServerStateChanged,
    TokenChunkArrived,
)
from workbench.engine.figures.metrics import figure
from workbench.engine.figures.summaries import ConfigSummary

RATE_WINDOW_S = 2.0


@dataclass
class ProgressState:
    """What the terminal shows, folded from engine events. ``summaries`` starts with the
    configurations a resumed session finished already, which count in ``n_configs``."""

    columns: ResultColumns = field(default_factory=ResultColumns)
    name: str = ""
    n_configs: int = 0
    config_label: str = ""
    config_index: int = -1
    server_state: str = ""
    facts: StartupFacts = field(default_factory=StartupFacts)
    done: int = 0
    failed: int = 0
    total: int = 0
    summaries: list[ConfigSummary] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    _arrivals: collections.deque[float] = field(default_factory=collections.deque)
    # The results table as last built, and for how many summaries: it changes only when a
    # configuration ends, while the status line below it changes on every refresh.
    _table: Group | None = None
    _table_rows: int = 0

    def apply(self, event: Any, now: float) -> None:
        match event:
            case ExperimentStarted():
                self.name, self.n_configs = event.name, event.n_configs + len(self.summaries)
            case ConfigStarted(config=config):
                self.config_label, self.config_index = config.label, config.index
                self.done = self.failed = 0
                self.total = event.total_requests
                self.facts = StartupFacts()
            case ServerStateChanged():
                self.server_state = event.state
            case ServerReady():
                self.facts = event.facts
            case TokenChunkArrived():
                self._arrivals.append(now)
            case RequestFinished(record=r) if not r.warmup:
                self.done += 1
                self.failed += 0 if r.ok or r.cancelled else 1
            case ConfigFinished(summary=summary) if summary is not None:
                self.summaries.append(summary)
            case Notice():
                self.notices.append(event)

    def chunk_rate(self, now: float) -> float:
        while self._arrivals and self._arrivals[0] < now - RATE_WINDOW_S:
            self._arrivals.popleft()
        return len(self._arrivals) / RATE_WINDOW_S

    def render(self, now: float | None = None) -> Group:
        """The first results table (the one a run is watched by), then one status line
        that wraps between its parts at the terminal's width."""
        now = time.monotonic() if now is None else now
        facts = self.facts
        parts = [
            Text(self.name, style="bold"),
            Text(f"config {self.config_index + 1}/{self.n_configs}: {self.config_label}"),
            Text(f"server: {self.server_state}", style=_state_style(self.server_state)),
            Text(
                f"requests {self.done}/{self.total}"
                + (f" ({self.failed} failed)" if self.failed else "")
            ),
            Text(live_rate_text(self.chunk_rate(now))),
        ]
        if facts.n_slots is not None:
            parts.append(
                Text(
                    f"n_slots={facts.n_slots} n_ctx_slot={facts.n_ctx_slot} "
                    f"kv_unified={facts.kv_unified}",
                    style="dim",
                )
            )
        status = Text("  ").join(parts)
        if not self.summaries:
            return Group(status)
        if self._table is None or self._table_rows != len(self.summaries):
            self._table = results_table(self.summaries, columns=self.columns.lead())
            self._table_rows = len(self.summaries)
        return Group(self._table, status)


def live_rate_text(rate: float) -> str:
    """``live ≈12 chunks/s``: chunks, not tokens (a chunk may carry several), and an
    estimate over the last seconds, not the configuration's aggregate tok/s."""
    return figure("live_chunk_rate").live_text(rate)


def _state_style(state: str) -> str:
    return {
        ServerState.CRASHED: "bold red",
        ServerState.RUNNING: "green",
        ServerState.HEALTHY: "green",
        ServerState.STARTING: "yellow",
        ServerState.STOPPING: "yellow",
    }.get(state, "")
