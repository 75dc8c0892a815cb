"""The streaming client against a fake server that produces faults on demand.

Every fault must end as a failed record with a specific error and the chunks that did arrive;
no fault may end the run for the other requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
from typing import Any

import httpx
import pytest

from tests.fakes.sse_server import Behaviour, FakeServer
from workbench.engine.base.records import RequestRecord, TokenChunk
from workbench.engine.config.experiment import RequestsWorkload, WorkloadSettings
from workbench.engine.events import FirstToken, RequestFinished, RequestSubmitted, TokenChunkArrived
from workbench.engine.figures.per_request import request_metrics
from workbench.engine.measure.client import _apply_payload, stream_request
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.workload import (
    arrival_offsets,
    make_client,
    plan_records,
    run_requests,
)

NS = 1e9


def settings(**overrides: Any) -> WorkloadSettings:
    return RequestsWorkload(
        **{"requests": 1, "max_tokens": 8, "request_timeout_s": 5.0, **overrides}
    )


async def stream_one(
    base_url: str, workload: WorkloadSettings | None = None, prompt: str = "Say hi."
) -> tuple[RequestRecord, list[Any]]:
    workload = workload or settings()
    events: list[Any] = []
    record = RequestRecord(0, 0, 0, prompt)
    async with make_client(base_url, workload) as client:
        result = await stream_request(client, record, workload, 7, events.append)
    assert result is record
    return record, events


# -- the happy path ------------------------------------------------------------------------
async def test_normal_stream_records_every_chunk_and_the_server_count() -> None:
    behaviour = Behaviour(tokens=6, first_delay_s=0.03, delay_s=0.005)
    async with FakeServer(behaviour) as server:
        record, events = await stream_one(server.base_url)

    assert record.ok and record.error is None
    assert record.http_status == 200
    assert record.finish_reason == "stop"
    assert [c.text for c in record.chunks] == [f"tok{i} " for i in range(6)]
    assert record.output_tokens == (6, "usage")
    assert record.timings is not None and record.timings["prompt_ms"] == 4.0
    assert record.t_submit_ns < record.t_first_token_ns < record.t_last_token_ns <= record.t_done_ns
    assert record.t_first_token_ns == record.chunks[0].t_ns
    assert record.t_last_token_ns == record.chunks[-1].t_ns
    times = [c.t_ns for c in record.chunks]
    assert times == sorted(times)
    assert (record.t_first_token_ns - record.t_submit_ns) / NS >= 0.03  # the fake's "prefill"

    kinds = [type(e) for e in events]
    assert kinds == [RequestSubmitted, FirstToken] + [TokenChunkArrived] * 6
    assert events[0].t_ns == record.t_submit_ns
    assert events[1].t_ns == record.t_first_token_ns
    assert "".join(e.text for e in events[2:]) == record.text

    (sent,) = server.completions
    assert sent.path == "/v1/chat/completions"
    assert sent.body is not None
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["max_tokens"] == 8 and sent.body["seed"] == 7
    assert sent.body["messages"] == [{"role": "user", "content": "Say hi."}]


@pytest.mark.parametrize(
    ("behaviour", "expected"),
    [
        (Behaviour(tokens=4, completion_tokens=9), (9, "usage")),
        (Behaviour(tokens=4, usage=False), (4, "timings")),
        (Behaviour(tokens=4, usage=False, timings=False), (4, "chunks")),
    ],
    ids=["usage", "timings", "chunks"],
)
async def test_token_count_prefers_the_server(behaviour: Behaviour, expected: tuple) -> None:
    async with FakeServer(behaviour) as server:
        record, _ = await stream_one(server.base_url)
    assert record.ok
    assert record.output_tokens == expected


async def test_role_only_delta_is_not_the_first_token() -> None:
    behaviour = Behaviour(tokens=3, role_delta=True, first_delay_s=0.05)
    async with FakeServer(behaviour) as server:
        record, events = await stream_one(server.base_url)
    assert record.ok
    assert [c.text for c in record.chunks] == ["tok0 ", "tok1 ", "tok2 "]
    assert (record.t_first_token_ns - record.t_submit_ns) / NS >= 0.05
    assert sum(isinstance(e, FirstToken) for e in events) == 1


async def test_reasoning_content_counts_as_a_token() -> None:
    async with FakeServer(Behaviour(tokens=2, text_key="reasoning_content")) as server:
        record, events = await stream_one(server.base_url)
    assert record.ok
    assert record.text == "tok0 tok1 "
    assert record.t_first_token_ns is not None
    # All of it reasoning: no answer came, so no TTFO, and the reasoning chunks counted.
    assert [c.reasoning for c in record.chunks] == [True, True]
    assert record.t_first_answer_ns is None
    assert record.reasoning_tokens == (2, "chunks")
    assert [e.reasoning for e in events if isinstance(e, TokenChunkArrived)] == [True, True]


@pytest.mark.parametrize("delta", ["delta", "message"])
def test_a_delta_of_reasoning_and_answer_is_two_chunks_of_one_time(delta: str) -> None:
    """The turn from reasoning to answer may come in one delta (vLLM's parser can give both),
    or a whole answer holds both: the reasoning first, then the answer, at the same time."""
    record, events = RequestRecord(0, 0, 0, "p"), []
    choice = {delta: {"reasoning": "so ", "content": "yes"}}
    _apply_payload(record, {"choices": [{"delta": {"reasoning_content": "hm "}}]}, 5, events.append)
    _apply_payload(record, {"choices": [choice]}, 9, events.append)
    assert record.chunks == [
        TokenChunk(5, "hm ", reasoning=True),
        TokenChunk(9, "so ", reasoning=True),
        TokenChunk(9, "yes"),
    ]
    assert (record.t_first_token_ns, record.t_first_answer_ns, record.t_last_token_ns) == (5, 9, 9)
    assert [(e.text, e.reasoning) for e in events if isinstance(e, TokenChunkArrived)] == [
        ("hm ", True),
        ("so ", True),
        ("yes", False),
    ]
    assert sum(isinstance(e, FirstToken) for e in events) == 1


async def test_completion_endpoint() -> None:
    async with FakeServer(Behaviour(tokens=3)) as server:
        record, _ = await stream_one(server.base_url, settings(endpoint="completion"))
    assert record.ok
    assert record.text == "tok0 tok1 tok2 "
    (sent,) = server.completions
    assert sent.path == "/v1/completions"
    assert sent.body is not None and sent.body["prompt"] == "Say hi."
    assert "messages" not in sent.body


async def test_utf8_split_across_writes_is_reassembled() -> None:
    texts = ("héllo", " wörld", " €uro", " 👍")
    async with FakeServer(Behaviour(tokens=4, texts=texts, split_utf8=True)) as server:
        record, _ = await stream_one(server.base_url)
    assert record.ok
    assert record.text == "héllo wörld €uro 👍"
    assert len(record.chunks) == 4


async def test_the_fake_really_splits_utf8_across_reads() -> None:
    """Guards the test above: without a real split it would prove nothing."""
    behaviour = Behaviour(tokens=1, texts=("€",), split_utf8=True)
    async with (
        FakeServer(behaviour) as server,
        httpx.AsyncClient(base_url=server.base_url) as c,
        c.stream("POST", "/v1/chat/completions", json={}) as response,
    ):
        pieces = [piece async for piece in response.aiter_bytes()]
    assert b"".join(pieces).decode("utf-8").count("€") == 1
    undecodable = 0
    for piece in pieces:
        try:
            piece.decode("utf-8")
        except UnicodeDecodeError:
            undecodable += 1
    assert undecodable >= 2  # the lead byte and its continuation arrived apart


# -- faults ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("chunked", "error"),
    [
        (True, r"^connection broken after 17 token chunks: "),
        (False, r"^stream ended without \[DONE\] after 17 token chunks"),
    ],
    ids=["chunked", "close-delimited"],
)
async def test_disconnect_after_17_tokens_keeps_17_chunks(chunked: bool, error: str) -> None:
    async with FakeServer(Behaviour(tokens=30, disconnect_after=17, chunked=chunked)) as server:
        record, _ = await stream_one(server.base_url)
    assert not record.ok
    assert record.error is not None and re.search(error, record.error), record.error
    assert len(record.chunks) == 17
    assert record.text.endswith("tok16 ")
    assert record.t_done_ns is not None and record.t_done_ns >= record.t_last_token_ns
    assert record.http_status == 200


async def test_malformed_json_fails_with_the_bad_data() -> None:
    async with FakeServer(Behaviour(tokens=6, malformed_after=3)) as server:
        record, _ = await stream_one(server.base_url)
    assert not record.ok
    assert record.error is not None
    assert record.error.startswith("malformed stream: event data is not JSON")
    assert '"oops"' in record.error
    assert len(record.chunks) == 3


async def test_stall_hits_the_request_timeout() -> None:
    async with FakeServer(Behaviour(tokens=6, stall_after=2)) as server:
        started = time.perf_counter()
        record, _ = await stream_one(server.base_url, settings(request_timeout_s=0.2))
        elapsed = time.perf_counter() - started
    assert not record.ok
    assert record.error == "timed out after 0.2 s (2 token chunks received)"
    assert len(record.chunks) == 2
    assert 0.18 <= elapsed < 3.0
    assert record.t_done_ns is not None


async def test_http_503_keeps_the_status_and_body() -> None:
    behaviour = Behaviour(
        status=503, error_body='{"error": {"code": 503, "message": "Loading model"}}'
    )
    async with FakeServer(behaviour) as server:
        record, events = await stream_one(server.base_url)
    assert not record.ok
    assert record.http_status == 503
    assert record.error == 'HTTP 503: {"error": {"code": 503, "message": "Loading model"}}'
    assert record.chunks == [] and record.t_first_token_ns is None
    assert [type(e) for e in events] == [RequestSubmitted]


async def test_http_error_without_body_says_so() -> None:
    async with FakeServer(Behaviour(status=500, error_body="")) as server:
        record, _ = await stream_one(server.base_url)
    assert record.error == "HTTP 500: (no body)"


@pytest.mark.parametrize("style", ["field", "data"])
async def test_error_event_fails_with_the_server_message(style: str) -> None:
    async with FakeServer(Behaviour(tokens=6, error_event_after=2, error_style=style)) as server:
        record, _ = await stream_one(server.base_url)
    assert not record.ok
    assert record.error == "server error in stream: context shift disabled"
    assert len(record.chunks) == 2


async def test_a_prompt_longer_than_the_slot_is_refused_as_not_fitting() -> None:
    """llama-server's answer to a prompt over the slot's context, as the real server sends
    it (measured: -np 4 -c 8192, a 6,031-token prompt)."""
    body = (
        '{"error":{"code":400,"message":"request (6031 tokens) exceeds the available context '
        'size (2048 tokens), try increasing it","type":"exceed_context_size_error",'
        '"n_prompt_tokens":6031,"n_ctx":2048}}'
    )
    async with FakeServer(Behaviour(status=400, error_body=body)) as server:
        record, _ = await stream_one(server.base_url)
    assert not record.ok and record.context_full
    assert record.error == (
        "did not fit the slot's context: request (6031 tokens) exceeds the available context "
        "size (2048 tokens), try increasing it (HTTP 400)"
    )


async def test_another_refusal_is_not_taken_for_a_full_context() -> None:
    body = '{"error":{"code":400,"message":"bad temperature","type":"invalid_request_error"}}'
    async with FakeServer(Behaviour(status=400, error_body=body)) as server:
        record, _ = await stream_one(server.base_url)
    assert not record.ok and not record.context_full
    assert record.error == f"HTTP 400: {body}"


@pytest.mark.parametrize("finish", ["length", "stop"])
async def test_a_response_cut_short_by_the_context_is_not_the_task(finish: str) -> None:
    """A slot whose context fills stops generating with finish_reason "length" short of
    max_tokens (measured: 97 of 200 tokens after a 1,951-token prompt in 2,048), and answers
    200: counted as done, it would flatter every figure. A model's own stop is not that."""
    behaviour = Behaviour(tokens=3, finish_reason=finish, prompt_n=1951)
    async with FakeServer(behaviour) as server:
        record, _ = await stream_one(server.base_url, settings(max_tokens=8))
    if finish == "stop":
        assert record.ok and not record.context_full
        return
    assert not record.ok and record.context_full
    assert record.error == (
        "did not fit the slot's context: the server stopped at 3 of 8 tokens after a prompt "
        "of 1951 tokens (finish_reason length: the context filled up)"
    )


@pytest.mark.parametrize("endpoint", ["chat", "completion"])
async def test_a_whole_answer_is_visible_only_when_it_has_all_come(endpoint: str) -> None:
    """``stream = false``: one JSON body; its text shows at once when the last byte comes,
    so TTFT (the first visible text) is the whole response, and the client sees no token
    times (no TPOT, ITL or decode speed). Waiting is what prefill and decode leave over."""
    behaviour = Behaviour(tokens=6, first_delay_s=0.05, delay_s=0.01, prompt_ms=20.0)
    async with FakeServer(behaviour) as server:
        workload = settings(stream=False, endpoint=endpoint)
        record, events = await stream_one(server.base_url, workload)
        (sent,) = server.received
    assert sent.body["stream"] is False and "stream_options" not in sent.body
    assert record.ok, record.error
    assert not record.streamed and record.text == "".join(f"tok{i} " for i in range(6))
    assert record.t_first_token_ns == record.t_last_token_ns == record.chunks[0].t_ns
    assert [type(e) for e in events] == [RequestSubmitted, FirstToken, TokenChunkArrived]
    metrics = request_metrics(record)
    assert metrics is not None and metrics.ttft_s == metrics.e2e_s >= 0.1
    assert (metrics.tpot_s, metrics.decode_tok_s, metrics.itl_s) == (None, None, [])
    # 20 ms of prefill and 15 ms of decoding by the server's timings: the rest waited.
    assert metrics.queue_wait_s == pytest.approx(metrics.e2e_s - 0.035)
    assert metrics.prefill_s == pytest.approx(0.02)


async def test_a_whole_answer_that_is_not_json_fails_clearly() -> None:
    async with FakeServer(Behaviour(html="<html>proxy error</html>")) as server:
        record, _ = await stream_one(server.base_url, settings(stream=False))
    assert not record.ok
    assert record.error == "malformed response: not JSON: b'<html>proxy error</html>'"


async def test_finish_reason_without_done_is_still_complete() -> None:
    async with FakeServer(Behaviour(tokens=3, send_done=False)) as server:
        record, _ = await stream_one(server.base_url)
    assert record.ok, record.error


async def test_end_without_done_or_finish_reason_fails() -> None:
    async with FakeServer(Behaviour(tokens=3, send_done=False, finish_reason=None)) as server:
        record, _ = await stream_one(server.base_url)
    assert not record.ok
    assert record.error is not None
    assert record.error.startswith("stream ended without [DONE] after 3 token chunks")


async def test_refused_connection_fails_clearly() -> None:
    with socket.socket() as s:  # a port that was free a moment ago, and nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    record, _ = await stream_one(f"http://127.0.0.1:{port}")
    assert not record.ok
    assert record.error is not None and record.error.startswith("cannot connect to the server")
    assert record.http_status is None


async def test_cancellation_is_recorded_and_propagates() -> None:
    two_chunks = asyncio.Event()

    def emit(event: Any) -> None:
        if isinstance(event, TokenChunkArrived) and event.text == "tok1 ":
            two_chunks.set()

    workload = settings()
    record = RequestRecord(0, 0, 0, "Say hi.")
    async with (
        FakeServer(Behaviour(tokens=5, stall_after=2)) as server,
        make_client(server.base_url, workload) as client,
    ):
        task = asyncio.create_task(stream_request(client, record, workload, 1, emit))
        await asyncio.wait_for(two_chunks.wait(), 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert not record.ok
    assert record.error == "cancelled after 2 token chunks"


# -- a whole workload ----------------------------------------------------------------------
def _request_number(body: dict[str, Any]) -> int:
    match = re.match(r"Request (\d+)\.", body["messages"][0]["content"])
    assert match, body
    return int(match.group(1))


async def test_faults_fail_only_their_own_requests() -> None:
    faults = {
        1: Behaviour(tokens=6, disconnect_after=3),
        2: Behaviour(status=503),
        3: Behaviour(tokens=6, malformed_after=1),
    }
    normal = Behaviour(tokens=4, delay_s=0.002)
    workload = settings(requests=5)
    records = plan_records(0, 0, 0, 5, PromptSource())
    events: list[Any] = []
    async with (
        FakeServer(lambda body: faults.get(_request_number(body), normal)) as server,
        make_client(server.base_url, workload) as client,
    ):
        done = await run_requests(client, workload, records, [0.0] * 5, events.append)

    assert done is records
    assert [r.ok for r in records] == [True, False, False, False, True]
    assert records[1].error is not None and records[1].error.startswith("connection broken after 3")
    assert records[2].error is not None and records[2].error.startswith("HTTP 503")
    assert records[3].error is not None and records[3].error.startswith("malformed stream")
    assert [len(r.chunks) for r in records] == [4, 3, 0, 1, 4]
    finished = [e.record.index for e in events if isinstance(e, RequestFinished)]
    assert sorted(finished) == [0, 1, 2, 3, 4]
    seeds = sorted(r.body["seed"] for r in server.completions if r.body)
    assert seeds == [workload.seed + i for i in range(5)]


@pytest.mark.parametrize(("concurrency", "expected"), [(2, 2), (0, 6)])
async def test_concurrency_limit_is_respected(concurrency: int, expected: int) -> None:
    workload = settings(requests=6, concurrency=concurrency)
    records = plan_records(0, 0, 0, 6, PromptSource())
    async with (
        FakeServer(Behaviour(tokens=3, delay_s=0.02)) as server,
        make_client(server.base_url, workload) as client,
    ):
        await run_requests(client, workload, records, [0.0] * 6, lambda e: None)
    assert all(r.ok for r in records), [r.error for r in records]
    assert server.max_in_flight == expected
    waits = sorted((r.t_submit_ns - r.t_scheduled_ns) / NS for r in records)
    if concurrency:
        # t_submit is taken after the client-side wait: the last pair waited two requests.
        assert waits[-1] >= 2 * 0.04 * 0.9
    else:
        assert waits[-1] < 0.03


async def test_fixed_rate_arrivals_follow_the_offsets() -> None:
    workload = settings(requests=4, arrival="fixed", rate=20.0)
    offsets = arrival_offsets(workload, 4, seed=0)
    assert offsets == pytest.approx([0.0, 0.05, 0.10, 0.15])
    records = plan_records(0, 0, 0, 4, PromptSource())
    async with (
        FakeServer(Behaviour(tokens=1)) as server,
        make_client(server.base_url, workload) as client,
    ):
        await run_requests(client, workload, records, offsets, lambda e: None)
    assert all(r.ok for r in records)
    first = records[0].t_scheduled_ns
    actual = [(r.t_scheduled_ns - first) / NS for r in records]
    for got, want in zip(actual, offsets, strict=True):
        assert want - 0.005 <= got <= want + 0.04, actual
    received = sorted(r.t_received for r in server.completions)
    assert received[-1] - received[0] >= 0.15 - 0.005


async def test_burst_arrivals_go_out_together() -> None:
    workload = settings(requests=4)
    offsets = arrival_offsets(workload, 4, seed=0)
    assert offsets == [0.0] * 4
    records = plan_records(0, 0, 0, 4, PromptSource())
    async with (
        FakeServer(Behaviour(tokens=2, delay_s=0.02)) as server,
        make_client(server.base_url, workload) as client,
    ):
        await run_requests(client, workload, records, offsets, lambda e: None)
    assert all(r.ok for r in records)
    submits = [r.t_submit_ns for r in records]
    assert (max(submits) - min(submits)) / NS < 0.02
    assert server.max_in_flight == 4


def test_arrival_offsets() -> None:
    assert arrival_offsets(settings(requests=3), 3, seed=1) == [0.0, 0.0, 0.0]
    assert arrival_offsets(settings(arrival="fixed", rate=4.0), 3, seed=1) == [0.0, 0.25, 0.5]
    assert arrival_offsets(settings(arrival="fixed", rate=4.0), 0, seed=1) == []
    poisson = settings(arrival="poisson", rate=10.0)
    a = arrival_offsets(poisson, 2000, seed=3)
    assert a == arrival_offsets(poisson, 2000, seed=3)  # reproducible
    assert a != arrival_offsets(poisson, 2000, seed=4)
    assert a[0] == 0.0 and a == sorted(a)
    mean_gap = a[-1] / (len(a) - 1)
    assert mean_gap == pytest.approx(0.1, rel=0.1)


async def test_fake_server_health() -> None:
    async with FakeServer() as server, httpx.AsyncClient(base_url=server.base_url) as client:
        response = await client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_an_unforeseen_error_fails_only_that_request(monkeypatch) -> None:
    """A bug or an unforeseen payload must fail one request, never the whole run."""
    from workbench.engine.measure import client

    real = client._apply_payload
    calls = {"n": 0}

    def flaky(record, payload, t_ns, emit):
        calls["n"] += 1
        if calls["n"] == 3:
            raise TypeError("'int' object is not iterable")
        return real(record, payload, t_ns, emit)

    monkeypatch.setattr(client, "_apply_payload", flaky)
    async with FakeServer(Behaviour(tokens=6)) as server:
        record, _ = await stream_one(server.base_url)
        again, _ = await stream_one(server.base_url)
    assert not record.ok
    assert record.error == (
        "unexpected TypeError after 2 token chunks: 'int' object is not iterable"
    )
    assert again.ok


# -- a hostile server: bounded reads ---------------------------------------------------------
async def test_a_huge_error_body_is_read_only_to_its_bound() -> None:
    """A 500 whose body never ends (here 6.4 GB) must cost 2,000 characters, not memory."""
    behaviour = Behaviour(status=500, error_body="E" * 65536, error_body_repeats=100_000)
    async with FakeServer(behaviour) as server:
        started = time.monotonic()
        record, _ = await stream_one(server.base_url)
    assert time.monotonic() - started < 10
    assert not record.ok and record.http_status == 500
    assert record.error is not None and record.error.startswith("HTTP 500: EEEE")
    assert len(record.error) <= len("HTTP 500: ") + 2000


async def test_an_endless_stream_stops_at_its_chunk_bound() -> None:
    # Far past the bound is all a client sees of an endless stream: it must stop at the bound,
    # not read on to the end (100,000 tokens cost the fake 0.5 s of writing before the client
    # read one).
    async with FakeServer(Behaviour(tokens=1_000)) as server:
        record, _ = await stream_one(server.base_url, settings(max_tokens=16))
    assert not record.ok
    assert record.error is not None
    assert record.error.startswith("the server sent more than 128 token chunks for max_tokens")
    assert len(record.chunks) == 129  # what arrived is kept, up to the bound


async def test_a_huge_line_fails_the_request_with_its_reason() -> None:
    async with FakeServer(Behaviour(tokens=2, texts=("ok ", "x" * 2_000_000))) as server:
        record, _ = await stream_one(server.base_url)
    assert not record.ok
    assert record.error == (
        "malformed stream: a line longer than 1048576 characters (after 1 token chunks)"
    )
    assert [c.text for c in record.chunks] == ["ok "]


async def test_odd_values_from_a_server_are_kept_as_text_not_fatal(tmp_path) -> None:
    """A count of 2**70 and a list as finish_reason once killed the session writer and lost
    the batch: now they are stored as text and the run completes."""
    from workbench.engine.config.experiment import parse_experiment
    from workbench.engine.run.lifecycle import run_experiment
    from workbench.engine.run.runner import RunOptions
    from workbench.engine.store import open_session

    behaviour = Behaviour(tokens=4, completion_tokens=2**70, finish_reason=["stop", 1])
    experiment = parse_experiment(
        'name = "odd"\n[workload]\nrequests = 3\nmax_tokens = 4\nwarmup = 0\n'
    )
    async with FakeServer(behaviour) as server:
        options = RunOptions(tmp_path, base_url=server.base_url)
        result = await asyncio.to_thread(run_experiment, experiment, options)
    assert result.status == "complete", result.error
    with open_session(result.session_path) as session:
        records = session.records(0)
    assert [r.ok for r in records] == [True] * 3
    assert {r.finish_reason for r in records} == {'["stop", 1]'}
    assert {r.usage["completion_tokens"] for r in records} == {str(2**70)}
    # The analysis passes over the text and counts the server's other figure.
    assert {r.output_tokens for r in records} == {(4, "timings")}


async def test_endless_probe_answers_end_at_their_deadline() -> None:
    """An endless /health once hung --base-url runs for ever; an endless /metrics grew the
    sampler's memory and ended in a traceback. Each probe now has a deadline and a byte cap."""
    from workbench.engine.base.errors import ExternalServerError
    from workbench.engine.measure.sampler import ServerSampler, fetch_counters
    from workbench.engine.server.external import probe_external

    async with FakeServer(endless_paths=("/health", "/metrics", "/slots")) as server:
        started = time.monotonic()
        with pytest.raises(ExternalServerError, match="no whole answer in 5 s"):
            await asyncio.to_thread(probe_external, server.base_url)
        assert time.monotonic() - started < 20

        started = time.monotonic()
        assert await asyncio.to_thread(fetch_counters, server.base_url) is None
        assert time.monotonic() - started < 5

        samples: list[Any] = []
        sampler = ServerSampler(samples.append, 0, server.base_url, None)
        asked_before = len(server.received)
        sampler.start()
        # It has given up on one endless answer (/metrics) and is inside the next (/slots).
        deadline = time.monotonic() + 10
        while {"/metrics", "/slots"} - {r.path for r in server.received[asked_before:]}:
            assert time.monotonic() < deadline, "the sampler never asked for /metrics, /slots"
            await asyncio.sleep(0.01)
        started = time.monotonic()
        await asyncio.to_thread(sampler.stop)
        assert time.monotonic() - started < 3
    assert samples == []  # nothing half-read was taken for a sample


async def test_escape_sequences_from_a_server_never_reach_a_terminal() -> None:
    """An error body that sets the window title and clears the screen is stored as text."""
    body = "\x1b]0;pwned\x07\x1b[2Jgone \x9b31m"
    async with FakeServer(Behaviour(status=500, error_body=body)) as server:
        record, _ = await stream_one(server.base_url)
    assert record.error == "HTTP 500: \ufffd]0;pwned\ufffd\ufffd[2Jgone \ufffd31m"
    async with FakeServer(Behaviour(tokens=2, finish_reason="stop\x1b[2J")) as server:
        record, _ = await stream_one(server.base_url)
    assert record.finish_reason == "stop\ufffd[2J"


# -- framing and scheduling details ------------------------------------------------------------
async def test_chunk_framing_in_reads_of_its_own_is_not_the_end() -> None:
    """A read holding only a chunk's CRLF or size line once ended the stream early, and a
    stream that had seen finish_reason was then taken for complete without its usage."""
    async with FakeServer(Behaviour(tokens=4, split_framing=True)) as server:
        record, _ = await stream_one(server.base_url)
    assert record.ok, record.error
    assert record.output_tokens == (4, "usage") and record.timings is not None


async def test_a_base_url_path_prefix_is_kept_for_the_streams() -> None:
    async with FakeServer(Behaviour(tokens=3), prefix="/gw") as server:
        record, _ = await stream_one(server.base_url + "/gw")
    assert record.ok, record.error
    assert [r.path for r in server.completions] == ["/gw/v1/chat/completions"]


async def test_an_interim_100_continue_is_skipped() -> None:
    async with FakeServer(Behaviour(tokens=3, interim=True)) as server:
        record, _ = await stream_one(server.base_url)
    assert record.ok and record.http_status == 200


def test_a_chunk_size_must_be_plain_hex() -> None:
    from workbench.engine.net.http_stream import HttpStreamError, _ChunkedDecoder

    for size in (b"-1", b"+5", b"0x10", b"1_0"):
        with pytest.raises(HttpStreamError, match="chunk size"):
            _ChunkedDecoder().feed(size + b"\r\nabc\r\n")
    assert _ChunkedDecoder().feed(b"3;ext=1\r\nabc\r\n") == b"abc"


async def test_the_concurrency_gate_serves_waiters_first() -> None:
    from workbench.engine.measure.workload import ReleaseGate

    gate = ReleaseGate(1, t0_ns=0)
    assert await gate.acquire() == 0
    waiter = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)  # it waits
    gate.release()
    newcomer = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0)
    assert waiter.done() and not newcomer.done()  # the place went to the one that waited
    gate.release()
    await asyncio.wait_for(newcomer, 1)


