"""A watch of the real llama-server while the project's own client sends to it: the rules
``slot_tasks`` relies on, measured (b11434), and the watched times against the client's."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

import pytest

from workbench.engine.base.records import RequestRecord
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.figures.per_request import request_metrics
from workbench.engine.measure.sized_prompts import ServerTokenizer, sized_prompt
from workbench.engine.predict.probe import Phase, send
from workbench.engine.server.llama_server import LlamaServer
from workbench.engine.watch.server_process import server_probe
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.watcher import Watched, watch

pytestmark = pytest.mark.server

Load = Callable[[LlamaServer], Awaitable[list[RequestRecord]]]
Polls = list[tuple[float, list[dict]]]


async def watched_while(
    server_binary, model_path, tmp_path, interval_s: float, load: Load
) -> tuple[Watched, list[RequestRecord], Polls]:
    """``load`` sent to a fresh server (2 slots, -b 512) while a watch polls it."""
    settings = replace(ServerSettings(), slots=2, ctx=2 * 4096, batch_size=512)
    server = LlamaServer(server_binary, model_path, settings, tmp_path / "server.log")
    polls: Polls = []
    stop = asyncio.Event()
    try:
        await server.start()
        watching = asyncio.create_task(
            watch(
                server.base_url,
                interval_s,
                None,
                stop=stop,
                on_poll=lambda t, slots, load: polls.append((t, slots or [])),
            )
        )
        await asyncio.sleep(0.3)
        records = await load(server)
        await asyncio.sleep(3 * interval_s)
        stop.set()
        watched = await watching
    finally:
        await asyncio.to_thread(server.stop)
    return watched, records, polls


def prompts(tokens: int, answer: int) -> Load:
    async def load(server: LlamaServer) -> list[RequestRecord]:
        tokenizer = ServerTokenizer(server.base_url, "completions")
        text = (await sized_prompt(tokenizer, "Watched.", tokens, 7)).text
        return await send(
            server, Phase("watched", (tokens,), answer), [text], 0, time.monotonic() + 300
        )

    return load


def test_a_long_prompts_task_is_seen_on_its_prompt_then_decoding_then_gone(
    server_binary, model_path, tmp_path, capsys
):
    interval = 0.05
    watched, (record,), polls = asyncio.run(
        watched_while(server_binary, model_path, tmp_path, interval, prompts(1500, 20))
    )
    assert record.ok, record.error
    timings = record.timings
    (task,) = [t for t in watched.tasks.tasks if not t.missed]
    assert task.prompt_tokens == timings["prompt_n"] + timings["cache_n"]
    # the last tokens come between two polls: read from what the idle slot kept
    assert task.decoded == timings["predicted_n"]

    def at(t_ns: int | None) -> float:
        assert t_ns is not None
        return (t_ns - watched.started_ns) / 1e9

    first, done = at(record.t_first_token_ns), at(record.t_done_ns)
    with capsys.disabled():
        print(
            f"\nseen {task.seen_s:.3f} s, decoding {task.decoding_s:.3f} (client's first token "
            f"{first:.3f}), gone {task.gone_s:.3f} (client's end {done:.3f}); task id {task.task}"
        )
    assert task.seen_s < first - 1.0  # seen on its prompt: seconds of it at -b 512
    assert task.decoding_s is not None and task.gone_s is not None
    slack = interval + 0.1  # a poll's own wait, and the /slots snapshot a step old
    assert -0.05 <= task.decoding_s - first <= slack
    assert -0.05 <= task.gone_s - done <= slack
    # never shown on its prompt again once a poll has shown it decoding
    decoded = [
        (s["n_decoded"] or 0)
        for _, slots in polls
        for s in slots
        if s["id_task"] == task.task and s["is_processing"]
    ]
    assert decoded == sorted(decoded) and decoded[0] == 0 and decoded[-1] > 0
    # the prompt's progress moves chunk by chunk (-b 512): 0, 512, 1024 processed
    processed = {
        s["n_prompt_tokens_processed"]
        for _, slots in polls
        for s in slots
        if s["id_task"] == task.task and s["is_processing"] and not s["n_decoded"]
    }
    assert processed <= {0, 512, 1024} and len(processed) >= 2
    # and n_prompt_tokens the prompt as far as the chunk under way: never more than it
    so_far = {
        s["n_prompt_tokens"]
        for _, slots in polls
        for s in slots
        if s["id_task"] == task.task and s["is_processing"] and not s["n_decoded"]
    }
    cached = timings["cache_n"]
    assert so_far <= {cached + 512, cached + 1024, task.prompt_tokens} and len(so_far) >= 2


def test_a_task_between_two_polls_leaves_its_id_and_its_tokens_on_the_slot(
    server_binary, model_path, tmp_path
):
    watched, (record,), _ = asyncio.run(
        watched_while(server_binary, model_path, tmp_path, 1.0, prompts(8, 2))
    )
    assert record.ok, record.error
    (missed,) = watched.tasks.tasks
    assert missed.missed and missed.prompt_tokens is None
    timings = record.timings
    assert missed.sequence_tokens == timings["prompt_n"] + timings["predicted_n"] - 1


def test_the_queue_is_the_servers_deferred_requests_seen_a_step_late(
    server_binary, model_path, tmp_path
):
    """One slot: a 2,000-token prompt, and two short requests once it is under way. They
    wait (``requests_deferred`` 2, ``requests_processing`` 1), but /metrics is a snapshot
    refreshed once per step: no poll shows them waiting before the long prompt's step
    ends. The token counters add up to what the requests' timings say."""
    loads = []

    async def run() -> tuple[list[RequestRecord], Watched]:
        settings = replace(ServerSettings(), slots=1, ctx=4096)
        server = LlamaServer(server_binary, model_path, settings, tmp_path / "server.log")
        stop = asyncio.Event()
        try:
            await server.start()
            tokenizer = ServerTokenizer(server.base_url, "completions")
            texts = [
                (await sized_prompt(tokenizer, f"Queued {k}.", n, 20 + k)).text
                for k, n in enumerate((2000, 16, 16))
            ]
            watching = asyncio.create_task(
                watch(
                    server.base_url,
                    0.1,
                    None,
                    stop=stop,
                    on_poll=lambda t, slots, load: loads.append(load) if load else None,
                )
            )
            deadline = time.monotonic() + 300

            async def one(k: int, after_s: float, answer: int) -> list[RequestRecord]:
                await asyncio.sleep(after_s)
                phase = Phase("queued", (len(texts[k]),), answer)
                return await send(server, phase, [texts[k]], 10 * k, deadline)

            found = await asyncio.gather(one(0, 0.0, 30), one(1, 0.4, 10), one(2, 0.5, 10))
            await asyncio.sleep(0.5)
            stop.set()
            watched = await watching
        finally:
            await asyncio.to_thread(server.stop)
        return [r for records in found for r in records], watched

    records, watched = asyncio.run(run())
    assert all(r.ok for r in records), [r.error for r in records]
    long_first = (records[0].t_first_token_ns - watched.started_ns) / 1e9
    waiting = [(load.t_s, load.waiting, load.running) for load in loads]
    assert max(w for _, w, _ in waiting) == 2
    assert all(r == 1 for _, w, r in waiting if w == 2)
    # a step late: not one poll during the long prompt's step saw the two waiting
    assert all(w == 0 for t, w, _ in waiting if t < long_first - 0.3)
    last = loads[-1]
    assert last.prompt_tokens == sum(r.timings["prompt_n"] for r in records)
    assert last.output_tokens == sum(r.timings["predicted_n"] for r in records)


