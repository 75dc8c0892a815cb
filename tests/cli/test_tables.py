"""The results table: one header per value, the lab's figures in the lab's order."""

from __future__ import annotations

from rich.console import Console

from workbench.cli.tables import results_table
from workbench.engine.base.records import RequestRecord, StartupFacts, TokenChunk
from workbench.engine.figures.summaries import summarize_config, summarize_run


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


def test_every_value_has_its_column():
    run = summarize_run([record(0, 0.0, 0.5, 1.5), record(1, 0.0, 1.5, 2.5)])
    summary = summarize_config(
        0, "np=1", {"slots": 1, "ctx": 8192}, {"requests": 2}, StartupFacts(n_ctx_slot=8192), [run]
    )
    table = results_table([summary])
    assert {len(column._cells) for column in table.columns} == {1}
    console = Console(width=250, record=True)
    console.print(table)
    text = console.export_text()
    header = next(line for line in text.splitlines() if "config" in line)
    order = [
        "np",
        "ctx",
        "ctx/slot",
        "total s",
        "agg tok/s",
        "TTFT p50 s",
        "TTFT max s",
        "decode tok/s",
    ]
    positions = [header.index(name) for name in order]
    assert positions == sorted(positions)
    row = next(line for line in text.splitlines() if "np=1" in line)
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
