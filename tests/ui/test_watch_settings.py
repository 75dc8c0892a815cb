"""The window's watch settings are read as ``workbench watch``'s flags are: the same parsers,
the same bounds (the engine's, which both read), the same words, each error one line naming
the field. Each bound and a step past it are typed into both, so that a bound or a message
changed for one alone fails here."""

from __future__ import annotations

import argparse

import pytest

from workbench.cli.watch_commands import WATCH_FOR, _interval
from workbench.engine.tune.slo_targets import parse_slos
from workbench.engine.watch.watcher import MIN_INTERVAL_S, Endpoints
from workbench.ui.watch_settings import (
    INTERVAL_S,
    WatchSettings,
    WatchSettingsError,
    WatchTexts,
    duration_s,
    interval_s,
    read_settings,
    slos_of,
    url_of,
)


def _cli(flag, text: str) -> float | str:
    try:
        return flag(text)
    except argparse.ArgumentTypeError as exc:
        return str(exc)


def _window(read, text: str) -> float | str | None:
    try:
        return read(text)
    except WatchSettingsError as exc:
        field, _, words = str(exc).partition(": ")
        assert field == exc.field and "\n" not in words
        return words


@pytest.mark.parametrize(
    "text",
    [f"{MIN_INTERVAL_S:g}", "0.2", "60", "0.019", "0.01", "60.5", "0", "-1", "x", "nan", "inf"],
)
def test_the_interval_is_taken_and_refused_as_the_flag_takes_it(text):
    assert _window(interval_s, text) == _cli(_interval, text)


@pytest.mark.parametrize(
    "text", ["1", "1s", "90", "10m", "1.5h", "168h", "0", "0.5", "168.1h", "-5", "10x", "inf"]
)
def test_the_duration_is_taken_and_refused_as_for_takes_it(text):
    assert _window(duration_s, text) == _cli(WATCH_FOR, text)


def test_the_bounds_are_the_flags():
    """Each end of each bound taken, a step past it refused, on both front ends."""
    for read, flag, low, high in (
        (interval_s, _interval, MIN_INTERVAL_S, 60.0),
        (duration_s, WATCH_FOR, WATCH_FOR.low, WATCH_FOR.high),
    ):
        for value in (low, high):
            assert _window(read, repr(value)) == _cli(flag, repr(value)) == value
        for value in (low * 0.99, high * 1.01):
            assert isinstance(_window(read, repr(value)), str)
            assert _window(read, repr(value)) == _cli(flag, repr(value))


def test_empty_is_the_flag_not_given():
    assert read_settings(WatchTexts("", "", "", "", "")) == WatchSettings()
    assert WatchSettings().interval_s == INTERVAL_S == 0.1  # the flag's default
    assert read_settings(WatchTexts()) == WatchSettings()


def test_slos_are_the_commands_several_apart_by_spaces_or_commas():
    typed = ["ttft_p90:3000", "e2el_p99:20000", "tpot_p50:200"]
    assert slos_of(" ttft_p90:3000  e2el_p99:20000,tpot_p50:200 ") == parse_slos(typed)
    assert slos_of("") == ()


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "e2e_p99:20000",
            "SLOs: 'e2e_p99:20000': the metric is one of ttft, tpot, itl, e2el, stall, not 'e2e'",
        ),
        ("ttft_p90", "SLOs: 'ttft_p90': write METRIC_PCT:MS, e.g. ttft_p90:2000"),
        ("ttft_p90:0", "SLOs: 'ttft_p90:0': the limit is a time above 0 ms, not '0'"),
        ("ttft_p90:1 ttft_p90:2", "SLOs: ttft_p90 is given twice: give each limit once"),
    ],
)
def test_a_bad_slo_is_the_parsers_line_for_the_field(text, line):
    with pytest.raises(WatchSettingsError) as caught:
        read_settings(WatchTexts(slos=text))
    assert str(caught.value).startswith(line) and caught.value.field == "SLOs"
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("field", "text", "line"),
    [
        ("/slots URL", "localhost:9001/slots", "must start with http:// or https://"),
        ("/metrics URL", "http:///metrics", "names no host"),
        ("/metrics URL", "http://127.0.0.1:99999/metrics", "the port must be a whole number"),
    ],
)
def test_a_bad_url_is_one_line_naming_its_field(field, text, line):
    texts = WatchTexts(slots_url=text) if field == "/slots URL" else WatchTexts(metrics_url=text)
    with pytest.raises(WatchSettingsError) as caught:
        read_settings(texts)
    assert str(caught.value).startswith(f"{field}: ") and line in str(caught.value)
    assert caught.value.field == field


def test_the_urls_are_where_the_endpoints_are_read():
    base = "http://127.0.0.1:8080"
    settings = read_settings(WatchTexts(metrics_url=" http://127.0.0.1:9001/metrics "))
    assert settings.endpoints(base) == Endpoints.of(base, None, "http://127.0.0.1:9001/metrics")
    assert settings.endpoints(base).describe(base) == "metrics from http://127.0.0.1:9001/metrics"
    assert url_of("/slots URL", "") is None


def test_the_first_field_wrong_is_said():
    with pytest.raises(WatchSettingsError) as caught:
        read_settings(WatchTexts("0.001", "0", "x", "y", "z"))
    assert caught.value.field == "Interval"
    with pytest.raises(WatchSettingsError) as caught:
        read_settings(WatchTexts("0.5", "0", "x"))
    assert str(caught.value) == (
        "For: must be a time from 1 s to 168 h (90, 90s, 10m or 1h), got '0'"
    )


def test_the_pace_is_said_as_the_command_says_it():
    assert WatchSettings(0.2, 90.0).pace() == "every 0.2 s; for 90 s"
    assert WatchSettings().pace() == "every 0.1 s; until Stop"
