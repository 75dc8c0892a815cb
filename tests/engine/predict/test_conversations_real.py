"""On the real server: conversations predicted turn by turn against a measured run.

What the model relies on, measured: each turn's prompt is the turn before it, its answer,
the chat template's tokens around an exchange and the new message (``ChatTokens``, as the
probe measures them); a turn that comes back to the slot holding its conversation finds
the turn before it and all but the last token of its answer cached (``cache_n``); one whose
slot served another conversation in between finds only the template's opening. The costs
are fitted to the measured run itself, so what is checked is the scheduling and the cache,
not this machine's speed.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from workbench.engine.config.experiment import parse_experiment
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.sized_prompts import ServerTokenizer
from workbench.engine.predict.calibration import ChatTokens, fit_costs
from workbench.engine.predict.probe import chat_tokens
from workbench.engine.predict.sweep import predict_experiment
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.server.llama_server import LlamaServer
from workbench.engine.store import open_session

EXPERIMENT = """name = "chats"
[server]
slots = [1, 2]
ctx = 4096
[workload]
kind = "conversations"
users = 2
turns = 3
user_tokens = 48
max_tokens = 8
warmup = 0
"""
TOKENS = 2  # a turn's prompt, as re-tokenized answers can differ from those generated
SHARE = 0.05  # the later turns' share of their history found in the cache
TTFT = 2.0  # the later turns' TTFT p50, predicted against measured, as a ratio either way


def measured_chat(binary: str, model: Path, log: Path) -> ChatTokens:
    async def measure() -> ChatTokens:
        server = LlamaServer(binary, model, ServerSettings(slots=1, ctx=2048), log)
        await server.start()
        try:
            return await chat_tokens(ServerTokenizer(server.base_url, "chat"))
        finally:
            await asyncio.to_thread(server.stop)

    return asyncio.run(measure())


@pytest.mark.server
def test_conversations_are_predicted_turn_by_turn_as_the_server_ran_them(
    server_binary, model_path, tmp_path
):
    chat = measured_chat(server_binary, model_path, tmp_path / "chat.log")
    experiment = parse_experiment(EXPERIMENT)
    run = run_experiment(experiment, RunOptions(tmp_path / "run"))
    assert run.error is None
    with open_session(run.session_path) as session:
        measured = {s.index: session.records(s.index) for s in run.summaries}
    costs = fit_costs([r for records in measured.values() for r in records]).costs
    predicted = predict_experiment(
        experiment, costs, PromptSource(), chat.prompt, model_path.parent, chat=chat
    )
    for guess, seen in zip(predicted, run.summaries, strict=True):
        by_turn = {(r.conversation_id, r.turn): r for r in measured[seen.index]}
        for record in guess.records:
            real = by_turn[record.conversation_id, record.turn]
            assert abs(record.prompt_tokens - real.usage["prompt_tokens"]) <= TOKENS, record.key
        assert guess.summary.value("lost_turns") == seen.value("lost_turns"), seen.label
        share = guess.summary.value("later_cache_share")
        assert share == pytest.approx(seen.value("later_cache_share"), abs=SHARE), seen.label
        ratio = guess.summary.value("later_ttft_p50_s") / seen.value("later_ttft_p50_s")
        assert 1 / TTFT <= ratio <= TTFT, (seen.label, ratio)
    one_slot, two_slots = predicted
    assert one_slot.summary.value("lost_turns") == 4  # every later turn, by the other's turn
    assert two_slots.summary.value("lost_turns") == 0
