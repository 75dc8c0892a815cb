"""Generation stalls on constructed streams whose answer is known."""

from __future__ import annotations

import pytest

from workbench.engine.figures.per_request import RequestMetrics
from workbench.engine.figures.stalls import StallFigures, stall_figures, stalled_gaps


def stream(gaps: list[float], prompt: int | None = 100, cached: int | None = 0) -> RequestMetrics:
    return RequestMetrics(
        ttft_s=0.1,
        e2e_s=0.1 + sum(gaps),
        output_tokens=len(gaps) + 1,
        token_source="usage",
        tpot_s=None,
        decode_tok_s=None,
        queue_wait_s=None,
        prefill_s=None,
        itl_s=gaps,
        cache_hit=False,
        prompt_tokens=prompt,
        cached_tokens=cached,
    )


def test_a_stall_is_a_gap_far_above_the_streams_own_pace():
    """A 24 ms stream frozen 9 s and 1.5 s: two stalls; decoding jitter of 2.6 times its
    median is not one, nor a 0.2 s hiccup of a fast stream (the floor)."""
    assert stalled_gaps([0.024] * 20 + [9.0, 0.062, 1.5]) == [9.0, 1.5]
    assert stalled_gaps([0.02] * 20 + [0.052]) == []
    assert stalled_gaps([0.005] * 20 + [0.2]) == []
    assert stalled_gaps([0.005] * 20 + [0.3]) == [0.3]
    assert stalled_gaps([0.02, 5.0, 0.02]) is None  # too few gaps to have a pace


def test_a_repeats_stall_figures():
    """Two chats, one frozen 2 s and 1 s, one never; a 1,000-token document (200 of them
    cached) with too few gaps to be judged."""
    frozen = stream([0.02] * 18 + [2.0, 1.0])
    steady = stream([0.02] * 20)
    document = stream([0.02, 0.02], prompt=1000, cached=200)
    figures = stall_figures([frozen, steady, document])
    assert figures.stalled_stream_share == 0.5
    assert figures.stall_max_s == 2.0
    assert figures.stall_p99_s == pytest.approx(1.99)
    assert figures.stalled_s == 3.0
    assert figures.stalled_s_per_1k_prompt == pytest.approx(1000 * 3.0 / (100 + 100 + 800))
    assert figures.gaps_within_share == 38 / 40


def test_no_stream_to_judge_and_no_stall():
    assert stall_figures([]) == StallFigures()
    assert stall_figures([stream([0.02, 0.02])]) == StallFigures()
    calm = stall_figures([stream([0.02] * 10)])
    assert (calm.stalled_stream_share, calm.stall_max_s, calm.stalled_s) == (0.0, None, 0.0)
    assert calm.gaps_within_share == 1.0
