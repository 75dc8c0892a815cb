"""The numbers a command's flags take: read from text, then validated by pydantic against
their declaration; a flag that takes a server setting's value (``plan --slots``, ``plan
--ctx``) is validated by the setting's own declaration, and says its bounds in words."""

from __future__ import annotations

import argparse

import pytest
from annotated_types import Ge, Le

from workbench.cli.bounds import (
    BUDGET,
    DPI,
    PLAN_CTX,
    PLAN_SLOTS,
    SECONDS,
    Number,
    trace_window,
)
from workbench.engine.config.settings import as_typed, field_named
from workbench.engine.config.workloads import TraceWorkload
from workbench.engine.tune.records import TRACE_WINDOW


def test_a_settings_flag_allows_what_its_schema_allows_and_says_the_bounds():
    assert PLAN_SLOTS("1,4,-1") == [1, 4, -1]  # -1: auto, as the schema allows
    assert PLAN_CTX("1,8192") == [1, 8192]
    with pytest.raises(argparse.ArgumentTypeError, match="from 1 to 1024 or -1"):
        PLAN_SLOTS("0")
    with pytest.raises(argparse.ArgumentTypeError, match="from 1 to 10000000"):
        PLAN_CTX("0")  # narrower than the schema: a plan's context cannot be 'the model's'


def test_the_settings_declaration_decides_for_a_settings_flag():
    """What the setting's declaration refuses, the flag refuses, even where its own
    constraints would allow it: -2 slots is no auto."""
    wide = Number.of_setting("slots", Ge(-5), Le(5000))
    assert wide("3") == 3 and wide("-1") == -1
    for text in ("-2", "2000", "2.5", "true"):
        with pytest.raises(argparse.ArgumentTypeError, match="got"):
            wide(text)


@pytest.mark.parametrize(
    ("flag", "text", "words"),
    [
        (SECONDS, "0", "must be a number above 0, got '0'"),
        (SECONDS, "nan", "must be a number above 0, got 'nan'"),
        (SECONDS, "inf", "must be a number above 0, got 'inf'"),
        (DPI, "49", "must be a whole number from 50 to 1200, got '49'"),
        (DPI, "72.0", "must be a whole number from 50 to 1200, got '72.0'"),
    ],
)
def test_a_number_is_read_then_validated_and_refused_in_words(flag, text, words):
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        flag(text)
    assert str(caught.value) == words
    assert SECONDS("0.5") == 0.5 and DPI("300") == 300


def test_a_time_flag_says_its_bounds_in_hours_where_whole():
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        BUDGET("25h")
    assert str(caught.value) == "must be a time from 1 s to 24 h (90, 90s, 10m or 1h), got '25h'"
    assert BUDGET("1.5m") == 90


@pytest.mark.parametrize("name", TRACE_WINDOW)
def test_a_trace_windows_flag_takes_its_trace_settings_bounds(name):
    """Declared once, in the trace settings: the flag allows their least and most, and
    refuses what is past either, or more digits than a number holds, naming both."""
    bounds = field_named(TraceWorkload, name).range
    flag = trace_window(name)
    low, high = as_typed(bounds.low), as_typed(bounds.high)
    assert flag(low) == bounds.low and flag(high) == bounds.high
    for past in (as_typed(bounds.high * 2), "9" * 400):
        with pytest.raises(argparse.ArgumentTypeError) as caught:
            flag(past)
        assert f"from {low}" in str(caught.value) and f"to {high}" in str(caught.value)
