"""The numbers a user types on a command's flags: each declared as a pydantic type, beside the
settings'.

Each flag's type is read from its text (a number, ``WIDTHxHEIGHT``, ``10m``), then validated
strictly by pydantic against its declaration (``annotated_types``' ``Ge``, ``Gt``, ``Le``; a
setting's own, for a flag that takes a setting's value): a wrong one stops parsing with one
line that names the flag (argparse adds it), the value and what is allowed, in words derived
from the same declaration. (An experiment's settings, given as flags to ``workbench run`` too,
are declared in ``engine/config/experiment.py`` and converted by ``Field.from_text``.)
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Annotated, Any

from annotated_types import Ge, Gt, Le

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.validation import shown, validated
from workbench.engine.config.experiment import MAX_CONFIGURATIONS
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import (
    Field,
    Finite,
    Int,
    as_typed,
    field_named,
    seconds_from_text,
    time_refused,
)
from workbench.engine.config.settings import Number as SettingNumber
from workbench.engine.config.workloads import TraceWorkload
from workbench.engine.tune.records import TRACE_WINDOW, WINDOW_TIMES


def _text(value: float | None) -> str:
    """A bound as typed (10000000, not 1e+07); none as empty."""
    return "" if value is None else as_typed(value)


@dataclass(frozen=True)
class Number:
    """A number a flag takes: ``kind`` (int or float) within ``constraints`` (``Ge``, ``Gt``,
    ``Le``), finite; or a setting's value (``setting``), which its declaration validates
    first, so the flag never allows what an experiment file may not, and ``constraints`` may
    narrow (a plan's context cannot be 0, 'the model's')."""

    kind: type[int] | type[float]
    constraints: tuple[Any, ...] = ()
    setting: Field | None = None

    @classmethod
    def of_setting(cls, name: str, *narrower: Any) -> Number:
        return cls(int, narrower, field_named(ServerSettings, name))

    def __call__(self, text: str) -> int | float:
        try:
            value = self.kind(text)
            if self.setting is not None:
                value = self.setting.validated(value)
            declared: Any = Int if self.kind is int else FiniteNumber
            if self.constraints:
                declared = Annotated[declared, *self.constraints]
            return validated(declared, value, "flag")
        except (ValueError, WorkbenchError):
            raise argparse.ArgumentTypeError(
                f"must be {self.describe()}, got {shown(text)}"
            ) from None

    def _bound(self, kinds: tuple[type, ...]) -> tuple[float | None, bool]:
        """The tightest declared bound of these kinds, and whether it excludes itself."""
        for c in self.constraints:
            if isinstance(c, kinds):
                return next(
                    v for k in ("ge", "gt", "le") if (v := getattr(c, k, None)) is not None
                ), isinstance(c, Gt)
        found = self.setting.range if self.setting is not None else None
        if found is None:
            return None, False
        return (found.low if Le not in kinds else found.high), False

    @property
    def low(self) -> float | None:
        return self._bound((Ge, Gt))[0]

    @property
    def high(self) -> float | None:
        return self._bound((Le,))[0]

    def describe(self) -> str:
        """What is allowed, in words: 'a whole number from 50 to 1200'."""
        (least, above), most = self._bound((Ge, Gt)), self.high
        words = ["a whole number" if self.kind is int else "a number"]
        low, high = _text(least), _text(most)
        if low and high and not above:
            words.append(f"from {low} to {high}")
        else:
            if low:
                words.append(f"{'above' if above else 'at least'} {low}")
            if high:
                words.append(f"{'and ' if low else ''}at most {high}")
        also = self.setting.range.also if self.setting and self.setting.range else ()
        words += [f"or {_text(v)}" for v in also]
        return " ".join(words)


FiniteNumber = Annotated[SettingNumber, Finite()]


@dataclass(frozen=True)
class Listed:
    """Comma-separated numbers, each a ``Number``: at least one, at most ``most`` (a table
    of every pair of two lists grows as their product: 20,000 of each kept ``plan`` busy
    past 30 s)."""

    each: Number
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
        declared = tuple[
            Annotated[Int, Ge(self.min_width), Le(self.max_side)],
            Annotated[Int, Ge(self.min_height), Le(self.max_side)],
        ]
        try:
            width, height = (int(v) for v in text.lower().split("x"))
            return validated(declared, (width, height), "flag")
        except (ValueError, WorkbenchError):
            raise argparse.ArgumentTypeError(
                f"must be WIDTHxHEIGHT from {self.min_width}x{self.min_height} to "
                f"{self.max_side}x{self.max_side} pixels, got {shown(text)}"
            ) from None


@dataclass(frozen=True)
class Duration:
    """A time in seconds, written ``90``, ``90s``, ``10m`` or ``1h`` (the settings'
    ``seconds_from_text``, which the window's fields read times with too): at least
    ``low_s`` and at most ``high_s``; or a setting's value in seconds (``of_setting``),
    which its declaration judges, as ``Number``'s setting is, and whose bounds it names."""

    low_s: float = 0.0
    high_s: float = 0.0
    setting: Field | None = None

    @classmethod
    def of_setting(cls, f: Field) -> Duration:
        assert f.range is not None  # a time setting is a bounded number
        return cls(setting=f)

    @property
    def low(self) -> float:
        """The least allowed, as a refusal says it (a setting's: its declared bound)."""
        found = self.setting.range if self.setting is not None else None
        return self.low_s if found is None else found.low

    @property
    def high(self) -> float:
        """The most allowed, as a refusal says it (a setting's: its declared bound)."""
        found = self.setting.range if self.setting is not None else None
        return self.high_s if found is None else found.high

    def __call__(self, text: str) -> float:
        try:
            seconds = seconds_from_text(text)
            if self.setting is None:
                declared = Annotated[FiniteNumber, Ge(self.low_s), Le(self.high_s)]
                return validated(declared, seconds, "flag")
            if not math.isfinite(seconds):  # more digits than a float holds
                raise ValueError(f"{shown(text)} is not a finite time")
            return self.setting.validated(seconds)
        except (ValueError, WorkbenchError):
            raise argparse.ArgumentTypeError(time_refused(text, self.low, self.high)) from None


def trace_window(name: str) -> Duration | Number:
    """The flag of a setting of a trace's window (``TRACE_WINDOW``): the trace setting's
    value within its declared bounds, which the Tune tab's field takes too; a time
    (``WINDOW_TIMES``) read as one, ``10m``."""
    f = field_named(TraceWorkload, name)
    if name in WINDOW_TIMES:
        return Duration.of_setting(f)
    return Number(int if f.kind is int else float, (), f)


# Every bounded number of the commands' flags.
SECONDS = Number(float, (Gt(0),))  # an SLO's time limit
AT_OR_AFTER_START_S = Number(float, (Ge(0),))  # a moment of a session
DECODE_TOK_S = Number(float, (Gt(0),))
BANDWIDTH_GBS = Number(float, (Gt(0),))
MEMORY_GIB = Number(float, (Gt(0),))
OVERHEAD_MIB = Number(float, (Ge(0),))
TOKENS = Number(int, (Ge(0),))
USERS = Number(int, (Ge(1),))
SHARE_ONLINE = Number(float, (Gt(0), Le(1)))
PLAN_CTX = Listed(Number.of_setting("ctx", Ge(1)))
PLAN_SLOTS = Listed(Number.of_setting("slots"))  # -1: auto, as llama-server's -np
PLAN_PER_SLOT = Number.of_setting("kv_unified_per_slot")
PLAN_UBATCH = Number.of_setting("ubatch_size")
DPI = Number(int, (Ge(50), Le(1200)))
CHART_SIZE = Size(200, 150)  # a chart's widgets lay out down to this
WINDOW_SIZE = Size(960, 540)  # the window's own minimum at the default font is 956x533
FONT_PT = Number(int, (Ge(6), Le(72)))
BUDGET = Duration(1, 24 * 3600)  # a tune's whole search
# A tune's window of a recorded trace (its start, its duration, its rows, its time scale),
# each within its trace setting's bounds, as the Tune tab's fields take them.
TRACE_POINT, TRACE_STRETCH, TRACE_ROWS, TIME_SCALE = map(trace_window, TRACE_WINDOW)


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
