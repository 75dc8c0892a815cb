"""The bounds of every number a user types on a command's flags, beside the settings'.

Each bounded value is an argparse ``type``: a wrong one stops parsing with one line that names
the flag (argparse adds it), the value and what is allowed. (An experiment's settings, given
as flags to ``workbench run`` too, keep their bounds in their schema,
``engine/config/experiment.py``.)
"""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.experiment import MAX_CONFIGURATIONS, ServerSettings
from workbench.engine.config.settings import Field, field_named, shown


@dataclass(frozen=True)
class Bounded:
    """A number within bounds: ``low`` and ``high`` are allowed (``low`` itself not when
    ``above``), and so is any of ``also`` (e.g. -1 for 'auto'). A setting's value is checked
    by the setting's own schema first (``schema``), so the flag can never allow what an
    experiment file may not; the bounds here then say it in words, and may narrow it."""

    kind: type[int] | type[float]
    low: float | None = None
    high: float | None = None
    above: bool = False
    also: tuple[float, ...] = ()
    schema: Field | None = None

    def __call__(self, text: str) -> int | float:
        try:
            value = self.kind(text)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and self.allows(value):
            return value
        raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {shown(text)}")

    @classmethod
    def of_setting(cls, name: str, low: float | None = None) -> Bounded:
        """A server setting's own bounds, from its schema (``ServerSettings``), so a flag
        that takes the same value (``plan --slots``) never drifts from it; ``low`` narrows
        the floor where the flag means less (a plan's context cannot be 0, 'the model's')."""
        schema = field_named(ServerSettings, name)
        s = schema.setting
        return cls(int, s.low if low is None else low, s.high, also=s.also, schema=schema)

    def allows(self, value: float) -> bool:
        if self.schema is not None and self.schema.problem(value) is not None:
            return False
        if value in self.also:
            return True
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            return False
        return self.high is None or value <= self.high

    def describe(self) -> str:
        """What is allowed, in words: 'a whole number from 50 to 1200'."""
        words = ["a whole number" if self.kind is int else "a number"]
        low, high = _text(self.low), _text(self.high)
        if low and high and not self.above:
            words.append(f"from {low} to {high}")
        else:
            if low:
                words.append(f"{'above' if self.above else 'at least'} {low}")
            if high:
                words.append(f"{'and ' if low else ''}at most {high}")
        words += [f"or {_text(v)}" for v in self.also]
        return " ".join(words)


def _text(value: float | None) -> str:
    """A bound as typed: 10000000, not 1e+07; none as empty."""
    if value is None:
        return ""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Listed:
    """Comma-separated numbers, each ``Bounded``: at least one, at most ``most`` (a table
    of every pair of two lists grows as their product: 20,000 of each kept ``plan`` busy
    past 30 s)."""

    each: Bounded
    most: int = 100

    def __call__(self, text: str) -> list[int | float]:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"needs at least one value, got {shown(text)}")
        if len(parts) > self.most:
            raise argparse.ArgumentTypeError(
                f"takes at most {self.most} values, got {len(parts):,} ({shown(parts)})"
            )
        try:
            return [self.each(p) for p in parts]
        except argparse.ArgumentTypeError:
            what = self.each.describe()
            raise argparse.ArgumentTypeError(
                f"takes comma-separated values, each {what}, got {shown(text)}"
            ) from None


@dataclass(frozen=True)
class Size:
    """``WIDTHxHEIGHT`` in pixels, as (width, height): at least ``min_width`` by
    ``min_height`` (what the widget is drawn at, not silently its own minimum) and at most
    ``max_side`` a side (what Qt can paint in memory)."""

    min_width: int
    min_height: int
    max_side: int = 8192

    def __call__(self, text: str) -> tuple[int, int]:
        try:
            width, height = (int(v) for v in text.lower().split("x"))
        except ValueError:
            width = height = 0
        if self.min_width <= width <= self.max_side and self.min_height <= height <= self.max_side:
            return width, height
        raise argparse.ArgumentTypeError(
            f"must be WIDTHxHEIGHT from {self.min_width}x{self.min_height} to "
            f"{self.max_side}x{self.max_side} pixels, got {shown(text)}"
        )


