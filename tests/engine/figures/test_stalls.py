"""Generation stalls on constructed streams whose answer is known: the rule, each stall's
cause, the wait a longer prompt held, and a repeat's figures."""

from __future__ import annotations

import itertools

import pytest

from workbench.engine.base.records import RequestRecord, TokenChunk
from workbench.engine.figures.per_request import request_metrics
from workbench.engine.figures.stalls import (
    StallFigures,
    prefill_of,
    repeat_stalls,
    stall_figures,
    stalled_gaps,
)

S = 1_000_000_000


def request(
    index: int,
    first_s: float,
    gaps: list[float],
    *,
    submit_s: float = 0.0,
    prompt: int = 100,
    cached: int = 0,
    prompt_s: float | None = 0.05,
) -> RequestRecord:
    """A streamed request: sent at ``submit_s``, its first token at ``first_s`` after
    ``prompt_s`` of prompt processing by the server's timings (None: no timings), then a
    token after each of ``gaps``."""
    times = [round(t * S) for t in itertools.accumulate([first_s, *gaps])]
    timings = None
    if prompt_s is not None:
        timings = {"prompt_ms": prompt_s * 1000, "prompt_n": prompt - cached, "cache_n": cached}
    return RequestRecord(
        config_index=0,
        repeat=0,
        index=index,
        prompt="p",
        t_submit_ns=round(submit_s * S),
        t_first_token_ns=times[0],
        t_last_token_ns=times[-1],
        t_done_ns=times[-1],
        ok=True,
        usage={"prompt_tokens": prompt, "completion_tokens": len(times)},
        timings=timings,
        chunks=[TokenChunk(t, "x") for t in times],
    )


def figures(records: list[RequestRecord]) -> StallFigures:
    return stall_figures(records, {r.key: m for r in records if (m := request_metrics(r))})


def stalls_of(records: list[RequestRecord]):
    return repeat_stalls(records, {r.key: m for r in records if (m := request_metrics(r))})


def test_a_stall_is_a_gap_far_above_the_streams_own_pace():
    """A 24 ms stream frozen 9 s and 1.5 s: two stalls; decoding jitter of 2.6 times its
    median is not one, nor a 0.2 s hiccup of a fast stream (the floor)."""
    assert stalled_gaps([0.024] * 20 + [9.0, 0.062, 1.5]) == [9.0, 1.5]
    assert stalled_gaps([0.02] * 20 + [0.052]) == []
    assert stalled_gaps([0.005] * 20 + [0.2]) == []
    assert stalled_gaps([0.005] * 20 + [0.3]) == [0.3]
    assert stalled_gaps([0.02, 5.0, 0.02]) is None  # too few gaps to have a pace


# Two chats from 0 s; a 1,000-token document (200 of it cached) sent at 0.5 s, its 800
# tokens processed from 0.6 s to 3.6 s beside them: the first chat freezes 2 s and 1 s.
FROZEN = request(0, 0.1, [0.02] * 10 + [2.0] + [0.02] * 8 + [1.0])
STEADY = request(1, 0.1, [0.02] * 20)
DOCUMENT = request(2, 3.6, [0.02, 0.02], submit_s=0.5, prompt=1000, cached=200, prompt_s=3.0)


def test_the_server_timings_place_a_prompt_before_its_first_token():
    placed = prefill_of(DOCUMENT)
    assert placed is not None and (placed.start_ns, placed.end_ns) == (0.6 * S, 3.6 * S)
    assert placed.processed == 800
    assert prefill_of(request(3, 1.0, [0.02], prompt_s=None)) is None


def test_a_repeats_stall_figures():
    """The frozen chat's two stalls, both while the document's prompt was processed."""
    found = figures([FROZEN, STEADY, DOCUMENT])
    assert found.stalled_stream_share == 0.5  # the document has too few gaps to be judged
    assert found.stall_max_s == pytest.approx(2.0)
    assert found.stall_p99_s == pytest.approx(1.99)
    assert found.stalled_s == pytest.approx(3.0)
    assert found.stalled_s_per_1k_prompt == pytest.approx(1000 * 3.0 / (100 + 100 + 800))
    assert found.gaps_within_share == 38 / 40
    assert found.stalled_by_prompts_share == pytest.approx(1.0)
    assert (found.stall_cause_tokens, found.stall_cause_streams) == (1000, 1)
    assert found.stall_cause_ttft_s == pytest.approx(3.1)
    assert found.stall_cause_prompts == 1


