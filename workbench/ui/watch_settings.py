"""What the window's watch is given before it starts, as ``workbench watch`` is given it on
its flags: the interval between polls (``--interval``), how long (``--for``), the SLOs to
judge it on at the end (``--slo``) and, behind a proxy, the server's own ``/slots`` and
``/metrics`` (``--slots-url``, ``--metrics-url``). Plain Python, no Qt: the settings dialog
reads its fields with ``read_settings`` and the window keeps ``WatchTexts``, what was typed.

Each is read by the same parser the command's flag reads it with (``float`` for the
interval, the settings' ``seconds_from_text`` for a time, ``parse_slos`` for the SLOs,
``Endpoints.of`` for the URLs) and held to the same bounds; what is wrong is one line that
names the field, worded as the flag's error is.

The bounds are the engine's (``watcher.interval_from_text``, ``WATCH_FOR_S``), which the
command reads too; ``tests/ui/test_watch_settings.py`` types each bound and a step past it
into both and fails where they differ.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.settings import seconds_from_text, time_refused
from workbench.engine.tune.records import SloTarget
from workbench.engine.tune.slo_targets import parse_slos
from workbench.engine.watch.watcher import (
    INTERVAL_S,
    WATCH_FOR_S,
    Endpoints,
    interval_from_text,
)

FOR_LOW_S, FOR_HIGH_S = WATCH_FOR_S
SLO_EXAMPLE = "ttft_p90:3000 e2el_p99:20000"
FIELDS = ("Interval", "For", "SLOs", "/slots URL", "/metrics URL")
"""Each field's name, as the dialog labels it and an error line begins."""


class WatchSettingsError(WorkbenchError):
    """A setting typed that is not one: one line, naming the field (``field``)."""

    def __init__(self, field: str, words: str) -> None:
        super().__init__(f"{field}: {words}")
        self.field = field


@dataclass(frozen=True)
class WatchTexts:
    """The settings as typed (the app remembers them for its session): an empty one is the
    flag not given (the default interval, until Stop, no SLOs, at the address)."""

    interval: str = f"{INTERVAL_S:g}"
    duration: str = ""
    slos: str = ""
    slots_url: str = ""
    metrics_url: str = ""


@dataclass(frozen=True)
class WatchSettings:
    """A watch's settings, read: every ``interval_s`` for ``duration_s`` (None: until Stop),
    ``slos`` judged at its end, ``/slots`` and ``/metrics`` read where ``slots_url`` and
    ``metrics_url`` say (None: at the watched address)."""

    interval_s: float = INTERVAL_S
    duration_s: float | None = None
    slos: tuple[SloTarget, ...] = ()
    slots_url: str | None = None
    metrics_url: str | None = None

    def endpoints(self, base_url: str) -> Endpoints:
        """Where the watch of ``base_url`` reads each endpoint."""
        return Endpoints.of(base_url, self.slots_url, self.metrics_url)

    def pace(self) -> str:
        """``every 0.2 s; for 90 s``, as the command's first line says it."""
        until = "until Stop" if self.duration_s is None else f"for {self.duration_s:g} s"
        return f"every {self.interval_s:g} s; {until}"


def interval_s(text: str) -> float:
    """The seconds between polls, as ``--interval`` reads them (empty: the default)."""
    if not text.strip():
        return INTERVAL_S
    try:
        return interval_from_text(text)
    except ValueError as exc:
        raise WatchSettingsError("Interval", str(exc)) from None


def duration_s(text: str) -> float | None:
    """How long the watch goes on, as ``--for`` reads it (empty: until Stop)."""
    if not text.strip():
        return None
    try:
        seconds = seconds_from_text(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and FOR_LOW_S <= seconds <= FOR_HIGH_S):
        raise WatchSettingsError("For", time_refused(text, FOR_LOW_S, FOR_HIGH_S))
    return seconds


def slos_of(text: str) -> tuple[SloTarget, ...]:
    """The SLOs typed as ``--slo`` takes each, several apart by spaces or commas; the
    engine's ``parse_slos`` reads them, and its line is said for the field."""
    parts = [part for part in re.split(r"[\s,]+", text.strip()) if part]
    if not parts:
        return ()
    try:
        return parse_slos(parts)
    except WorkbenchError as exc:
        raise WatchSettingsError("SLOs", str(exc).removeprefix("--slo ")) from None


def url_of(field: str, text: str) -> str | None:
    """An endpoint's own URL, as ``Endpoints.of`` takes it (empty: at the address)."""
    url = text.strip()
    if not url:
        return None
    try:
        Endpoints.of("", **{"slots_url" if field == "/slots URL" else "metrics_url": url})
    except WorkbenchError as exc:
        raise WatchSettingsError(field, str(exc)) from None
    return url


def read_settings(texts: WatchTexts) -> WatchSettings:
    """The settings typed, read and checked, each field in turn: the first that is wrong
    raises ``WatchSettingsError``, one line."""
    return WatchSettings(
        interval_s(texts.interval),
        duration_s(texts.duration),
        slos_of(texts.slos),
        url_of("/slots URL", texts.slots_url),
        url_of("/metrics URL", texts.metrics_url),
    )