async def test_requests_cancelled_before_they_start_are_still_recorded() -> None:
    events: list[Any] = []
    workload = settings(requests=3)
    records = plan_records(0, 0, 0, 3, PromptSource())
    async with (
        FakeServer(Behaviour(tokens=3)) as server,
        make_client(server.base_url, workload) as client,
    ):
        task = asyncio.create_task(
            run_requests(client, workload, records, [0.0] * 3, events.append)
        )
        await asyncio.sleep(0)  # started, still opening the first wave's connections
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finished = [e.record for e in events if isinstance(e, RequestFinished)]
    assert sorted(r.index for r in finished) == [0, 1, 2]
    assert all(r.error == "cancelled before it was sent" for r in finished)


async def test_a_probe_answer_dripped_byte_by_byte_ends_at_its_total_deadline() -> None:
    """httpx bounds each read, not the answer: a head sent one byte at a time (each within
    the read timeout) kept a probe reading for hours. The deadline now covers it all."""
    from workbench.engine.net.bounded_http import bounded_get

    handlers: list[asyncio.Task[None]] = []

    async def drip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        handlers.append(task)
        try:
            for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"x" * 1000:  # bounded
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.02)
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()

    server = await asyncio.start_server(drip, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        started = time.monotonic()
        answer = await asyncio.to_thread(bounded_get, url, "/metrics", None, 4096, 0.1)
        assert answer is None
        assert time.monotonic() - started < 3
    finally:
        server.close()
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)
        await server.wait_closed()
