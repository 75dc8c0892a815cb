"""A Mooncake trace replayed against the real llama-server, twice as fast and half as long: each
request goes when the scaled trace says (within 5 ms), its prompt exactly the scaled
``input_length`` by the server's count, its answer the scaled ``output_length``, and rows that
share hash ids share their prompt's opening, token for token, which the server's cache shows.

Measured on SmolLM2-135M at one slot with the prompt cache on and no RAM cache: a row whose
prompt holds an earlier row's whole text has ``timings.cache_n`` = the earlier prompt less its
last 6 template tokens (the chat template opens every prompt with the same 24 tokens and
closes it with 6); a row sharing its first k blocks has cache_n = 24 + k blocks; a row that
shares no block, 24."""

from __future__ import annotations

import json

import pytest

from workbench.engine.config.experiment import load_experiment
from workbench.engine.figures.per_request import dispatch_delay_s
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session

pytestmark = pytest.mark.server

TIME_SCALE, LENGTH_SCALE, BLOCK = 2.0, 0.5, 128
ROWS = [
    {"timestamp": 0, "input_length": 400, "output_length": 8, "hash_ids": [1, 2, 3, 4]},
    {"timestamp": 400, "input_length": 360, "output_length": 12, "hash_ids": [1, 2, 9]},
    {"timestamp": 900, "input_length": 100, "output_length": 8, "hash_ids": [5]},
    {"timestamp": 1500, "input_length": 300, "output_length": 4, "hash_ids": [6, 7, 8]},
    {"timestamp": 2000, "input_length": 40, "output_length": 4, "hash_ids": []},
]
TEMPLATE_TOKENS = 30  # SmolLM2's chat template around one user message (measured)
TEMPLATE_OPENING = 24  # of them, before the message
SEND_TOLERANCE_S = 0.005


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
    (folder / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    (folder / "e.toml").write_text(
        f"""name = 'trace'
[server]
slots = 1
ctx = 4096
cache_ram_mib = 0
[workload]
arrival = "trace"
trace = "t.jsonl"
requests = 8
time_scale = {TIME_SCALE}
length_scale = {LENGTH_SCALE}
block_size = {BLOCK}
cache_prompt = true
warmup = 0
"""
    )
    result = run_experiment(load_experiment(folder / "e.toml"), RunOptions(folder / "out"))
    assert [s.status for s in result.summaries] == ["ok"]
    with open_session(result.session_path) as session:
        records = sorted(session.records(0), key=lambda r: r.index)
        notices = [n.text for n in session.notices()]
    return records, notices


def test_every_row_is_sent_when_the_scaled_trace_says(replayed):
    """Due at the scaled trace time to the nanosecond, and sent within 5 ms of it (the dispatch
    delay, which leaves out the connection's opening, reported on its own)."""
    records, _ = replayed
    assert len(records) == len(ROWS)  # the trace's rows, not requests = 8
    t0 = records[0].t_intended_ns
    for record, row in zip(records, ROWS, strict=True):
        assert record.ok, record.error
        assert record.t_intended_ns - t0 == round(row["timestamp"] / 1000 / TIME_SCALE * 1e9)
        assert record.t_ready_ns == record.t_intended_ns  # no client-side limit
        assert dispatch_delay_s(record) <= SEND_TOLERANCE_S


def test_prompts_and_answers_are_the_scaled_lengths(replayed):
    """A row shorter than the chat template is raised to the template and a token, and the
    run says so."""
    records, notices = replayed
    for record, row in zip(records, ROWS, strict=True):
        asked = max(round(row["input_length"] * LENGTH_SCALE), TEMPLATE_TOKENS + 1)
        assert record.prompt_tokens == record.usage["prompt_tokens"] == asked
        assert record.usage["completion_tokens"] == round(row["output_length"] * LENGTH_SCALE)
    assert any(
        f"1 of its 5 rows are shorter than that: raised to {TEMPLATE_TOKENS + 1}" in n
        for n in notices
    )


def test_shared_hash_ids_are_a_shared_prompt_prefix_the_cache_serves(replayed):
    records, _ = replayed
    block = round(BLOCK * LENGTH_SCALE)
    cached = [r.timings["cache_n"] for r in records]
    assert cached[1] == TEMPLATE_OPENING + 2 * block  # blocks 1 and 2, as row 0 sent them
    assert records[1].prompt[:100] == records[0].prompt[:100]
    assert cached[2] == TEMPLATE_OPENING  # block 5 is its own
    assert records[2].prompt[:100] != records[0].prompt[:100]
