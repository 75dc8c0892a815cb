"""What cannot be watched is one line: nothing at the address, neither /slots nor an LLM
server's /metrics; a llama-server is watched by both, vLLM by its metrics alone; a server
that stops answering mid-watch is counted, not ended on."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import http.server
import math
import re
import socket
import statistics
import threading

import httpx
import pytest

from workbench.engine.base.server_kinds import LLAMACPP, SGLANG, VLLM
from workbench.engine.watch.server_latencies import bucket_percentile, difference
from workbench.engine.watch.server_process import server_probe
from workbench.engine.watch.summary import summarize, window_latencies
from workbench.engine.watch.watcher import Endpoints, Load, Watched, WatchError, watch
from workbench.mock_server import MockServer, Timing


def test_nothing_at_the_address_is_one_line():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(WatchError, match=re.escape(f"nothing answers at {url}")):
        asyncio.run(watch(url, 0.05, 0.2))


def test_a_llama_server_is_watched_by_both_and_vllm_by_its_metrics():
    async def watched(kind):
        server = MockServer(Timing(0, 0, 4, 1), kind)
        await server.start()
        try:
            return await watch(server.base_url, 0.05, 0.3)
        finally:
            await server.close()

    llama = asyncio.run(watched(LLAMACPP.key))
    assert llama.slots_on and llama.kind is LLAMACPP
    # the process listening is this Python, no llama-server: its memory is not the server's
    assert llama.memory_max_bytes is None
    assert re.fullmatch(
        r".* \(pid \d+\) listens on \d+, not a llama-server: no memory", llama.memory_note
    )
    assert llama.polls >= 3 and llama.unanswered == 0 and llama.tasks.tasks == []
    assert llama.queue == {0: llama.polls} and llama.first and llama.first.waiting == 0
    vllm = asyncio.run(watched(VLLM.key))
    assert not vllm.slots_on and vllm.kind is VLLM and sum(vllm.queue.values()) == vllm.polls
    assert sum(vllm.kv_use.values()) == vllm.polls and llama.kv_use == {}  # b11434 has none


def test_an_address_of_neither_endpoint_is_refused_in_one_line(tmp_path):
    """A web server that is no LLM server: 404 for both."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as web:
        threading.Thread(target=web.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{web.server_address[1]}"
        try:
            with pytest.raises(WatchError) as refused:
                asyncio.run(watch(url, 0.05, 0.3))
        finally:
            web.shutdown()
    assert str(refused.value) == (
        f"{url} gives neither llama-server's /slots nor an LLM server's /metrics (/slots "
        "404, /metrics 404): start llama-server with --slots or --metrics, or point at the "
        "server itself"
    )


def test_a_server_that_stops_answering_mid_watch_is_counted_down():
    """The server closed once two polls were answered: the watch goes on, counting each
    poll it leaves unanswered, until it is stopped."""

    async def watched():
        server = MockServer(Timing(0, 0, 4, 1), LLAMACPP.key)
        await server.start()
        stop, seen, closing = asyncio.Event(), [], []

        def on_poll(t_s, slots, load):
            watched = seen[0]
            if watched.polls >= 2 and not closing:
                closing.append(asyncio.ensure_future(server.close()))
            if watched.unanswered >= 3:
                stop.set()

        try:
            return await watch(
                server.base_url, 0.02, 30, stop=stop, on_poll=on_poll, on_start=seen.append
            )
        finally:
            await server.close()

    result = asyncio.run(watched())
    assert result.polls >= 2 and result.unanswered >= 3 and result.seconds < 30


def test_a_server_restarted_mid_watch_is_a_gap_and_its_task_ended_when_it_went_down():
    """A task on its prompt when the server goes down; the server back on the same port:
    one gap, from the first poll left unanswered to the first answered, the task ended at
    the gap's start, and the watch goes on (the restarted server's slots read as new)."""

    async def watched():
        timing = Timing(ttft_ms=5000, itl_ms=10, tokens=4, slots=2)
        server = MockServer(timing, LLAMACPP.key)
        await server.start()
        port, stop = server.port, asyncio.Event()
        watching = asyncio.create_task(watch(server.base_url, 0.02, None, stop=stop))
        async with httpx.AsyncClient(base_url=server.base_url) as client:
            body = {"prompt": "x" * 400, "max_tokens": 4, "stream": True}
            sending = asyncio.create_task(client.post("/v1/completions", json=body))
            await asyncio.sleep(0.3)
            await server.close()
            with contextlib.suppress(httpx.HTTPError):
                await sending
        await asyncio.sleep(0.3)
        again = MockServer(timing, LLAMACPP.key)
        await again.start(port=port)
        try:
            await asyncio.sleep(0.3)
            stop.set()
            return await watching
        finally:
            await again.close()

    result = asyncio.run(watched())
    assert result.gaps_count == 1 and len(result.gaps) == 1
    gap = result.gaps[0]
    assert gap.up_s is not None and 0.2 < gap.up_s - gap.down_s < 0.6
    assert result.down_s == pytest.approx(gap.up_s - gap.down_s)
    assert result.down_since is None and result.unanswered >= 3
    [task] = result.tasks.tasks
    assert task.gone_s == gap.down_s and task.decoding_s is None
    assert summarize(result).down_s == result.down_s


def test_the_mock_answers_slots_as_llama_server_does_and_a_watch_sees_its_tasks():
    """Three requests on the mock's two slots (the third streams without one: without
    ``queue`` the mock does not queue): each slot is seen on its prompt, then decoding, then
    idle with its prompt and answer less one, as the real server's are."""

    async def watched():
        server = MockServer(Timing(ttft_ms=150, itl_ms=10, tokens=20, slots=2), LLAMACPP.key)
        await server.start()
        stop = asyncio.Event()
        try:
            watching = asyncio.create_task(watch(server.base_url, 0.02, None, stop=stop))
            await asyncio.sleep(0.05)
            async with httpx.AsyncClient(base_url=server.base_url) as client:
                body = {"prompt": "x" * 400, "max_tokens": 20, "stream": True}
                await asyncio.gather(*(client.post("/v1/completions", json=body) for _ in range(3)))
            await asyncio.sleep(0.1)
            stop.set()
            return await watching
        finally:
            await server.close()

    result = asyncio.run(watched())
    tasks = result.tasks.tasks
    assert result.tasks.ended == 2 and [t.slot for t in tasks] == [0, 1]
    for task in tasks:
        assert task.prompt_tokens == 100 and task.decoded == 20 and task.decoded_all
        assert task.decoding_s is not None and task.decoding_s - task.seen_s >= 0.1
    assert len({t.task for t in tasks}) == 2


def test_behind_a_proxy_the_servers_own_endpoints_are_watched(tmp_path):
    """The address answers neither (a proxy in front); ``Endpoints`` names the server's."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))

    async def watched(proxy: str):
        server = MockServer(Timing(0, 0, 4, 1), LLAMACPP.key)
        await server.start()
        try:
            asked = Endpoints.of(proxy, None, server.base_url + "/metrics?x=1")
            assert asked.metrics == (server.base_url, "/metrics?x=1")
            assert asked.slots == (proxy, "/slots")
            own = Endpoints.of(proxy, server.base_url + "/slots", server.base_url + "/metrics")
            assert own.describe(proxy) == (
                f"slots from {server.base_url}/slots; metrics from {server.base_url}/metrics"
            )
            return await watch(proxy, 0.05, 0.2, endpoints=own)
        finally:
            await server.close()

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as web:
        threading.Thread(target=web.serve_forever, daemon=True).start()
        try:
            result = asyncio.run(watched(f"http://127.0.0.1:{web.server_address[1]}"))
        finally:
            web.shutdown()
    assert result.slots_on and result.kind is LLAMACPP and result.unanswered == 0


def test_a_server_on_another_machine_has_no_memory_watched():
    probe, note = server_probe("http://192.0.2.7:8080")
    assert probe is None and note == "the server is on another machine: its memory is not watched"


@pytest.mark.parametrize("kind", [VLLM, SGLANG])
def test_a_servers_own_latency_histograms_are_read_over_the_watch(kind):
    """Four requests on the mock in vLLM's or SGLang's names (TTFT 150 ms, a token each
    10 ms): the histograms' difference between the watch's first poll and its last, as
    percentiles within their buckets."""

    async def watched():
        server = MockServer(Timing(ttft_ms=150, itl_ms=10, tokens=20), kind.key)
        await server.start()
        stop = asyncio.Event()
        try:
            async with httpx.AsyncClient(base_url=server.base_url) as client:
                body = {"prompt": "x" * 40, "max_tokens": 20, "stream": True}
                await client.post("/v1/completions", json=body)  # before: not counted
                watching = asyncio.create_task(watch(server.base_url, 0.02, None, stop=stop))
                await asyncio.sleep(0.05)
                await asyncio.gather(*(client.post("/v1/completions", json=body) for _ in range(4)))
            await asyncio.sleep(0.1)
            stop.set()
            return await watching
        finally:
            await server.close()

    found = {f.fact: f for f in summarize(asyncio.run(watched())).server_latencies}
    assert set(found) == {"queue", "ttft", "itl", "e2e"}
    assert found["ttft"].observed == 4 and found["itl"].observed == 4 * 19
    assert found["queue"].p99 <= 0.001  # none queued: all in the first bucket
    assert 0.1 < found["ttft"].p50 <= 0.25 and 0.005 < found["itl"].p50 <= 0.02
    assert 0.25 < found["e2e"].p90 <= 0.5


def test_a_percentile_within_a_bucket_is_interpolated_and_one_beyond_the_last_is_its_floor():
    buckets = {0.1: 2.0, 0.2: 6.0, math.inf: 8.0}
    assert bucket_percentile(buckets, 50) == pytest.approx(0.15)  # rank 4: half way in (0.1, 0.2]
    assert bucket_percentile(buckets, 25) == pytest.approx(0.1)
    assert bucket_percentile(buckets, 99) == 0.2  # in +Inf: the last bound, a floor
    assert bucket_percentile({0.1: 0.0, math.inf: 0.0}, 50) is None
    # a restarted server's counts start again: the last snapshot alone
    assert difference({0.1: 1.0, math.inf: 1.0}, {0.1: 5.0, math.inf: 9.0}) == {
        0.1: 1.0,
        math.inf: 1.0,
    }


def test_only_the_kinds_latency_histograms_are_kept():
    """A page's other histograms (a hostile one's thousands) are not kept nor saved."""
    watched = Watched(kind=VLLM)
    ttft = {0.1: 1.0, math.inf: 2.0}
    watched.histograms({"vllm:time_to_first_token_seconds": ttft, "made:up_seconds": ttft})
    assert watched.histograms_first == {"vllm:time_to_first_token_seconds": ttft}
    watched.histograms({"made:up_seconds": ttft})  # nothing of its own: the last stays
    assert watched.histograms_last == {"vllm:time_to_first_token_seconds": ttft}


def test_live_the_servers_histograms_are_read_over_the_last_minute():
    """Two minutes of polls: fast first tokens in the first, slow ones in the second. Over
    the whole watch the median is between; over the live window, the last minute's."""
    name = "vllm:time_to_first_token_seconds"
    watched = Watched(kind=VLLM)
    for t in range(0, 240):  # a poll each half second
        fast, slow = min(t, 120), max(0, t - 120)
        watched.histograms({name: {0.1: fast, 0.5: fast + slow, math.inf: fast + slow}}, t / 2)
    span_s, live = window_latencies(watched)
    assert span_s == pytest.approx(60.5) and len(watched.window) == 61  # a snapshot a second
    [ttft] = live
    assert ttft.observed == 121 and 0.1 < ttft.p50 <= 0.5  # 2 fast ones, the rest slow
    [whole] = summarize(watched).server_latencies
    assert whole.observed == 239 and whole.p50 <= 0.1 + 0.01


