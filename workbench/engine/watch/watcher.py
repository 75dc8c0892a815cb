"""Watching a running llama-server: its ``/slots`` polled at an interval, each answer
bounded in bytes and time, turned into tasks (``slot_tasks``). The workbench sends no load.

A poll that takes more than half the interval stretches the next wait to twice what it
took (a slow server is not polled harder); a server that stops answering mid-watch is
counted down, not ended on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.measure.sampler import normalise_slots
from workbench.engine.net.bounded_http import get
from workbench.engine.net.http_stream import ConnectFailed
from workbench.engine.watch.slot_tasks import SlotTasks, WatchedTask

MAX_SLOTS_BYTES = 4 * 1024 * 1024  # a /slots of 1,024 slots is well under 1 MiB
DEADLINE_S = 2.0  # one poll's answer, whole
MIN_INTERVAL_S = 0.02


class WatchError(WorkbenchError):
    """The address cannot be watched: nothing answers, no ``/slots``, a refused key."""


@dataclass
class Watched:
    """What a watch saw: its tasks, its polls (answered and not), and for each slot the
    polls that showed it busy. Its times are seconds after ``started_ns``
    (``time.perf_counter_ns``, the clock a run's records keep)."""

    started_ns: int = 0
    tasks: SlotTasks = field(default_factory=SlotTasks)
    polls: int = 0
    unanswered: int = 0
    busy: dict[int, int] = field(default_factory=dict)
    seconds: float = 0.0

    def busy_share(self, slot: int) -> float:
        """The share of answered polls that showed ``slot`` busy."""
        return self.busy.get(slot, 0) / max(1, self.polls)


def _slots_of(answer_body: bytes) -> list[dict] | None:
    try:
        data = json.loads(answer_body)
    except ValueError:
        return None
    return normalise_slots(data) if isinstance(data, list) else None


async def first_poll(base_url: str, headers: dict[str, str]) -> list[dict]:
    """The first ``/slots``, or a ``WatchError`` that says in one line why the address
    cannot be watched."""
    try:
        answer = await get(base_url, "/slots", headers, MAX_SLOTS_BYTES, DEADLINE_S)
    except ConnectFailed as exc:
        raise WatchError(f"nothing answers at {base_url}: {exc}") from None
    if answer is None:
        raise WatchError(
            f"{base_url}/slots did not answer within {DEADLINE_S:g} s or sent over "
            f"{MAX_SLOTS_BYTES // 2**20} MiB"
        )
    if answer.status in (401, 403):
        raise WatchError(f"{base_url} refused the request ({answer.status}): check the API key")
    if answer.status in (404, 501):
        raise WatchError(
            f"{base_url} gives no /slots ({answer.status}): a llama-server started with "
            "--no-slots, or not a llama-server"
        )
    slots = _slots_of(answer.body) if answer.status == 200 else None
    if slots is None:
        raise WatchError(f"{base_url}/slots is not llama-server's list of slots")
    return slots


async def watch(
    base_url: str,
    interval_s: float,
    duration_s: float | None,
    headers: dict[str, str] | None = None,
    on_ended: Callable[[WatchedTask], None] = lambda task: None,
    stop: asyncio.Event | None = None,
    on_poll: Callable[[float, list[dict]], None] = lambda t_s, slots: None,
) -> Watched:
    """Poll ``base_url``'s ``/slots`` every ``interval_s`` for ``duration_s`` (None: until
    ``stop``), telling ``on_poll`` each answer's slots and ``on_ended`` each task a poll
    showed ended."""
    headers = headers or {}
    interval_s = max(MIN_INTERVAL_S, interval_s)
    stop = stop or asyncio.Event()
    watched = Watched(time.perf_counter_ns())
    slots: list[dict] | None = await first_poll(base_url, headers)
    wait_s = interval_s
    while True:
        now = (time.perf_counter_ns() - watched.started_ns) / 1e9
        if slots is None:
            watched.unanswered += 1
        else:
            watched.polls += 1
            for slot in slots:
                if slot.get("is_processing") and slot.get("id") is not None:
                    watched.busy[slot["id"]] = watched.busy.get(slot["id"], 0) + 1
            on_poll(now, slots)
            for task in watched.tasks.observe(now, slots):
                on_ended(task)
        if duration_s is not None and now + wait_s > duration_s:
            break
        try:
            await asyncio.wait_for(stop.wait(), wait_s)
            break
        except TimeoutError:
            pass
        asked = time.perf_counter()
        slots = await _poll(base_url, headers)
        took = time.perf_counter() - asked
        wait_s = max(interval_s - took, 2 * took if took > interval_s / 2 else 0.0)
    watched.seconds = (time.perf_counter_ns() - watched.started_ns) / 1e9
    return watched


async def _poll(base_url: str, headers: dict[str, str]) -> list[dict] | None:
    """One ``/slots`` mid-watch, or None where the server did not answer with one."""
    try:
        answer = await get(base_url, "/slots", headers, MAX_SLOTS_BYTES, DEADLINE_S)
    except ConnectFailed:
        return None
    if answer is None or answer.status != 200:
        return None
    return _slots_of(answer.body)
