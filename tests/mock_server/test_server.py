"""The mock's /metrics names come from the catalogue, its streams end as each server kind's
do, with ``queue`` a request beyond the slots waits for one (and without it streams at
once), and a bad flag is refused in one line."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

from workbench.engine.base.server_kinds import (
    KINDS,
    LLAMACPP,
    parse_histograms,
    parse_metrics,
    total,
)
from workbench.engine.net.http_stream import _ChunkedDecoder
from workbench.engine.net.sse import SSEParser
from workbench.mock_server import EXPOSITIONS, MockServer, Timing
from workbench.mock_server import server as mock_server
from workbench.mock_server.metrics_page import BUCKETS, Counters
from workbench.mock_server.process import ROOT


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.key)
def test_the_page_writes_the_catalogues_names_and_no_other(kind) -> None:
    renamed = dataclasses.replace(
        kind,
        running=("x:running", *kind.running),
        prompt_tokens=("x:prompt_total", *kind.prompt_tokens),
    )
    exposition = dataclasses.replace(EXPOSITIONS[kind.key], kind=renamed)
    names = {
        key.partition("{")[0]
        for key in parse_metrics(exposition.page(Counters(prompt_tokens=5), 100))
    }
    assert {"x:running", "x:prompt_total"} <= names  # the current name: the catalogue's first
    assert names <= renamed.names
    assert names.isdisjoint(kind.running + kind.prompt_tokens)


async def _send(
    server: MockServer, path: str, body: dict
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """One request sent on its own connection, its answer not read yet."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    data = json.dumps(body).encode()
    writer.write(f"POST {path} HTTP/1.1\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    return reader, writer


async def _post(server: MockServer, path: str, body: dict) -> tuple[bytes, list[dict]]:
    """One request on its own connection: the response head and the JSON of each event."""
    reader, writer = await _send(server, path, body)
    raw = await reader.read()  # --close: the mock closes once the stream has ended
    writer.close()
    await writer.wait_closed()
    head, _, rest = raw.partition(b"\r\n\r\n")
    decoder = _ChunkedDecoder()
    events = SSEParser().feed(decoder.feed(rest))
    assert decoder.done and events[-1].data == "[DONE]"
    return head, [json.loads(e.data) for e in events[:-1]]


@pytest.mark.parametrize("key", sorted(EXPOSITIONS))
async def test_a_stream_ends_as_its_kinds_streams_end(key) -> None:
    timing = Timing(ttft_ms=0, itl_ms=0, tokens=5, tokens_per_chunk=2, keep_alive=False)
    server = MockServer(timing, key)
    await server.start()
    try:
        messages = [{"role": "user", "content": "x" * 40}]
        head, events = await _post(
            server, "/v1/chat/completions", {"messages": messages, "max_tokens": 3}
        )
        _, whole = await _post(server, "/v1/completions", {"prompt": "abcdefgh"})
    finally:
        await server.close()
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Connection: close" in head
    texts = [e["choices"][0]["delta"].get("content") for e in events]
    assert texts == ["t0 t1 ", "t2 ", None]  # max_tokens 3, two tokens a chunk
    final = events[-1]
    assert final["choices"][0]["finish_reason"] == "length"
    assert final["usage"] == {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    assert ("timings" in final) == (EXPOSITIONS[key].kind is LLAMACPP)
    assert [e["choices"][0]["text"] for e in whole] == ["t0 t1 ", "t2 t3 ", "t4 ", ""]
    assert whole[-1]["choices"][0]["finish_reason"] == "stop"  # fewer than asked: its own stop
    assert [len(s.sent_ns) for s in server.log] == [2, 3]
    assert server.counters.finished == {"length": 1, "stop": 1}
    assert (server.counters.processing, server.counters.held_tokens) == (0, 0)


async def test_llama_servers_counters_count_a_task_whole_when_it_ends() -> None:
    """As llama-server's (measured in tests/engine/watch/test_unseen_real.py): the answer,
    and the seconds the prompt and the answer took, once the task has ended; no cache."""
    timing = Timing(ttft_ms=30, itl_ms=10, tokens=5, tokens_per_chunk=1, keep_alive=False)
    server = MockServer(timing, LLAMACPP.key)
    await server.start()
    try:
        _, events = await _post(server, "/v1/completions", {"prompt": "abcdefgh", "max_tokens": 5})
        page = parse_metrics(server.exposition.page(server.counters, 100))
    finally:
        await server.close()
    timings = events[-1]["timings"]
    counted = {name: page[names[0]] for name, names in (
        ("prompt", LLAMACPP.prompt_tokens), ("cached", LLAMACPP.cached_tokens),
        ("output", LLAMACPP.output_tokens), ("prompt_s", LLAMACPP.prompt_seconds),
        ("output_s", LLAMACPP.output_seconds))}  # fmt: skip
    assert (counted["prompt"], counted["cached"], counted["output"]) == (timings["prompt_n"], 0, 5)
    # the page writes 6 significant digits, as llama.cpp's does
    assert counted["prompt_s"] == pytest.approx(timings["prompt_ms"] / 1000, rel=1e-5)
    assert counted["output_s"] == pytest.approx(timings["predicted_ms"] / 1000, rel=1e-5)
    assert counted["prompt_s"] >= 0.03 and counted["output_s"] > 0


@pytest.mark.parametrize(
    ("key", "field", "counted"),
    [
        ("llamacpp", "reasoning_content", None),
        ("vllm", "reasoning", 3),
        ("sglang", "reasoning_content", None),
    ],
)
async def test_a_chat_answer_reasons_first_in_its_kinds_field(key, field, counted) -> None:
    """The first ``reasoning_tokens`` of a chat answer come as reasoning, in chunks of their
    own, then the answer; only vLLM's usage counts them. A completion has no reasoning."""
    timing = Timing(0, 0, 6, 2, keep_alive=False, reasoning_tokens=3)
    server = MockServer(timing, key)
    await server.start()
    try:
        _, events = await _post(server, "/v1/chat/completions", {"messages": [], "max_tokens": 6})
        _, whole = await _post(server, "/v1/completions", {"prompt": "abcdefgh"})
    finally:
        await server.close()
    deltas = [e["choices"][0]["delta"] for e in events]
    assert deltas == [
        {field: "t0 t1 "},
        {field: "t2 "},  # the last reasoning token: no answer in its chunk
        {"content": "t3 t4 "},
        {"content": "t5 "},
        {},
    ]
    usage = events[-1]["usage"]
    assert usage.get("completion_tokens_details") == (
        None if counted is None else {"reasoning_tokens": counted}
    )
    assert usage["completion_tokens"] == 6  # reasoning is output too
    assert [e["choices"][0]["text"] for e in whole] == ["t0 t1 ", "t2 t3 ", "t4 t5 ", ""]
    assert "completion_tokens_details" not in whole[-1]["usage"]


QUEUED = Timing(ttft_ms=100, itl_ms=20, tokens=5, slots=2, keep_alive=False, queue=True)
REQUEST_S = (100 + 4 * 20) / 1000  # a whole request: its first token, then 4 more


async def _until(condition: Callable[[], bool]) -> None:
    """Waits (5 s at most) until ``condition`` holds: the mock's state, in this loop."""
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "the mock never got there"
        await asyncio.sleep(0.002)


async def _six_at_once(timing: Timing, key: str) -> tuple[MockServer, list[list[dict]], list]:
    """Six requests at once on 2 slots: the mock after them, each answer's events, and its
    requests running and waiting on /metrics every 5 ms until all were answered."""
    server = MockServer(timing, key)
    await server.start()
    kind, seen = server.exposition.kind, []
    try:
        posting = [
            asyncio.create_task(_post(server, "/v1/completions", {"prompt": f"{n}" * 8}))
            for n in range(6)
        ]
        while not all(p.done() for p in posting):
            page = parse_metrics(server.metrics_text())
            seen.append((total(page, kind.running), total(page, kind.waiting)))
            await asyncio.sleep(0.005)
        return server, [(await p)[1] for p in posting], seen
    finally:
        await server.close()


@pytest.mark.parametrize("key", sorted(EXPOSITIONS))
async def test_with_a_queue_requests_beyond_the_slots_wait_for_one(key) -> None:
    """Six requests at once on 2 slots: two stream, four wait (``/metrics``: 4 waiting, then
    fewer, 2 running while any waits), and each that waited takes the slot an earlier
    stream leaves at its end, its schedule from there: its first chunk a whole request or
    two later. vLLM's and SGLang's queue histogram holds the waits, their TTFT counts from
    the arrival; llama.cpp's ``prompt_ms`` is from the slot's start, the wait left out."""
    server, answers, seen = await _six_at_once(QUEUED, key)
    assert (2, 4) in seen and all(running == 2 for running, waiting in seen if waiting)
    after = [waiting for _, waiting in seen[seen.index((2, 4)) :]]
    assert after == sorted(after, reverse=True) and 2 in after and after[-1] == 0
    counters = server.counters
    assert (counters.processing, counters.waiting, counters.held_tokens) == (0, 0, 0)
    log = sorted(server.log, key=lambda s: s.t_slot_ns)
    waits = [(s.t_slot_ns - s.t_received_ns) / 1e9 for s in log]
    spread = (max(s.t_received_ns for s in log) - min(s.t_received_ns for s in log)) / 1e9
    assert waits[:2] == [0, 0]
    for k, served in enumerate(log[2:]):
        rounds = 1 + k // 2  # whole requests ahead of it on its slot
        ended = [s.sent_ns[-1] for s in log if s.sent_ns[-1] <= served.t_slot_ns]
        assert ended and served.t_slot_ns - max(ended) < 50e6  # as an earlier stream ended
        assert waits[2 + k] >= rounds * REQUEST_S - spread
        assert served.sent_ns[0] - served.t_slot_ns >= QUEUED.ttft_ms * 1e6
    kind = server.exposition.kind
    if kind is LLAMACPP:
        by_prompt = {s.prompt: s for s in log}
        for n, events in enumerate(answers):
            served = by_prompt[f"{n}" * 8]
            prompt_ms = events[-1]["timings"]["prompt_ms"]
            assert prompt_ms == pytest.approx((served.sent_ns[0] - served.t_slot_ns) / 1e6)
    else:
        names = dict(kind.latencies)
        found = parse_histograms(server.metrics_text())
        ttfts = [(s.sent_ns[0] - s.t_received_ns) / 1e9 for s in log]
        for fact, observed in (("queue", waits), ("ttft", ttfts)):
            buckets = found[names[fact][0]]
            assert buckets == {le: sum(o <= le for o in observed) for le in (*BUCKETS, math.inf)}


async def test_without_a_queue_every_request_streams_at_once() -> None:
    """The same six on 2 slots without ``queue``: none waits, six run at once."""
    timing = dataclasses.replace(QUEUED, queue=False)
    server, _, seen = await _six_at_once(timing, LLAMACPP.key)
    assert (6, 0) in seen and all(waiting == 0 for _, waiting in seen)
    assert all(s.t_slot_ns == s.t_received_ns for s in server.log)
    assert max(s.sent_ns[0] - s.t_received_ns for s in server.log) < REQUEST_S * 1e9


async def test_a_client_that_goes_away_while_it_waits_leaves_the_queue() -> None:
    """One slot: A streams; B, C and D wait in turn; B closes its connection: it leaves the
    queue at once (its place is not kept), and as A ends C takes the slot, then D."""
    timing = Timing(ttft_ms=400, itl_ms=10, tokens=2, slots=1, keep_alive=False, queue=True)
    server = MockServer(timing, LLAMACPP.key)
    await server.start()
    counters = server.counters
    try:
        a = asyncio.create_task(_post(server, "/v1/completions", {"prompt": "aaaa"}))
        await _until(lambda: counters.processing == 1)
        _, b = await _send(server, "/v1/completions", {"prompt": "bbbb"})
        await _until(lambda: counters.waiting == 1)
        c = asyncio.create_task(_post(server, "/v1/completions", {"prompt": "cccc"}))
        await _until(lambda: counters.waiting == 2)
        b.close()
        await b.wait_closed()
        await _until(lambda: counters.waiting == 1)
        assert not a.done()  # B left before any slot was free
        d = asyncio.create_task(_post(server, "/v1/completions", {"prompt": "dddd"}))
        await _until(lambda: counters.waiting == 2)
        await asyncio.gather(a, c, d)
    finally:
        await server.close()
    served = {s.prompt: s for s in server.log}
    assert served["bbbb"].t_slot_ns is None and served["bbbb"].sent_ns == []
    assert served["aaaa"].sent_ns[-1] <= served["cccc"].t_slot_ns
    assert served["cccc"].sent_ns[-1] <= served["dddd"].t_slot_ns
    assert (counters.processing, counters.waiting, counters.held_tokens) == (0, 0, 0)


async def test_a_full_queue_answers_503(monkeypatch) -> None:
    """At its bound the queue takes no more: the next request is refused at once, as an
    overloaded server refuses, and is never served."""
    monkeypatch.setattr(mock_server, "MAX_WAITING", 1)
    server = MockServer(dataclasses.replace(QUEUED, slots=1), LLAMACPP.key)
    await server.start()
    try:
        a = asyncio.create_task(_post(server, "/v1/completions", {"prompt": "aaaa"}))
        await _until(lambda: server.counters.processing == 1)
        b = asyncio.create_task(_post(server, "/v1/completions", {"prompt": "bbbb"}))
        await _until(lambda: server.counters.waiting == 1)
        reader, writer = await _send(server, "/v1/completions", {"prompt": "cccc"})
        refused = await reader.read()
        writer.close()
        await writer.wait_closed()
        assert not a.done()
        await asyncio.gather(a, b)
    finally:
        await server.close()
    assert refused.startswith(b"HTTP/1.1 503 ") and b"the queue is full" in refused
    assert [s.t_slot_ns is None for s in server.log] == [False, False, True]


def test_a_bad_flag_is_refused_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "workbench.mock_server", "--tokens", "0"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith("error: tokens, tokens_per_chunk and slots must be >= 1")
    )


def test_the_mock_raises_its_open_files_limit_to_hold_a_thousand_streams() -> None:
    """Under the usual soft limit of 1,024 (here 256), 1,024 streams and a listener do not
    fit: the mock raises its own where the hard limit allows."""
    import resource

    import psutil

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 4096:
        pytest.skip(f"the hard open-files limit is {hard}")
    process = subprocess.Popen(
        [sys.executable, "-m", "workbench.mock_server", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)),
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("listening on ")
        assert psutil.Process(process.pid).rlimit(psutil.RLIMIT_NOFILE)[0] >= 4096
    finally:
        process.terminate()
        process.wait(10)
        process.stdout.close()  # type: ignore[union-attr]
