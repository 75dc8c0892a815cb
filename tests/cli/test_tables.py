"""The results tables: one header per value, the lab's figures first and in the lab's order,
laid out at the width they are printed at with nothing cut."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from tests.made_sessions import server_of, workload_of
from workbench.cli.progress import ProgressState
from workbench.cli.tables import Column, Fitted, ResultColumns, parse_columns, results_table
from workbench.engine.base.records import RequestRecord, StartupFacts, TokenChunk
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import ConfigStarted, ExperimentStarted
from workbench.engine.figures.metrics import View, figure, shown_in
from workbench.engine.figures.per_run import summarize_run
from workbench.engine.figures.summaries import ConfigSummary, summarize_config

BOX = re.compile("[\u2500-\u257f]")  # rich's box drawing


def words(text: str) -> set[str]:
    """What the output shows, word by word, without the tables' lines."""
    return set(BOX.sub(" ", text).split())


def printed(renderable: object, width: int) -> str:
    console = Console(width=width, record=True)
    console.print(renderable)
    return console.export_text()


def tables_of(text: str) -> list[list[str]]:
    """Each table's lines, from its top edge to its bottom."""
    tables, current = [], None
    for line in text.splitlines():
        if line.startswith("┏"):
            current = []
        if current is not None:
            current.append(line)
        if line.startswith("└") and current is not None:
            tables.append(current)
            current = None
    return tables


def header_of(table: list[str]) -> list[str]:
    """A table's headers, their wrapped lines joined."""
    lines = [line for line in table[1 : table.index(next(x for x in table if x[0] == "┡"))]]
    cells = [[c.strip() for c in line.strip("┃").split("┃")] for line in lines]
    return [" ".join(w for w in column if w) for column in zip(*cells, strict=True)]


def record(index: int, submit_s: float, first_s: float, last_s: float) -> RequestRecord:
    ns = 1_000_000_000
    chunks = [TokenChunk(int(first_s * ns), "a"), TokenChunk(int(last_s * ns), "b")]
    return RequestRecord(
        0,
        0,
        index,
        "p",
        t_submit_ns=int(submit_s * ns),
        t_first_token_ns=int(first_s * ns),
        t_last_token_ns=int(last_s * ns),
        t_done_ns=int(last_s * ns),
        ok=True,
        usage={"completion_tokens": 11},
        timings={"prompt_ms": 100.0, "prompt_n": 50, "cache_n": 0},
        chunks=chunks,
    )


def one_config(label: str = "np=1") -> ConfigSummary:
    run = summarize_run([record(0, 0.0, 0.5, 1.5), record(1, 0.0, 1.5, 2.5)])
    return summarize_config(
        0,
        label,
        server_of({"slots": 1, "ctx": 8192}),
        workload_of({"requests": 2}),
        StartupFacts(n_ctx_slot=8192),
        [run],
    )


def test_every_value_has_its_column():
    text = printed(results_table([one_config()], columns=ResultColumns(wide=True)), 250)
    (table,) = tables_of(text)
    assert header_of(table) == [f.header for f in shown_in(View.TERMINAL)]
    row = next(line for line in table if "np=1" in line)
    cells = [cell.strip() for cell in row.strip("│ \n").split("│")]
    # makespan 2.5 s; 22 tokens / 2.5 s; TTFT p50 (interpolated) and max; decode 1/TPOT;
    # no failures or cache hits; TPOT 100 ms; the one ITL gap of 1 s; queue wait = TTFT -
    # 0.1 s prefill (the catalogue's order, as in concurrency.csv).
    assert cells == [
        "np=1",
        "1",
        "8192",
        "8192",
        "2",
        "2.50",
        "8.8",
        "1.000",
        "1.500",
        "10.0",
        "0",
        "0",  # none did not fit the context
        "500.0",  # prefill: 50 prompt tokens in 100 ms
        "0",
        "100.00",
        "1000.00",
        "0.900",
        "1.400",
        "-",  # dispatch delay p99: these records were made without an arrival schedule
    ]


def test_the_lab_figures_lead_and_the_others_follow():
    """The first table is the lab's: total time, aggregate tok/s, TTFT p50 and max,
    per-request decode speed, after the label; the settings and every other figure of the
    terminal's follow in their own tables."""
    tables = tables_of(printed(results_table([one_config()]), 120))
    lead = ["label", "makespan_s", "agg_tok_s", "ttft_p50_s", "ttft_max_s", "decode_tok_s"]
    assert header_of(tables[0]) == [figure(key).header for key in lead]
    shown = [header for table in tables[1:] for header in header_of(table)[1:]]
    assert shown == [f.header for f in shown_in(View.TERMINAL) if f.key not in lead]
    assert all(header_of(table)[0] == figure("label").header for table in tables)


