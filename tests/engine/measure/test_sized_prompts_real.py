"""Prompts of a given length against the real server, and what it does with requests that do
not fit a slot: refuses them, or stops them short."""

from __future__ import annotations

import asyncio
import csv

import pytest

from workbench.engine.config.experiment import load_experiment, parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.measure.sized_prompts import (
    ServerTokenizer,
    sized_prompt,
    template_overhead,
)
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.server.llama_server import LlamaServer
from workbench.engine.store import open_session

pytestmark = pytest.mark.server


def sized_run(tmp_path, workload: str, server: str = "slots = 1\nctx = 4096"):
    experiment = parse_experiment(f"name = 'sized'\n[server]\n{server}\n[workload]\n{workload}\n")
    result = run_experiment(experiment, RunOptions(tmp_path))
    with open_session(result.session_path) as session:
        records = [r for c in session.configs for r in session.records(c.index)]
        notices = [n.text for n in session.notices()]
    return result, records, notices


@pytest.mark.parametrize("endpoint", ["chat", "completion"])
def test_prompts_arrive_with_the_length_asked_for(tmp_path, endpoint):
    """128 and 1,024 tokens asked, the server's prompt_n says the same: the chat template's
    fixed share (measured) is part of the count."""
    lengths = "[128, 1024]" if endpoint == "chat" else "128"
    result, records, notices = sized_run(
        tmp_path,
        f"requests = 2\nmax_tokens = 4\nwarmup = 0\nendpoint = '{endpoint}'\n"
        f"input_tokens = {lengths}",
    )
    assert [s.status for s in result.summaries] == ["ok"] * len(result.summaries)
    for record in records:
        assert record.ok, record.error
        asked = 128 if record.config_index == 0 else 1024
        assert record.prompt_tokens == asked
        assert record.timings["prompt_n"] == record.usage["prompt_tokens"] == asked
    assert len({r.prompt for r in records}) == len(records)  # each its own
    assert all(r.prompt.startswith(f"Request {r.index}.") for r in records)
    overhead = 30 if endpoint == "chat" else 0  # SmolLM2's system prompt and markers
    assert any(f"special tokens take {overhead} of them" in n for n in notices)
    for summary in result.summaries:
        assert summary.value("prefill_tok_s") > 0
        assert summary.value("prompt_tokens_p50") == summary.input_tokens


def test_the_text_of_a_chat_prompt_is_the_count_less_the_template(
    server_binary, model_path, tmp_path
):
    async def measure() -> tuple[int, int]:
        server = LlamaServer(
            server_binary, model_path, ServerSettings(slots=1, ctx=2048), tmp_path / "s.log"
        )
        await server.start()
        try:
            tokenizer = ServerTokenizer(server.base_url, "chat")
            overhead = await template_overhead(tokenizer)
            prompt = await sized_prompt(tokenizer, "Request 7. Summarise this.", 500, 7)
            return overhead, len(await tokenizer.tokens(prompt.text)) + overhead - prompt.tokens
        finally:
            await asyncio.to_thread(server.stop)

    overhead, difference = asyncio.run(measure())
    assert overhead == 30 and difference == 0


def test_the_long_document_at_4_slots_is_refused_with_the_servers_reason(tmp_path):
    """The fourth lesson at its sharp end: 3,000-token prompts in 2,048-token slots. Every
    request fails with the server's own words, none counts as a success, and the
    configuration says it did not do the task."""
    experiment = load_experiment("experiments/long-doc-ctx-shrink.toml")
    experiment = experiment.with_overrides({"slots": 4})
    result = run_experiment(experiment, RunOptions(tmp_path))
    (summary,) = result.summaries
    assert summary.n_ctx_slot == 2048
    assert summary.value("ok") == 0 and summary.value("context_failed") == 4
    assert summary.not_same_task == "4 of 4 requests did not fit the context (2048 tokens per slot)"
    with open_session(result.session_path) as session:
        records = session.records(0)
        notices = [n.text for n in session.notices()]
    assert len(records) == 5  # the warm-up too
    for record in records:
        assert not record.ok and record.context_full and record.prompt_tokens == 3000
        assert record.http_status == 400
        assert "request (3000 tokens) exceeds the available context size (2048 tokens)" in (
            record.error
        )
    assert any("gets 2048 tokens of context, less than the 3064 it needs" in n for n in notices)
    with result.tables.concurrency.open() as fh:
        (row,) = csv.DictReader(fh)
    assert row["context_failed"] == "4" and row["not_same_task"] == summary.not_same_task


def test_a_request_whose_context_fills_up_is_stopped_short_and_says_so(tmp_path):
    """A prompt that fits with too little room left: the server answers 200 and stops
    generating when the slot is full (finish_reason length). That is not a success."""
    result, records, _ = sized_run(
        tmp_path,
        "requests = 1\nmax_tokens = 200\nwarmup = 0\ninput_tokens = 400",
        server="slots = 1\nctx = 512",
    )
    (record,) = records
    assert record.http_status == 200 and not record.ok and record.context_full
    made, _ = record.output_tokens
    assert made == 512 - 400  # until prompt and output fill the slot
    assert record.error == (
        f"did not fit the slot's context: the server stopped at {made} of 200 tokens after a "
        "prompt of 400 tokens (finish_reason length: the context filled up)"
    )
    assert result.summaries[0].not_same_task is not None


def test_a_shared_prefix_is_served_from_the_cache_and_unique_prompts_are_not(tmp_path):
    """One slot, requests one after another, the prompt cache on: with a 400-token shared
    opening each later request reuses at least those 400 tokens; with unique prompts only
    the chat template's own opening (30 tokens) and a word or two can be reused."""
    result, records, notices = sized_run(
        tmp_path,
        "requests = 3\nconcurrency = 1\nmax_tokens = 4\nwarmup = 0\ncache_prompt = true\n"
        "shared_prefix_tokens = [400, 0]",
        server="slots = 1\nctx = 2048",
    )
    shared, unique = ([r for r in records if r.config_index == i] for i in (0, 1))
    assert [r.timings["cache_n"] for r in shared][1:] >= [400, 400]
    assert all(r.timings["cache_n"] <= 40 for r in unique)
    assert any("all open with the same 400 tokens" in n for n in notices)
    with_prefix, without = result.summaries
    # Cold, the first of three found nothing: about 2/3 of the shared run's prompt tokens
    # were reused. Short unique prompts are mostly template: a third of theirs.
    assert with_prefix.value("cache_hit_rate") > 0.6 > 0.45 > without.value("cache_hit_rate")
    assert with_prefix.cache_state == "cold" and with_prefix.unasked_cache_hits is None


def test_drawn_lengths_each_arrive_as_drawn(tmp_path):
    _, records, notices = sized_run(
        tmp_path,
        "requests = 3\nmax_tokens = 2\nwarmup = 0\ninput_tokens = 200\n"
        "input_spread = 'uniform'\ninput_spread_tokens = 100",
    )
    drawn = [r.prompt_tokens for r in records]
    assert all(100 <= n <= 300 for n in drawn) and len(set(drawn)) == 3
    assert [r.timings["prompt_n"] for r in records] == drawn
    assert any(f"prompts of {min(drawn)} to {max(drawn)} tokens" in n for n in notices)
