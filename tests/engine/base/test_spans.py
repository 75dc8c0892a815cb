"""Spans laid over a stretch of time: overlaps counted once, what lies outside cut off."""

from workbench.engine.base.spans import SpanIndex, covered_ns


def test_overlapping_spans_count_once_and_are_cut_to_the_stretch():
    assert covered_ns([], 0, 10) == 0
    assert covered_ns([(2, 5), (4, 8)], 0, 10) == 6  # 2..8
    assert covered_ns([(2, 5), (3, 4)], 0, 10) == 3  # one inside another
    assert covered_ns([(-5, 3), (8, 20)], 0, 10) == 5  # 0..3 and 8..10
    assert covered_ns([(12, 20), (5, 5)], 0, 10) == 0  # outside, and empty


def test_an_index_finds_what_overlaps_a_stretch_each_once():
    """Spans over several buckets are found once; one touching the stretch's edge is not in
    it; a span too long for buckets (a request that never ended) is found all the same."""
    index = SpanIndex([(0, 25, "a"), (30, 31, "b"), (40, 2**62, "never")], width_ns=10)
    assert index.overlapping(5, 22) == ["a"]
    assert sorted(index.overlapping(20, 35)) == ["a", "b"]
    assert index.overlapping(25, 30) == []  # a ends at 25, b begins at 30
    assert index.overlapping(10**9, 10**9 + 1) == ["never"]
    assert sorted(index.overlapping(0, 10**12)) == ["a", "b", "never"]  # a stretch of many
