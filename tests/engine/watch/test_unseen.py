"""The ledger of the tasks no poll saw: the counters' growth less what the polls saw, an
unseen end estimated at the server's own rates, the rest sized by the tasks that ran
between two polls; restarts and missing counters leave their intervals out."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from workbench.engine.base.server_kinds import LLAMACPP
from workbench.engine.watch import watcher
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.unseen import BETWEEN_POLLS, SEEN_END, TokenLedger


def counters(prompt: float, output: float, prompt_s: float = 0.0, output_s: float = 0.0):
    return {
        "prompt_tokens": prompt,
        "cached_tokens": 0.0,
        "output_tokens": output,
        "prompt_seconds": prompt_s,
        "output_seconds": output_s,
    }


def missed(slot: int, t_s: float, size: int) -> WatchedTask:
    return WatchedTask(slot, 100 + slot, t_s - 1, t_s - 1, gone_s=t_s, missed=True,
                       sequence_tokens=size - 1)  # fmt: skip


def whole(slot: int, t_s: float, prompt: int, answer: int) -> WatchedTask:
    """A task whose decoding a poll first showed at ``t_s - 1``, seen to its end at ``t_s``."""
    return WatchedTask(slot, 200 + slot, t_s - 2, t_s - 1, t_s - 1, t_s, prompt, 0, answer,
                       decoded_all=True)  # fmt: skip


def decoding(task: WatchedTask) -> WatchedTask:
    """``task`` as the poll that first showed it decoding saw it."""
    return WatchedTask(task.slot, task.task, task.seen_s, task.last_s, task.decoding_s, None,
                       task.prompt_tokens, 0, 1)  # fmt: skip


def test_tokens_no_task_seen_accounts_for_are_sized_by_the_tasks_between_polls():
    ledger = TokenLedger()
    ledger.poll(0.0, counters(0, 0), [], [])
    seen_whole = whole(3, 2.0, 30, 20)
    ledger.poll(1.0, counters(30, 0), [], [decoding(seen_whole)])  # its prompt done
    # then: three tasks of 40 tokens seen between polls, the whole one's answer, and 80
    # more tokens in the counters: two tasks nobody saw
    ended = [missed(0, 2.0, 40), missed(1, 2.0, 40), missed(2, 2.0, 40), seen_whole]
    ledger.poll(2.0, counters(30 + 60 + 40, 60 + 20 + 40), ended, [])
    found = ledger.estimate()
    assert found is not None
    assert (found.tokens, found.size, found.sample, found.sized_by) == (80, 40, 3, BETWEEN_POLLS)
    assert found.tasks == pytest.approx(2.0)


def test_with_few_tasks_between_polls_the_size_is_that_of_the_tasks_seen_end():
    ledger = TokenLedger()
    ledger.poll(0.0, counters(0, 0), [], [])
    tasks = [whole(0, 2.0, 30, 20), whole(1, 2.0, 30, 20)]
    ledger.poll(1.0, counters(60, 0), [], [decoding(t) for t in tasks])
    ledger.poll(2.0, counters(60 + 100, 40 + 100), tasks, [])  # and 200 tokens unseen
    found = ledger.estimate()
    assert found is not None and found.sized_by == SEEN_END
    assert (found.size, found.tokens) == (50, 200) and found.tasks == pytest.approx(4.0)


def test_an_answers_unseen_end_is_half_an_interval_at_the_servers_rate_less_the_next_task():
    ledger = TokenLedger()
    ledger.poll(0.0, counters(0, 0), [], [])
    # the server decodes at 100 tokens a second a task and reads prompts at 1,000
    ledger.poll(1.0, counters(0, 100, 0.0, 1.0), [], [])
    went_on = WatchedTask(0, 1, 0.5, 1.0, 0.5, 2.0, 10, 0, 30)  # last seen at 1.0 s
    after = WatchedTask(0, 2, 2.0, 2.0, 2.0, None, 200, 100, 20)  # 0.1 s prompt, 0.2 s out
    ledger.poll(2.0, counters(1000, 100, 1.0, 1.0), [went_on], [after])
    # 1 s between the polls, of which 0.3 s were the next task's: half of 0.7 s at 100/s
    assert ledger.ends == pytest.approx(35.0)
    assert ledger.rate("output") == 100 and ledger.rate("prompt") == 1000
    # once answers were seen whole, none is taken as longer than their mean: a slot may
    # have gone through several short tasks in the interval
    ledger.poll(3.0, counters(1000, 110, 1.0, 1.1), [whole(1, 3.0, 5, 10)], [])
    ledger.poll(4.0, counters(1000, 110, 1.0, 1.1), [replace(went_on, last_s=3.0, gone_s=4.0)], [])
    assert ledger.ends == pytest.approx(35.0 + 10.0)


def test_a_task_seen_only_on_its_prompt_is_given_the_mean_answer():
    ledger = TokenLedger()
    ledger.poll(0.0, counters(0, 0), [], [])
    ledger.poll(1.0, counters(0, 20), [whole(0, 1.0, 30, 20)], [])  # its prompt done before
    prompt_only = WatchedTask(0, 5, 1.0, 1.0, None, 2.0, 12)
    ledger.poll(2.0, counters(12, 40), [prompt_only], [])
    assert ledger.ends == 20 and ledger.seen == 20 + 12  # its answer taken as the mean


def test_a_restart_a_missing_counter_or_a_first_poll_counts_no_interval():
    ledger = TokenLedger()
    ledger.poll(0.0, counters(500, 500), [whole(0, 0.0, 30, 20)], [])  # the first: no interval
    ledger.poll(1.0, None, [whole(0, 1.0, 30, 20)], [])  # /metrics did not answer
    ledger.poll(2.0, counters(600, 600), [], [])  # after a poll without: no interval
    ledger.poll(3.0, counters(10, 10), [whole(0, 3.0, 30, 20)], [])  # restarted: it fell
    assert (ledger.intervals, ledger.counted, ledger.seen) == (0, 0, 0)
    assert ledger.estimate() is None


def test_a_prompt_done_is_counted_when_a_poll_first_shows_its_task_decoding():
    ledger = TokenLedger()
    ledger.poll(0.0, counters(0, 0), [], [])
    decoding = WatchedTask(0, 1, 0.5, 1.0, 1.0, None, 300, 100, 4)
    ledger.poll(1.0, {**counters(200, 0), "cached_tokens": 100.0}, [], [decoding])
    assert (ledger.counted, ledger.seen) == (300, 300)
    ledger.poll(2.0, {**counters(200, 0), "cached_tokens": 100.0}, [], [decoding])
    assert ledger.seen == 300  # counted once, at the poll that first showed it decoding


def test_it_is_kept_and_read_back_with_each_value_checked():
    ledger = TokenLedger(2, 10.0, 5.0, tasks=3, rated={"output": 50.0, "output_s": 0.5})

    def number(value, whole=False):
        assert not isinstance(value, str)
        return int(value) if whole else float(value)

    assert TokenLedger.restored(ledger.kept(), number) == ledger
    assert TokenLedger.restored(None, number) == TokenLedger()  # a file of before it
    for damaged in ({"missed_tokens": -30.0}, {"rated": "ab"}, {"rated": {"output": -1}}, [1]):
        kept = {**ledger.kept(), **damaged} if isinstance(damaged, dict) else damaged
        with pytest.raises(ValueError):
            TokenLedger.restored(kept, number)


def test_a_poll_without_slots_leaves_its_intervals_out_of_the_watchs_ledger(monkeypatch):
    """/slots unanswered at one poll while /metrics counted on: what ran then was not seen
    to end, so neither interval beside it is counted (else it reads as unseen tasks)."""
    names = {"prompt_tokens": "llamacpp:prompt_tokens_total",
             "cached_tokens": "llamacpp:prompt_tokens_cached_total",
             "output_tokens": "llamacpp:tokens_predicted_total"}  # fmt: skip

    def metrics(tokens: float) -> dict[str, float]:
        return {"llamacpp:requests_processing": 0.0, "llamacpp:requests_deferred": 0.0} | {
            name: tokens for name in names.values()
        }

    idle = [{"id": 0, "id_task": 1, "is_processing": False, "n_decoded": 0}]
    polls = iter([(None, metrics(900.0), {}), (idle, metrics(1800.0), {})])

    async def watched() -> watcher.Watched:
        stop = asyncio.Event()

        async def first(*_):
            return idle, metrics(0.0), LLAMACPP, {}

        async def then(*_):
            found = next(polls, None)
            if found is None:  # the script done: one more answered poll, then the end
                stop.set()
                return idle, metrics(1800.0), {}
            return found

        monkeypatch.setattr(watcher, "first_poll", first)
        monkeypatch.setattr(watcher, "_poll", then)
        return await watcher.watch("http://127.0.0.1:9", 0.02, None, stop=stop)

    found = asyncio.run(watched())
    assert found.polls == 4
    # only the last interval, both ends answered, counts: nothing grew in it
    assert (found.ledger.intervals, found.ledger.counted) == (1, 0)
