"""SLOs judged on a watch: met or missed only where the reading is further from the limit
than the polls can be off, a time from the slot on never passed where requests may have
waited for a slot, and what a watch cannot see not judged."""

from __future__ import annotations

import math
from dataclasses import replace

from workbench.engine.base.server_kinds import LLAMACPP, VLLM
from workbench.engine.tune.slo_targets import parse_slo
from workbench.engine.watch.slo_judged import CANNOT_TELL, MET, MISSED, NOT_JUDGED, judge
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.watcher import Load, Watched

POLL_S = 0.05


def tasks() -> list[WatchedTask]:
    """Ten tasks whose prompts took 0.1 to 1.0 s and which then decoded 21 tokens in 2 s;
    one running at the watch's start and one between two polls, which say nothing."""
    found = []
    for k in range(1, 11):
        start, decoding = 10.0 * k, 10.0 * k + k / 10
        found.append(
            WatchedTask(0, k, start, 0, decoding, decoding + 2, 100, 0, 21, decoded_all=True)
        )
    found.append(WatchedTask(1, 99, 0.0, 0.0, 5.0, 9.0, 50, 0, 2, running_at_start=True))
    found.append(WatchedTask(1, 98, 1.0, 1.0, gone_s=1.05, missed=True, sequence_tokens=9))
    return found


def summary_with(waiting: float, kind=LLAMACPP):
    watched = Watched(0, kind=kind, seconds=100.0)
    watched.polls, watched.busy = 10, {0: 10, 1: 10}
    for tasks_ in tasks():
        watched.tasks.restore(tasks_)
    for t in range(10):
        watched.count_load(Load(t, 2.0, waiting if t % 2 else 0.0, None, None))
    return summarize(watched)


def judged(*slos: str, waiting: float = 0.0):
    return judge(
        [parse_slo(s) for s in slos], summary_with(waiting), tasks(), LLAMACPP, ({}, {}), POLL_S
    )


def test_a_percentile_is_met_or_missed_only_beyond_what_the_polls_can_be_off():
    met, missed, close = judged("ttft_p50:2000", "ttft_p90:500", "ttft_p50:560")
    assert met.outcome == MET and math.isclose(met.value_ms, 550) and met.margin_ms == 50
    assert "10 tasks" in met.basis  # the one at the start and the one between polls left out
    assert missed.outcome == MISSED and math.isclose(missed.value_ms, 910)
    assert close.outcome == CANNOT_TELL  # 550 ± 50 holds 560


def test_tpot_is_a_tasks_decoding_over_its_tokens_after_the_first():
    [tpot] = judged("tpot_p50:120")
    assert tpot.outcome == MET and math.isclose(tpot.value_ms, 100)
    assert math.isclose(tpot.margin_ms, 2.5)  # a poll's 50 ms over 20 tokens
    # a slot that went straight on to the next task: the decoding its last poll showed
    going_on = [
        replace(t, decoded_all=False, last_s=t.decoding_s + 1.0, decoded=11)
        for t in tasks()
        if t.decoding_s is not None
    ]
    [tpot] = judge(
        [parse_slo("tpot_p50:120")], summary_with(0), going_on, LLAMACPP, ({}, {}), POLL_S
    )
    assert tpot.outcome == MET and math.isclose(tpot.value_ms, 100) and tpot.margin_ms == 5


def test_a_time_from_the_slot_on_is_no_pass_where_requests_waited_for_a_slot():
    ttft, e2e, tpot = judged("ttft_p50:2000", "e2el_p50:60000", "tpot_p50:120", waiting=2)
    assert ttft.outcome == e2e.outcome == CANNOT_TELL
    assert "requests also waited for a slot (50% of the polls" in ttft.basis
    assert tpot.outcome == MET  # decoding does not wait in the queue
    [missed] = judged("ttft_p90:500", waiting=2)
    assert missed.outcome == MISSED  # already over its limit before any wait


def test_what_a_watch_cannot_see_is_not_judged():
    itl, stall = judged("itl_p90:50", "stall_p99:1000")
    assert itl.outcome == stall.outcome == NOT_JUDGED and itl.value_ms is None
    assert itl.basis == "a watch sees a task's time a token (tpot), not each gap"


def test_the_servers_own_histogram_judges_where_the_limit_is_outside_its_bucket():
    name = "vllm:time_to_first_token_seconds"
    first = {name: {0.1: 0.0, 0.25: 0.0, 0.5: 0.0, math.inf: 0.0}}
    last = {name: {0.1: 2.0, 0.25: 9.0, 0.5: 10.0, math.inf: 10.0}}  # p50 in 100-250 ms
    summary = replace(summary_with(0.0, VLLM), slots=0)
    slos = [parse_slo(s) for s in ("ttft_p50:300", "ttft_p50:200", "ttft_p50:90", "tpot_p50:9")]
    met, close, missed, tpot = judge(slos, summary, [], VLLM, (first, last), POLL_S)
    assert met.outcome == MET and close.outcome == CANNOT_TELL and missed.outcome == MISSED
    assert met.basis == "the server's histogram, 10 observed, its bucket 100-250 ms"
    assert tpot.outcome == NOT_JUDGED and tpot.basis == "no tasks without /slots"