def test_the_servers_memory_is_watched_where_it_listens_on_this_machine(
    server_binary, model_path, tmp_path
):
    """Found by its port: the llama-server process itself, read at most once a second."""

    async def run() -> tuple[Watched, int | None]:
        settings = replace(ServerSettings(), slots=1, ctx=4096)
        server = LlamaServer(server_binary, model_path, settings, tmp_path / "server.log")
        try:
            await server.start()
            probe, note = server_probe(server.base_url)
            assert probe is not None and note == "" and probe.process.pid == server.pid
            return await watch(server.base_url, 0.1, 1.5), server.pid
        finally:
            await asyncio.to_thread(server.stop)

    watched, _ = asyncio.run(run())
    assert watched.memory_note == ""
    assert watched.memory_max_bytes is not None and watched.memory_max_bytes > 50 * 2**20


def test_a_server_restarted_mid_watch_is_a_gap_and_the_watch_goes_on(
    server_binary, model_path, tmp_path
):
    """The real server stopped while a long prompt is processed and started again on its
    port: one gap from its stop to its answering again, the task ended when it went down,
    and the restarted server's tasks watched as new ones."""

    async def run() -> Watched:
        settings = replace(ServerSettings(), slots=2, ctx=2 * 4096, batch_size=64)
        first = LlamaServer(server_binary, model_path, settings, tmp_path / "first.log")
        await first.start()
        stop = asyncio.Event()
        watching = asyncio.create_task(watch(first.base_url, 0.05, None, stop=stop))
        again = LlamaServer(
            server_binary,
            model_path,
            replace(settings, port=int(first.base_url.rsplit(":", 1)[1])),
            tmp_path / "again.log",
        )
        try:
            sending = asyncio.create_task(prompts(1500, 4)(first))
            await asyncio.sleep(1.0)  # its prompt under way, 64 tokens a step
            await asyncio.to_thread(first.stop)
            await asyncio.gather(sending, return_exceptions=True)
            await asyncio.sleep(0.5)
            await again.start()
            await prompts(100, 40)(again)
            await asyncio.sleep(0.3)
            stop.set()
            return await watching
        finally:
            stop.set()
            await asyncio.to_thread(first.stop)
            await asyncio.to_thread(again.stop)

    watched = asyncio.run(run())
    assert watched.gaps_count == 1 and watched.down_since is None
    gap = watched.gaps[0]
    assert gap.up_s is not None and gap.up_s - gap.down_s > 0.5
    before, after = (
        [t for t in watched.tasks.tasks if not t.missed and (t.seen_s < gap.down_s) == early]
        for early in (True, False)
    )
    assert [t.gone_s for t in before] == [gap.down_s] and before[0].decoding_s is None
    assert len(after) == 1 and after[0].seen_s >= gap.up_s and after[0].decoding_s is not None


