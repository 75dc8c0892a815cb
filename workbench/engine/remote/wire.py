"""Engine events as JSON, and back: what crosses from an agent on another machine.

The far side is untrusted. Encoding is a walk over each event's dataclass fields; decoding
walks the same annotations and checks every value against its field's type (the session
file's own checks, ``store/checks.py``), so no value of a wrong type, no unknown event and
nothing executable reaches the bus. Fields the session does not store as columns (a
request's chunks) travel too.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any

from workbench.engine import events as ev
from workbench.engine.base import untrusted
from workbench.engine.base.records import RequestRecord
from workbench.engine.config.experiment import RunConfig
from workbench.engine.store.checks import WRONG, declared_fields, read_value, typed

# Every event an agent may send, by its name on the wire.
EVENTS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        ev.ExperimentStarted,
        ev.ConfigStarted,
        ev.ServerStateChanged,
        ev.ServerReady,
        ev.RequestSubmitted,
        ev.FirstToken,
        ev.TokenChunkArrived,
        ev.RequestFinished,
        ev.ProcessSample,
        ev.GpuSample,
        ev.MetricsSample,
        ev.SlotsSample,
        ev.SlotMatched,
        ev.ClientLoadMeasured,
        ev.MachineLoadMeasured,
        ev.ServerCounters,
        ev.ConfigFinished,
        ev.Notice,
        ev.PredictionMade,
        ev.ExperimentFinished,
    )
}
# Fields annotated loosely (to keep ``events`` free of import cycles), by what they hold.
_HINTS: dict[tuple[type, str], Any] = {(ev.ConfigStarted, "config"): RunConfig}
MAX_ENTRIES = 100_000  # in any one list or object: a request's chunks are the longest


class WireError(ValueError):
    """What the far side sent is not an event of this protocol (the text says which field)."""


def encode(event: Any) -> dict[str, Any]:
    """``{"type": name, "data": fields}``, every value plain JSON."""
    name = type(event).__name__
    if name not in EVENTS:
        raise TypeError(f"{name} is not sent over the wire")
    return {"type": name, "data": plain(event)}


def decode(message: Any) -> Any:
    """The event ``encode`` made, checked; ``WireError`` names what is wrong."""
    try:
        found = typed(message, dict, "the event")
        name = typed(found.get("type"), str, "the event's type")
        if (cls := EVENTS.get(name)) is None:
            raise ValueError(f"{untrusted.label(name)!r} is no event of this protocol")
        return read_record(cls, typed(found.get("data"), dict, name), name)
    except WRONG as exc:
        raise WireError(str(exc)) from None


def plain(value: Any) -> Any:
    """A record (or any value of one) as plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    return value


def read_record(cls: type, data: dict[str, Any], what: str) -> Any:
    """The record ``cls`` from its fields as JSON, each checked against its annotation."""
    if len(data) > MAX_ENTRIES:
        raise ValueError(f"{what} has {len(data)} fields")
    values = {}
    for f, hint in declared_fields(cls):
        if f.name in data:
            hint = _HINTS.get((cls, f.name), hint)
            values[f.name] = _value(hint, data[f.name], f"{what}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{what} has no {f.name}")
    record = cls(**values)
    if cls is RequestRecord:  # what a server said, bounded as the client bounds it
        usage = None if record.usage is None else untrusted.numbers(record.usage)
        timings = None if record.timings is None else untrusted.numbers(record.timings)
        record = dataclasses.replace(record, usage=usage, timings=timings)
    return record


@functools.cache
def _kind(hint: Any) -> tuple[str, Any]:
    """What a value of ``hint`` is read as: a record, a container or a plain value."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return ("optional", inner)
    if dataclasses.is_dataclass(hint):
        return ("record", hint)
    if origin is tuple and args and args[-1] is not Ellipsis:
        return ("fixed", args)
    if origin in (list, tuple) and (origin is list or args[-1] is Ellipsis):
        return ("sequence", (origin, args[0]))
    if origin is dict:
        return ("mapping", args[1])
    return ("plain", hint)


def _value(hint: Any, value: Any, what: str) -> Any:
    kind, inner = _kind(hint)
    if kind == "optional":
        return None if value is None else _value(inner, value, what)
    if kind == "record":
        return read_record(inner, typed(value, dict, what), what)
    if kind == "fixed":
        items = typed(value, list, what)
        if len(items) != len(inner):
            raise ValueError(f"{what} has {len(items)} entries, not {len(inner)}")
        return tuple(
            _value(h, v, f"{what}[{n}]") for n, (h, v) in enumerate(zip(inner, items, strict=True))
        )
    if kind == "sequence":
        origin, entry = inner
        items = typed(value, list, what)
        if len(items) > MAX_ENTRIES:
            raise ValueError(f"{what} has {len(items)} entries")
        return origin(_value(entry, v, f"{what}[{n}]") for n, v in enumerate(items))
    if kind == "mapping":
        items = typed(value, dict, what)
        if len(items) > MAX_ENTRIES:
            raise ValueError(f"{what} has {len(items)} entries")
        return {typed(k, str, what): _value(inner, v, f"{what}.{k}") for k, v in items.items()}
    return read_value(hint, value, what)
