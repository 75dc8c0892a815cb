"""Generation stalls on the real llama-server: a chat streaming at 2 slots while a 640-token
prompt arrives and is processed in chunks of 64 tokens (``-b 64``) beside it. Each chunk is
one long step for the chat, so the chat stalls about once a chunk, each stall far above its
pace and the floor; the document's own short answer does not stall; and a chat alone does
not stall at all."""

from __future__ import annotations

import json

import pytest

from workbench.engine.config.experiment import load_experiment
from workbench.engine.run.lifecycle import run_experiment
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session

pytestmark = pytest.mark.server

CHAT = {"timestamp": 0, "input_length": 40, "output_length": 96, "hash_ids": [1]}
DOCUMENT = {"timestamp": 300, "input_length": 640, "output_length": 8, "hash_ids": [2, 3, 4]}


def run(folder, rows: list[dict]):
    (folder / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "e.toml").write_text(
        "name = 'stalls'\n[server]\nslots = 2\nctx = 4096\nbatch_size = 64\n"
        "[workload]\n"
        'arrival = "trace"\ntrace = "t.jsonl"\nwarmup = 0\nignore_eos = true\n'
    )
    result = run_experiment(load_experiment(folder / "e.toml"), RunOptions(folder / "out"))
    assert [s.status for s in result.summaries] == ["ok"]
    with open_session(result.session_path) as session:
        (summary,) = session.summaries()
    return summary


def test_a_document_processed_beside_a_chat_stalls_it(tmp_path):
    summary = run(tmp_path, [CHAT, DOCUMENT])
    assert summary.value("stalled_stream_share") == 0.5  # the chat, not the document
    assert summary.value("stall_max_s") > 0.25
    chunks = DOCUMENT["input_length"] // 64
    assert summary.value("stalled_s") > chunks / 2 * 0.25
    assert summary.value("gaps_within_share") < 1.0


def test_a_chat_alone_does_not_stall(tmp_path):
    summary = run(tmp_path, [CHAT])
    assert summary.value("stalled_stream_share") == 0.0
    assert summary.value("stall_max_s") is None and summary.value("gaps_within_share") == 1.0
