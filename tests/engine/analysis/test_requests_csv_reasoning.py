"""requests.csv's reasoning columns: TTFO, the reasoning tokens and where their count came
from, after every column it had before (a reader that takes columns by place still finds
them)."""

from __future__ import annotations

import csv

from tests.engine.store.test_reasoning_stored import reasoned_session
from workbench.engine.analysis.export import REQUEST_COLUMNS, write_requests_csv
from workbench.engine.store import open_session

# The columns before TTFO and the reasoning tokens came, in their order.
EARLIER = [
    "config", "label", "repeat", "request", "warmup", "ok", "error", "http_status", "slot",
    "t_intended_s", "t_ready_s", "t_submit_s", "t_first_token_s", "t_last_token_s", "t_done_s",
    "ttft_s", "e2e_s", "tpot_ms", "decode_tok_s", "queue_wait_s", "prefill_s", "dispatch_ms",
    "connect_ms", "prompt_tokens", "prefill_tok_s", "ttft_from_intended_s",
    "e2e_from_intended_s", "output_tokens", "token_source", "chunks", "finish_reason",
    "cache_hit", "cache_n", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "prompt",
]  # fmt: skip


def test_the_reasoning_columns_come_last(tmp_path):
    reasoning = ["ttfo_s", "reasoning_tokens", "reasoning_token_source"]
    assert [*EARLIER, *reasoning] == REQUEST_COLUMNS[: len(EARLIER) + 3]  # then conversation's
    with open_session(reasoned_session(tmp_path)) as session:
        write_requests_csv(tmp_path / "requests.csv", session)
    with (tmp_path / "requests.csv").open() as fh:
        reasoned, answered = csv.DictReader(fh)
    # Reasoning for 4 chunks 0.1 s apart after a TTFT of 0.1 s: the answer 0.4 s later.
    assert (reasoned["ttft_s"], reasoned["ttfo_s"]) == ("0.1", "0.5")
    assert (reasoned["reasoning_tokens"], reasoned["reasoning_token_source"]) == ("4", "chunks")
    assert reasoned["output_tokens"] == "12"  # the reasoning tokens are output tokens too
    assert answered["ttfo_s"] == answered["ttft_s"] == "0.1"
    assert (answered["reasoning_tokens"], answered["reasoning_token_source"]) == ("0", "chunks")
