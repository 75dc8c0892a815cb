"""What llama-server (b11434) does with a draft model, measured with SmolLM2-135M as its own
draft, since the settings and figures rely on it:

- ``-md`` alone loads the draft and never drafts (``n_decode_total`` counts one step a token,
  the spec counters stay 0): it needs ``--spec-type draft-simple``, which ``draft_model``
  gives with it; ``--draft-max`` was removed (the server refuses to start on it), so
  ``draft_max`` is ``--spec-draft-n-max``.
- ``/metrics`` has ``llamacpp:spec_decode_num_drafts_total``, ``..._draft_tokens_total`` and
  ``..._accepted_tokens_total`` (at 0 without a draft), cumulative, adding every slot's
  drafts; each response's ``timings`` gains ``draft_n`` and ``draft_n_accepted``, which add
  up to the counters' differences.
- ``-np 2``: both slots draft, at once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from workbench.engine.base.errors import ServerStartError
from workbench.engine.base.server_kinds import LLAMACPP, parse_metrics
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.figures.metrics import figure
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.server.llama_server import LlamaServer

pytestmark = pytest.mark.server

TOKENS = 6
COUNTERS = (*LLAMACPP.drafts, *LLAMACPP.draft_tokens, *LLAMACPP.accepted_tokens)


async def started(binary: str, model: Path, log: Path, **settings) -> LlamaServer:
    server = LlamaServer(binary, model, ServerSettings(ctx=2048, **settings), log)
    await server.start()
    return server


async def complete(client: httpx.AsyncClient, text: str) -> dict:
    body = {"prompt": text, "max_tokens": TOKENS, "temperature": 0, "ignore_eos": True}
    response = await client.post("/completion", json=body, timeout=300)
    response.raise_for_status()
    return response.json()["timings"]


async def counters(client: httpx.AsyncClient) -> dict[str, float]:
    values = parse_metrics((await client.get("/metrics", timeout=30)).text)
    return {name: values[name] for name in (*COUNTERS, "llamacpp:n_decode_total")}


async def test_the_counters_count_every_slots_drafts(server_binary, model_path, tmp_path):
    server = await started(
        server_binary, model_path, tmp_path / "s.log", slots=2, draft_model=str(model_path),
        draft_max=4,
    )  # fmt: skip
    try:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            before = await counters(client)
            assert all(before[name] == 0 for name in COUNTERS)
            one, two = await asyncio.gather(
                complete(client, "Count from one to ten:"), complete(client, "The sky is")
            )
            middle = await counters(client)
            third = await complete(client, "Once upon a time")
            after = await counters(client)
    finally:
        await asyncio.to_thread(server.stop)
    assert all(t["draft_n"] > 0 for t in (one, two))  # both slots drafted
    drafted = [middle[name] - before[name] for name in COUNTERS]
    assert drafted[1] == one["draft_n"] + two["draft_n"]
    assert drafted[2] == one["draft_n_accepted"] + two["draft_n_accepted"]
    assert 0 < drafted[0] <= drafted[1] <= 4 * drafted[0]  # at most draft_max a draft
    assert 0 <= drafted[2] <= drafted[1]
    # cumulative: the third request's drafts come on top
    assert after[LLAMACPP.draft_tokens[0]] == middle[LLAMACPP.draft_tokens[0]] + third["draft_n"]


async def test_a_draft_model_alone_never_drafts(server_binary, model_path, tmp_path):
    server = await started(
        server_binary, model_path, tmp_path / "s.log", extra_args=("-md", str(model_path))
    )
    try:
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            timings = await complete(client, "The sky is")
            after = await counters(client)
    finally:
        await asyncio.to_thread(server.stop)
    assert "draft_n" not in timings
    assert all(after[name] == 0 for name in COUNTERS)
    assert after["llamacpp:n_decode_total"] >= TOKENS  # a step a token: no verification


async def test_the_removed_draft_max_flag_stops_the_server(server_binary, model_path, tmp_path):
    with pytest.raises(ServerStartError):
        await started(
            server_binary, model_path, tmp_path / "s.log", extra_args=("--draft-max", "4")
        )
    assert "--draft-max" in (tmp_path / "s.log").read_text()


def test_a_run_with_a_draft_model_reports_its_drafts(tmp_path):
    experiment = parse_experiment(
        '[server]\nslots = 2\nctx = 2048\ndraft_model = "default"\ndraft_max = 4\n'
        f"[workload]\nrequests = 2\nmax_tokens = {TOKENS}\nwarmup = 0\n"
    )
    (summary,) = run_experiment(experiment, RunOptions(tmp_path)).summaries
    assert summary.status == "ok"
    assert figure("spec_drafts").of(summary) > 0
    assert 0 <= figure("spec_acceptance").of(summary) <= 1
    assert figure("spec_accepted_tokens").of(summary) <= figure("spec_draft_tokens").of(summary)