def test_the_servers_finished_requests_are_counted_across_a_restart():
    """vLLM's and SGLang's own count: its counter's rises, and after a restart (the counter
    fell) what it counted since."""
    watched = Watched(0, kind=VLLM, slots_on=False)
    for t_s, finished in ((0.0, 100.0), (1.0, 130.0), (2.0, 5.0), (3.0, 12.0)):
        watched.count_load(Load(t_s, 1.0, 0.0, None, None, requests=finished))
    assert summarize(watched).requests_finished == 30 + 5 + 7


@pytest.mark.parametrize("back_up", [True, False])
def test_the_wait_in_the_queue_is_littles_law_over_the_time_the_server_answered(back_up):
    """A vLLM watch of 14 s: down from 6 s to 10 s with 14 finished in the 10 s it
    answered, or down from 8 s to the end with 8 finished in 8 s. The time it was down
    holds no depth and ends no request: it must not thin the rate. Through the queue went
    those finished, less the 3 it was serving at the first poll (they had left the queue),
    plus the 1 it served and the 5 still waiting at the last answered poll."""
    watched = Watched(0, kind=VLLM, slots_on=False)
    answered = [0.0, 1.0, 2.0, 3.0, 4.0, *((10.0, 11.0, 12.0, 13.0) if back_up else ())]
    finished = [0.0, 2.0, 4.0, 6.0, 8.0, 0.0, 2.0, 4.0, 6.0]  # from 0 again once restarted
    for t_s, requests in zip(answered, finished, strict=False):
        watched.answered(t_s, True)
        running, waiting = (3.0 if t_s == 0 else 1.0), (5.0 if t_s == answered[-1] else 2.0)
        watched.count_load(Load(t_s, running, waiting, None, None, requests=requests))
        if t_s == 4.0:
            watched.answered(6.0 if back_up else 8.0, False)
    watched.seconds = 14.0
    summary = summarize(watched)
    done, answered_s = (14.0, 10.0) if back_up else (8.0, 8.0)
    depth = (2.0 * (len(answered) - 1) + 5.0) / len(answered)
    assert summary.down_s == 14.0 - answered_s
    assert summary.wait_estimate_s == pytest.approx(depth / ((done - 3 + 1 + 5) / answered_s))


