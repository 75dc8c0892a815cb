"""The event bus and the batched emit of the measuring loop: what subscribers see, and when."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from workbench.engine.events import (
    HOT_EVENTS,
    BatchedEmit,
    EventBus,
    FirstToken,
    Notice,
    RequestSubmitted,
    TokenChunkArrived,
)


def submitted(index: int) -> RequestSubmitted:
    return RequestSubmitted(0, 0, index, False, 1_000 + index)


def first(index: int) -> FirstToken:
    return FirstToken(0, 0, index, 2_000 + index)


def chunk(index: int, text: str) -> TokenChunkArrived:
    return TokenChunkArrived(0, 0, index, 3_000 + index, text)


def notice(text: str) -> Notice:
    return Notice("info", text)


def test_per_token_events_are_held_until_a_flush() -> None:
    published: list[Any] = []
    emit = BatchedEmit(published.append)
    hot = [submitted(0), first(0), chunk(0, "a")]
    for event in hot:
        assert isinstance(event, HOT_EVENTS)
        emit(event)
    assert published == []
    emit.flush()
    assert published == hot
    emit.flush()
    assert published == hot  # nothing held twice


def test_any_other_event_publishes_what_is_held_first_so_the_order_never_changes() -> None:
    published: list[Any] = []
    emit = BatchedEmit(published.append)
    emitted = [
        submitted(0),
        first(0),
        notice("one"),
        chunk(0, "a"),
        submitted(1),
        notice("two"),
        notice("three"),
        chunk(1, "b"),
    ]
    for event in emitted:
        emit(event)
    assert published == emitted[:-1]  # up to the last cold event, at once
    emit.flush()
    assert published == emitted


async def test_run_publishes_what_is_held_every_interval() -> None:
    published: list[Any] = []
    emit = BatchedEmit(published.append, interval_s=0.001)
    task = asyncio.create_task(emit.run())
    try:
        emit(chunk(0, "a"))
        for _ in range(5000):  # up to 5 s; done within a few milliseconds
            if published:
                break
            await asyncio.sleep(0.001)
        assert published == [chunk(0, "a")]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_run_publishes_what_is_held_when_cancelled() -> None:
    published: list[Any] = []
    emit = BatchedEmit(published.append, interval_s=3600)  # no interval passes in this test
    task = asyncio.create_task(emit.run())
    await asyncio.sleep(0)  # run() is waiting out its interval
    emit(first(0))
    emit(chunk(0, "a"))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and published == [first(0), chunk(0, "a")]


def test_the_bus_fans_each_event_out_to_the_subscribers_of_its_type() -> None:
    bus = EventBus()
    everything = bus.subscribe()
    notices = bus.subscribe(Notice)
    tokens = bus.subscribe(FirstToken, TokenChunkArrived)
    events = [submitted(0), first(0), notice("n"), chunk(0, "a")]
    for event in events:
        bus.publish(event)
    assert everything.drain() == events
    assert notices.drain() == [notice("n")]
    assert tokens.drain() == [first(0), chunk(0, "a")]
    assert everything.drain() == []  # drained once


def test_drain_takes_at_most_its_limit_in_order() -> None:
    bus = EventBus()
    sub = bus.subscribe()
    for i in range(5):
        bus.publish(notice(str(i)))
    assert sub.drain(2) == [notice("0"), notice("1")]
    assert sub.drain() == [notice(str(i)) for i in (2, 3, 4)]


def test_an_unsubscribed_queue_gets_nothing_more() -> None:
    bus = EventBus()
    kept, dropped = bus.subscribe(), bus.subscribe()
    bus.publish(notice("before"))
    bus.unsubscribe(dropped)
    bus.unsubscribe(dropped)  # twice: no error
    bus.publish(notice("after"))
    assert dropped.drain() == [notice("before")]
    assert kept.drain() == [notice("before"), notice("after")]


def test_run_ended_cuts_every_subscriptions_wait_short() -> None:
    bus = EventBus()
    subs = [bus.subscribe(), bus.subscribe(Notice)]
    returned: list[int] = []
    waiters = [
        threading.Thread(target=lambda n=n, s=s: (s.wait(600), returned.append(n)), daemon=True)
        for n, s in enumerate(subs)
    ]
    for waiter in waiters:
        waiter.start()
    bus.run_ended()
    for waiter in waiters:
        waiter.join(10)  # without run_ended: 600 s each
        assert not waiter.is_alive()
    assert sorted(returned) == [0, 1]
    assert all(sub.ended.is_set() for sub in subs)
