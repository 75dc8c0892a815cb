"""The terminal's live display: refreshed ten times a second, its results table built again
only when a configuration has ended."""

from __future__ import annotations

from rich.console import Console

from tests.made_sessions import server_of, workload_of
from workbench.cli import progress
from workbench.cli.progress import ProgressState
from workbench.engine.base.records import StartupFacts
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import ConfigFinished, ConfigStarted, TokenChunkArrived
from workbench.engine.figures.summaries import summarize_config


def finished(index: int, label: str) -> ConfigFinished:
    summary = summarize_config(index, label, server_of({}), workload_of({}), StartupFacts(), [])
    return ConfigFinished(index, "ok", summary=summary)


def test_the_results_table_is_built_again_only_when_a_configuration_ends(monkeypatch):
    built = []
    table = progress.results_table
    monkeypatch.setattr(
        progress, "results_table", lambda *a, **k: built.append(1) or table(*a, **k)
    )
    state = ProgressState(summaries=[finished(0, "np=1").summary])
    second = parse_experiment("[server]\nslots = [1, 2]\n").configs()[1]
    state.apply(ConfigStarted(second, 8), 0.0)
    for tick in range(10):  # a second of refreshes while tokens arrive
        now = tick * 0.1
        state.apply(TokenChunkArrived(1, 0, 0, int(now * 1e9), "x"), now)
        state.render(now)
    assert len(built) == 1
    state.apply(finished(1, "np=2"), 1.0)
    rendered = state.render(1.0)
    state.render(1.1)
    assert len(built) == 2
    console = Console(width=200, record=True)
    console.print(rendered)
    assert {"np=1", "np=2"} <= set(console.export_text().split())