def test_the_wait_estimated_from_the_queue_is_the_wait_the_client_measured(
    server_binary, model_path, tmp_path, capsys
):
    """Twelve requests at once on 2 slots: the wait Little's law gives from the watched
    queue depth and the tasks' rate, against each request's own wait (TTFT less the
    server's ``prompt_ms``). The depth is a snapshot a step old, so what queued during a
    long step is missed: the estimate reads low, never much high (0.88x to 0.99x here;
    0.74x on a burst of longer prompts, and lower where a busy machine slows the steps)."""

    async def twelve(server: LlamaServer) -> list[RequestRecord]:
        tokenizer = ServerTokenizer(server.base_url, "completions")
        texts = [(await sized_prompt(tokenizer, f"Wait {k}.", 64, 30 + k)).text for k in range(12)]
        return await send(server, Phase("queued", (64,) * 12, 48), texts, 0, time.monotonic() + 300)

    watched, records, _ = asyncio.run(
        watched_while(server_binary, model_path, tmp_path, 0.1, twelve)
    )
    assert all(r.ok for r in records), [r.error for r in records]
    waits = [m.queue_wait_s for r in records if (m := request_metrics(r)) is not None]
    measured = statistics.mean(w for w in waits if w is not None)
    estimated = summarize(watched).wait_estimate_s
    with capsys.disabled():
        print(f"\nqueue wait: estimated {estimated:.3f} s, measured {measured:.3f} s a request")
    assert measured > 1.0  # five rounds of two: most requests waited seconds
    assert 0.5 <= estimated / measured <= 1.15
