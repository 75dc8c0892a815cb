"""The settings a tune searches, ``--space`` in the settings schema's names:
``slots=1..16; ctx>=4096; cache_type_k=f16,q8_0; flash_attn=on,off; threads``.

A part is ``name=a,b`` (those values), ``name=LOW..HIGH`` (its ends and the doublings
between: ``1..16`` is 1, 2, 4, 8, 16), ``name>=N`` (``>``, ``<=``, ``<`` too: the setting's
usual values within the bound, or N itself where none is) or a bare ``name`` (its usual values
on this machine: threads from the core count). Every value is checked by the setting's own
schema, so a space never holds what an experiment file could not.
"""

from __future__ import annotations

import difflib
import itertools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import Field, fields_of

MAX_CANDIDATES = 4096
DEFAULT_SPACE = "slots"
STALL_SPACE = "slots; batch_size; ubatch_size"
"""The space searched by default for a stall SLO: ``-b`` is the lever of a long prompt's
freeze (its chunk per step) and ``-ub`` what each micro-batch of that chunk costs besides,
so both are searched beside the slots (one calibration ranks every value of both)."""
NOT_SEARCHED = ("model", "port", "extra_args", "startup_timeout_s")
_BOUND = re.compile(r"^([a-z_]+)\s*(>=|<=|>|<)\s*(\S+)$")
_COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">=": lambda v, n: v >= n,
    "<=": lambda v, n: v <= n,
    ">": lambda v, n: v > n,
    "<": lambda v, n: v < n,
}


class SpaceError(WorkbenchError):
    """A ``--space`` part that names no setting, or a value its setting does not take."""


def _cores() -> int:
    return os.cpu_count() or 1


def usual_values(f: Field) -> tuple[Any, ...]:
    """What a bare name searches: a few values of the setting worth trying on this machine."""
    cores = _cores()
    known: dict[str, tuple[Any, ...]] = {
        "slots": (1, 2, 4, 8),
        "ctx": (4096, 8192, 16384),
        "threads": tuple(sorted({max(1, cores // 2), max(1, cores - 1), cores})),
        "batch_size": (256, 512, 1024, 2048),  # 256: a long prompt's freeze, cut (stalls)
        "ubatch_size": (128, 256, 512),
        "cache_type_k": ("f16", "q8_0", "q4_0"),
        "cache_type_v": ("f16", "q8_0", "q4_0"),
        "flash_attn": ("on", "off"),
    }
    if f.name in known:
        return known[f.name]
    if f.kind is bool:
        return (True, False)
    if f.choices:
        return f.choices
    raise SpaceError(f"--space {f.name}: give its values (e.g. {f.name}=a,b or {f.name}=1..8)")


def _searchable() -> dict[str, Field]:
    return {f.name: f for f in fields_of(ServerSettings) if f.name not in NOT_SEARCHED}


def _field(name: str) -> Field:
    known = _searchable()
    if name not in known:
        close = difflib.get_close_matches(name, list(known), n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise SpaceError(f"--space: {name!r} is not a server setting{hint}")
    return known[name]


def _value(f: Field, text: str) -> Any:
    """One value as its setting holds it, converted from text and validated by its
    declaration (an experiment file's value is validated the same way)."""
    try:
        return f.validated(f.from_text(text))
    except ValueError as exc:
        raise SpaceError(f"--space {f.name}: {exc}") from None
    except ExperimentError as exc:
        raise SpaceError(f"--space {str(exc).removeprefix(f'[{f.table}] ')}") from None


def _span(f: Field, low_text: str, high_text: str) -> tuple[Any, ...]:
    low, high = _value(f, low_text), _value(f, high_text)
    if f.kind is not int or low < 1 or high < low:
        raise SpaceError(
            f"--space {f.name}={low_text}..{high_text}: a range is of whole numbers from 1, "
            "low..high"
        )
    values, at = [], low
    while at < high:
        values.append(at)
        at *= 2
    return (*values, high)


def _bounded(f: Field, op: str, text: str) -> tuple[Any, ...]:
    if f.kind not in (int, float):
        raise SpaceError(f"--space {f.name}{op}{text}: a bound is for a number setting")
    bound = _value(f, text)
    kept = tuple(v for v in usual_values(f) if _COMPARE[op](v, bound))
    if kept:
        return kept
    if op in (">=", "<="):
        return (bound,)
    raise SpaceError(f"--space {f.name}{op}{text}: none of its usual values is within it")


def _part(part: str) -> tuple[str, tuple[Any, ...]]:
    if (bound := _BOUND.match(part)) is not None:
        name, op, text = bound.groups()
        return name, _bounded(_field(name), op, text)
    name, sign, given = (p.strip() for p in part.partition("="))
    f = _field(name)
    if not sign:
        return name, usual_values(f)
    if not given:
        raise SpaceError(f"--space {name}=: give a value, a list a,b or a range 1..8")
    if ".." in given:
        low, _, high = given.partition("..")
        return name, _span(f, low.strip(), high.strip())
    values = tuple(_value(f, v.strip()) for v in given.split(","))
    return name, tuple(dict.fromkeys(values))


@dataclass(frozen=True)
class Space:
    """Each searched setting with its values, in the order given."""

    axes: dict[str, tuple[Any, ...]]

    def candidates(self) -> list[dict[str, Any]]:
        """Every combination of the values, the first axis outermost."""
        names = list(self.axes)
        return [
            dict(zip(names, row, strict=True)) for row in itertools.product(*self.axes.values())
        ]


def parse_space(text: str, draft_model: str | None = None, stalls: bool = False) -> Space:
    """``--space`` (empty: ``slots``, its usual values, and ``batch_size`` and
    ``ubatch_size`` with them where an SLO limits ``stalls``), one clear error naming the
    setting for an unknown name or a bad value. With ``draft_model``, every combination is
    tried with that draft model and without one, unless the space names ``draft_model``
    itself."""
    default = STALL_SPACE if stalls else DEFAULT_SPACE
    parts = [p.strip() for p in (text.strip() or default).split(";") if p.strip()]
    axes: dict[str, tuple[Any, ...]] = {}
    for part in parts:
        name, values = _part(part)
        if name in axes:
            raise SpaceError(f"--space {name} is given twice: give each setting once")
        axes[name] = values
    if draft_model and "draft_model" not in axes:
        axes["draft_model"] = ("", draft_model)
    counts = [n for n in ("draft_max", "draft_min") if n in axes]
    if counts and "" in axes.get("draft_model", ("",)):
        raise SpaceError(
            f"--space {counts[0]} needs a draft model in every combination: search it with "
            f'the draft in the space ("draft_model=FILE; {counts[0]}=2,4"), not --draft-model'
        )
    count = 1
    for values in axes.values():
        count *= len(values)
    if count > MAX_CANDIDATES:
        raise SpaceError(
            f"--space holds {count:,} combinations, over the {MAX_CANDIDATES:,} a tune "
            "searches: give fewer values"
        )
    return Space(axes)
