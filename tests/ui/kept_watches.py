"""Kept watches for the replay's tests: one recorded for real (the engine's watch of the mock
server under traffic, kept by its ``Recorder`` as ``workbench watch`` keeps it), and one
made of a watch of hours (thousands of tasks, a hundred thousand polls' loads)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import sqlite3
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import httpx

from workbench.engine.base.server_kinds import LLAMACPP
from workbench.engine.watch.record import Recorder, kept_at
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.watcher import Gap, Load, Watched, watch
from workbench.mock_server.process import MockProcess

INTERVAL_S = 0.05
T = TypeVar("T")


def send(url: str, at_once: int, rounds: int, tokens: int = 40, prompt: str = "x" * 200) -> None:
    """``rounds`` of ``at_once`` requests at once, each answered whole."""

    def one(_: int) -> None:
        body = {"prompt": prompt, "max_tokens": tokens, "stream": True}
        httpx.post(f"{url}/v1/completions", json=body, timeout=240)

    with concurrent.futures.ThreadPoolExecutor(at_once) as pool:
        for _ in range(rounds):
            list(pool.map(one, range(at_once)))


def record_watch(folder: Path, *mock_args: str, at_once: int = 3, rounds: int = 3) -> Path:
    """A watch of the mock server (started with ``mock_args``) while ``rounds`` of
    ``at_once`` requests reach it, kept in ``folder``: its file."""
    with MockProcess(*mock_args) as mock:
        recorder = Recorder(kept_at(folder), mock.url, INTERVAL_S)

        async def watched() -> Watched:
            stop = asyncio.Event()

            async def traffic() -> None:
                await asyncio.sleep(0.3)  # a few idle polls first
                await asyncio.to_thread(send, mock.url, at_once, rounds)
                await asyncio.sleep(0.3)  # the last task seen gone
                stop.set()

            sender = asyncio.create_task(traffic())
            found = await watch(mock.url, INTERVAL_S, None, stop=stop, keeper=recorder)
            await sender
            return found

        recorder.close(run_apart(watched()))
    return recorder.path


def run_apart(coroutine: Coroutine[Any, Any, T]) -> T:
    """``coroutine`` run whole on a loop of its own, on this thread: the window's loop,
    which the tests' loop keeps running between runs, set aside meanwhile (a thread runs one
    loop at a time; on another thread, garbage collected there could free Qt objects)."""
    window_loop = asyncio.events._get_running_loop()
    asyncio.events._set_running_loop(None)
    loop = asyncio.new_event_loop()
    try:
        found = loop.run_until_complete(coroutine)
        loop.run_until_complete(loop.shutdown_default_executor())
        return found
    finally:
        loop.close()
        asyncio.events._set_running_loop(window_loop)


def made_long_watch(folder: Path, hours: float = 3.0, slots: int = 4) -> Path:
    """A watch of ``hours`` of a busy ``slots``-slot server, polled every 0.1 s: a task a
    slot every 2 s (0.5 s of prompt), a load every poll, and the server down once."""
    path = kept_at(folder)
    recorder = Recorder(path, "http://127.0.0.1:8080", 0.1)
    seconds = hours * 3600
    watched = Watched(0, kind=LLAMACPP, seconds=seconds)
    number = 0
    for begin in range(0, int(seconds) - 2, 2):
        for slot in range(slots):
            start = begin + slot * 0.1
            number += 1
            recorder.task(
                WatchedTask(slot, number, start, start + 1.8, start + 0.5, start + 1.9, 300, 0, 40)
            )
            watched.tasks.ended += 1
    prompt = output = 0.0
    for step in range(int(seconds * 10)):
        t = step / 10
        prompt, output = prompt + 60, output + 8
        recorder.load(Load(t, float(slots), float(step // 50 % 4), prompt, output))
    watched.polls = int(seconds * 10)
    watched.busy = {slot: watched.polls for slot in range(slots)}
    watched.gaps.append(Gap(seconds / 2, seconds / 2 + 30))
    watched.gaps_count = 1
    watched.down_s = 30.0
    recorder.close(watched)
    return path


def given_slos(path: Path, copy: Path, *slos: str) -> Path:
    """``path`` as a watch given ``slos`` (as ``--slo`` takes them) keeps it."""
    copy.write_bytes(path.read_bytes())
    with sqlite3.connect(copy) as conn:
        conn.execute("UPDATE watch SET slos = ?", (json.dumps(slos),))
    return copy


def as_first_version(path: Path, copy: Path) -> Path:
    """``path`` as the first version of the file kept it: no KV-cache use in its loads."""
    copy.write_bytes(path.read_bytes())
    with sqlite3.connect(copy) as conn:
        conn.executescript("ALTER TABLE loads DROP COLUMN kv_usage; PRAGMA user_version = 1;")
    return copy