@pytest.mark.parametrize("width", [40, 60, 80, 100])
def test_nothing_is_cut_at_any_width(width):
    marked = one_config("concurrency=16 rate=2.5")
    text = printed(results_table([marked], columns=ResultColumns(wide=True)), width)
    assert max(map(len, text.splitlines())) <= width
    assert "…" not in text
    shown = words(text)
    for f in shown_in(View.TERMINAL):
        assert set(f.header.split()) <= shown, f.header
        assert set(f.cell(marked, with_sd=True).split()) <= shown, f.key


def test_a_table_too_wide_for_its_keys_becomes_blocks():
    """Where not one column fits beside the row's name, each row is a block of lines."""
    table = Fitted(
        [Column("configuration", "left"), Column("aggregate throughput")],
        [["np=1 concurrency=16", "1234.5 ±12.3"], ["np=2", "99.0"]],
        title="Results",
    )
    text = printed(table, 24)
    assert [line.rstrip() for line in text.splitlines()] == [
        "Results",
        "np=1 concurrency=16",
        "  aggregate throughput:",
        "1234.5 ±12.3",
        "np=2",
        "  aggregate throughput:",
        "99.0",
    ]
    assert "┏" in printed(table, 40)  # room enough: a table


def test_a_column_too_wide_to_fit_follows_the_table_as_blocks():
    """A long URL in one request's error: the other columns stay a table, and only the row
    with an error gets a block."""
    url = "https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/400"
    table = Fitted(
        [Column("request"), Column("ok", "left"), Column("error", "left")],
        [["1", "True", "-"], ["2", "False", f"400 Bad Request, see {url}"]],
        keys=1,
    )
    text = printed(table, 70)  # the URL fits a line, not a column beside the request's
    lines = [line.rstrip() for line in text.splitlines()]
    (tables,) = tables_of(text)
    assert header_of(tables) == ["request", "ok"]
    assert lines[len(tables) :] == ["2", "  error: 400 Bad Request, see", url]


def test_a_wide_table_is_split_and_each_part_keeps_the_row_names():
    names = [f"figure number {n}" for n in range(8)]
    table = Fitted(
        [Column("config", "left"), *(Column(name) for name in names)],
        [["np=1", *(f"{n}.25" for n in range(8))]],
    )
    tables = tables_of(printed(table, 50))
    assert len(tables) > 1
    assert all(header_of(t)[0] == "config" and "np=1" in t[-2] for t in tables)
    assert [h for t in tables for h in header_of(t)[1:]] == names


def test_columns_picks_the_figures_by_their_keys():
    """By concurrency.csv's columns, or the catalogue's keys where they differ."""
    choice = parse_columns("agg_tok_s, ttft_p99_s,total_s,makespan_s")
    (table,) = tables_of(printed(results_table([one_config()], columns=choice), 120))
    assert header_of(table) == ["config", "agg tok/s", "TTFT p99 s", "total s"]
    with pytest.raises(Exception, match="no figure 'agg_toks' \\(did you mean agg_tok_s\\?\\)"):
        parse_columns("agg_toks")


def test_a_resumed_run_counts_the_configurations_it_kept():
    """Resuming the third configuration of three, with the first kept: the live line says
    3/3, and the kept one is in the live table."""
    kept = one_config("np=1")
    state = ProgressState(summaries=[kept])
    state.apply(ExperimentStarted("sweep", "s.session.sqlite", 2, "managed", 0), 0.0)
    third = parse_experiment("[server]\nslots = [1, 2, 4]\n").configs()[2]
    state.apply(ConfigStarted(third, 8), 0.0)
    text = printed(state.render(0.0), 60)
    assert "config 3/3: np=4" in " ".join(text.split())
    assert {"np=1", "agg", "tok/s"} <= words(text)


def test_the_live_line_wraps_between_its_parts():
    state = ProgressState()
    state.apply(ExperimentStarted("a-long-experiment-name", "s", 1, "managed", 0), 0.0)
    config = parse_experiment("[server]\nslots = 4\n").configs()[0]
    state.apply(ConfigStarted(config, 8), 0.0)
    text = printed(state.render(0.0), 30)
    assert {"a-long-experiment-name", "config", "1/1:", "requests", "0/8"} <= words(text)
