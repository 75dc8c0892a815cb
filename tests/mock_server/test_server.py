"""The mock's /metrics names come from the catalogue, its streams end as each server kind's
do, and a bad flag is refused in one line."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys

import pytest

from workbench.engine.base.server_kinds import KINDS, LLAMACPP, parse_metrics
from workbench.engine.net.http_stream import _ChunkedDecoder
from workbench.engine.net.sse import SSEParser
from workbench.mock_server import EXPOSITIONS, MockServer, Timing
from workbench.mock_server.metrics_page import Counters
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


async def _post(server: MockServer, path: str, body: dict) -> tuple[bytes, list[dict]]:
    """One request on its own connection: the response head and the JSON of each event."""
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    data = json.dumps(body).encode()
    writer.write(f"POST {path} HTTP/1.1\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
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