@dataclass(frozen=True)
class Duration:
    """A time in seconds, written ``90``, ``90s``, ``10m`` or ``1h``: at least ``low_s`` and
    at most ``high_s``."""

    low_s: float
    high_s: float

    def __call__(self, text: str) -> float:
        found = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([smh]?)\s*", text.lower())
        seconds = math.nan
        if found is not None:
            seconds = float(found[1]) * {"": 1, "s": 1, "m": 60, "h": 3600}[found[2]]
        if math.isfinite(seconds) and self.low_s <= seconds <= self.high_s:
            return seconds
        raise argparse.ArgumentTypeError(
            f"must be a time from {self.low_s:g} s to {self.high_s / 3600:g} h (90, 90s, "
            f"10m or 1h), got {shown(text)}"
        )


# Every bounded number of the commands' flags.
SECONDS = Bounded(float, 0, above=True)  # an SLO's time limit
AT_OR_AFTER_START_S = Bounded(float, 0)  # a moment of a session
DECODE_TOK_S = Bounded(float, 0, above=True)
BANDWIDTH_GBS = Bounded(float, 0, above=True)
MEMORY_GIB = Bounded(float, 0, above=True)
OVERHEAD_MIB = Bounded(float, 0)
TOKENS = Bounded(int, 0)
USERS = Bounded(int, 1)
SHARE_ONLINE = Bounded(float, 0, 1, above=True)
PLAN_CTX = Listed(Bounded.of_setting("ctx", low=1))
PLAN_SLOTS = Listed(Bounded.of_setting("slots"))  # -1: auto, as llama-server's -np
DPI = Bounded(int, 50, 1200)
CHART_SIZE = Size(200, 150)  # a chart's widgets lay out down to this
WINDOW_SIZE = Size(960, 540)  # the window's own minimum at the default font is 956x533
FONT_PT = Bounded(int, 6, 72)
BUDGET = Duration(1, 24 * 3600)  # a tune's whole search


# A sweep `run` asks to be confirmed: one of more configurations than LARGE_SWEEP runs only
# with LARGE_SWEEP_FLAG, and is told its duration first (an experiment may make at most
# MAX_CONFIGURATIONS, engine/config/experiment.py).
LARGE_SWEEP = 100
LARGE_SWEEP_FLAG = "--large-sweep"
CONFIGURATION_S = 2.0
"""The least a configuration takes before its measured requests: its server's start and
warm-up. Measured with the default model on the project's 2-core test machine: 2.1 to 7 s a
configuration (``run --ctx 2048,...,2057 --requests 1 --max-tokens 1``, server states);
a larger model starts slower."""


def duration_words(seconds: float) -> str:
    """``3 min``, ``5 h 33 min``, ``2 days 4 h``: a duration as an estimate reads."""
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{max(minutes, 1)} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} days {hours} h" if hours else f"{days} days"


def confirm_sweep(configurations: int, confirmed: bool) -> str | None:
    """A sweep of more than ``LARGE_SWEEP`` configurations: its estimate, to say before it
    runs, or, unless ``confirmed``, a ``WorkbenchError`` saying it and the flag that runs it.
    None for a smaller sweep."""
    if configurations <= LARGE_SWEEP:
        return None
    estimate = (
        f"this sweep makes {configurations:,} configurations (at most {MAX_CONFIGURATIONS:,}): "
        f"at least {duration_words(configurations * CONFIGURATION_S)} before any measured "
        f"request (each starts its server and warms it up, about {CONFIGURATION_S:g} s with "
        "the default model; `workbench predict` estimates the requests' own time)"
    )
    if not confirmed:
        raise WorkbenchError(f"{estimate}: give {LARGE_SWEEP_FLAG} to run it")
    return estimate