def test_a_llama_servers_queue_lets_through_the_tasks_that_took_a_slot_and_those_left():
    """One slot: task 10 found running (it left the queue before the watch), 13, 16 and 19
    took the slot in it, and 2 still waited at the last poll: 5 through the queue in 4 s,
    2 waiting at each poll, so 2 / (5 / 4) s a request."""
    watched = Watched(0, kind=LLAMACPP, seconds=4.0)
    for t_s, task in ((0.0, 10), (1.0, 13), (2.0, 16), (3.0, 19)):
        busy = [{"id": 0, "id_task": task, "is_processing": True, "n_decoded": 1}]
        watched.count(
            t_s, busy, {"llamacpp:requests_processing": 1.0, "llamacpp:requests_deferred": 2.0}
        )
        watched.tasks.observe(t_s, busy)
    assert (watched.tasks.ended, watched.tasks.running, watched.tasks.began) == (3, 1, 3)
    assert summarize(watched).wait_estimate_s == pytest.approx(2.0 / (5 / 4.0))


def test_the_wait_in_the_queue_of_a_queueing_mock_is_close_to_the_true_wait():
    """Twelve requests at once on the queueing mock's 2 slots (llama-server's names; TTFT
    100 ms, then 19 tokens 10 ms apart: 0.29 s a request), polled every 50 ms: Little's law
    against the mean of the waits the mock logged (``/mock/log``: each slot's start less
    the arrival). The mock's depth is exact at each poll (10 at first), so the estimate is
    off by the polls' sampling of it and by the rate: every slot goes straight on to the
    next task, whose unseen ends the token counters make 0.3 to 0.5 tasks no poll saw,
    3 to 4 % more through the queue. Measured on the 2-core machine (2026-12-07, quiet and
    with both cores busy besides): 0.68 to 0.70 s against 0.73 s, 0.03 to 0.05 s low. The
    bound is one poll interval and 10 %."""

    async def watched():
        timing = Timing(ttft_ms=100, itl_ms=10, tokens=20, slots=2, queue=True)
        server = MockServer(timing, LLAMACPP.key)
        await server.start()
        stop = asyncio.Event()
        try:
            watching = asyncio.create_task(watch(server.base_url, 0.05, None, stop=stop))
            await asyncio.sleep(0.1)
            async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as client:
                body = {"prompt": "x" * 256, "max_tokens": 20, "stream": True}
                await asyncio.gather(
                    *(client.post("/v1/completions", json=body) for _ in range(12))
                )
                log = (await client.get("/mock/log")).json()
            await asyncio.sleep(0.1)
            stop.set()
            return await watching, log
        finally:
            await server.close()

    result, log = asyncio.run(watched())
    summary = summarize(result)
    truth = statistics.fmean((s["t_slot_ns"] - s["t_received_ns"]) / 1e9 for s in log)
    assert len(log) == 12 and summary.queue_max == 10 and result.tasks.ended == 12
    assert 0.6 < truth < 1.5  # 0, 1, ... 5 requests' time each, twice: 0.73 s
    assert summary.wait_estimate_s == pytest.approx(truth, abs=0.05 + 0.1 * truth)