def test_a_stall_is_the_doing_of_the_longest_prompt_covering_half_of_it():
    """A short prompt processed in the same steps as the document covers the stall too: the
    document is the cause. A prompt that covers less than half a stall is not its cause; a
    stall while a request without timings was in flight has an unknown cause; one with
    nothing else in flight has none."""
    short = request(3, 3.6, [0.02], submit_s=0.55, prompt=40, prompt_s=3.0)
    (first, second) = stalls_of([FROZEN, STEADY, DOCUMENT, short])[FROZEN.key].stalls
    assert first.cause == second.cause == DOCUMENT.key
    assert (first.seconds, second.seconds) == pytest.approx((2.0, 1.0))
    assert figures([FROZEN, STEADY, DOCUMENT, short]).stall_cause_prompts == 2
    # the stalls are 0.3 s to 2.3 s and 2.46 s to 3.46 s; a prompt processed over the last
    # 0.4 s of the second, and sent during the first
    late = request(2, 3.46, [0.02, 0.02], submit_s=0.5, prompt=1000, prompt_s=0.4)
    stalls = stalls_of([FROZEN, STEADY, late])[FROZEN.key].stalls
    assert [(s.cause, s.unknown) for s in stalls] == [(None, False), (None, False)]
    untimed = request(2, 3.6, [0.02, 0.02], submit_s=0.5, prompt=1000, prompt_s=None)
    stalls = stalls_of([FROZEN, untimed])[FROZEN.key].stalls
    assert [(s.cause, s.unknown) for s in stalls] == [(None, True), (None, True)]
    found = figures([FROZEN, untimed])
    assert found.stalled_by_prompts_share == 0.0 and found.stall_cause_tokens is None
    assert found.stall_cause_prompts is None
    alone = stalls_of([FROZEN])[FROZEN.key].stalls
    assert [(s.cause, s.unknown) for s in alone] == [(None, False), (None, False)]


def test_the_wait_a_longer_prompt_held():
    """A chat sent at 1 s waits for its first token until 3.7 s while the document's prompt
    is processed (0.6 s to 3.6 s): 2.6 s of its TTFT was held by a longer prompt. A chat
    whose prompt is as long as another's sent with it is not held by it; overlapping longer
    prompts count once."""
    held = request(3, 3.7, [0.02] * 4, submit_s=1.0, prompt=40, prompt_s=0.1)
    found = stalls_of([STEADY, DOCUMENT, held])
    assert found[held.key].ttft_held_s == pytest.approx(2.6)
    assert found[STEADY.key].ttft_held_s == 0.0  # its prompt was done before the document's
    assert found[DOCUMENT.key].ttft_held_s == 0.0  # nothing longer
    twin = request(4, 0.1, [0.02] * 20)
    assert stalls_of([STEADY, twin])[STEADY.key].ttft_held_s == 0.0
    second = request(5, 3.0, [0.02, 0.02], submit_s=0.5, prompt=900, prompt_s=2.5)
    both = stalls_of([STEADY, DOCUMENT, second, held])
    assert both[held.key].ttft_held_s == pytest.approx(2.6)
    assert figures([STEADY, DOCUMENT, held]).ttft_held_max_s == pytest.approx(2.6)


def test_no_stream_to_judge_and_no_stall():
    assert figures([]) == StallFigures()
    short = figures([request(0, 0.1, [0.02, 0.02])])
    assert short == StallFigures(ttft_held_max_s=0.0)
    calm = figures([request(0, 0.1, [0.02] * 10)])
    assert (calm.stalled_stream_share, calm.stall_max_s, calm.stalled_s) == (0.0, None, 0.0)
    assert calm.gaps_within_share == 1.0 and calm.stalled_by_prompts_share is None
    untimed = figures([request(0, 0.1, [0.02] * 10, prompt_s=None)])
    assert untimed.ttft_held_max_s is None  # the server timed no prompt


def test_the_cause_figures_are_the_longest_stalls():
    """The cause figures are the longest stall's: none where no prompt covered it, though a
    shorter stall had one."""
    early = request(2, 0.5, [0.02, 0.02], submit_s=0.35, prompt=500, prompt_s=0.4)
    found = figures([FROZEN, early])  # 0.2 s of the first stall's 2 s (0.3 s to 2.3 s)
    assert found.stall_max_s == pytest.approx(2.0)
    assert found.stall_cause_tokens is None and found.stalled_by_prompts_share == 0.0
    second = request(2, 3.46, [0.02, 0.02], submit_s=2.4, prompt=500, prompt_s=1.0)  # the 2nd
    found = figures([FROZEN, second])
    assert found.stalled_by_prompts_share == pytest.approx(1 / 3)
    assert found.stall_cause_tokens is None and found.stall_cause_streams is None
