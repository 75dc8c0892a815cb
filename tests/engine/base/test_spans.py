"""Spans laid over a stretch of time: overlaps counted once, what lies outside cut off."""

from workbench.engine.base.spans import covered_ns


def test_overlapping_spans_count_once_and_are_cut_to_the_stretch():
    assert covered_ns([], 0, 10) == 0
    assert covered_ns([(2, 5), (4, 8)], 0, 10) == 6  # 2..8
    assert covered_ns([(2, 5), (3, 4)], 0, 10) == 3  # one inside another
    assert covered_ns([(-5, 3), (8, 20)], 0, 10) == 5  # 0..3 and 8..10
    assert covered_ns([(12, 20), (5, 5)], 0, 10) == 0  # outside, and empty
