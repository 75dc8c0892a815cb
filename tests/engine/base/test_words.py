"""Counts in words: one plural for every front end."""

from __future__ import annotations

import pytest

from workbench.engine.base.words import plural


@pytest.mark.parametrize(
    ("count", "words"),
    [
        (0, "0 polls"),
        (1, "1 poll"),
        (2, "2 polls"),
        (999, "999 polls"),
        (2286, "2,286 polls"),
        (1_000_000, "1,000,000 polls"),
        (-1500, "-1,500 polls"),
    ],
)
def test_a_count_is_said_with_its_noun_and_thousands_grouped(count, words):
    assert plural(count, "poll") == words


def test_one_is_singular_and_a_noun_of_several_words_takes_its_s_at_the_end():
    assert plural(1, "verification run") == "1 verification run"
    assert plural(1200, "verification run") == "1,200 verification runs"
