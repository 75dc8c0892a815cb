"""Engine events as JSON, and back: what crosses from an agent on another machine.

The far side is untrusted. Encoding is a walk over each event's dataclass fields
(``plain``). Decoding is pydantic's, from the JSON text, against the same dataclasses: an
event is ``{"type": name, "data": fields}``, one of a union tagged by its type (``Event``),
read strictly (``base/validation.py``), so no value of a wrong type, no unknown event and
nothing executable reaches the bus. Fields the session does not store as columns (a
request's chunks) travel too. What a type cannot say is checked on what it read
(``bounded``): no list or table over ``MAX_ENTRIES``, and a server's own figures in a
request bounded as the client bounds them.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from workbench.engine import events as ev
from workbench.engine.base.escaping import printable
from workbench.engine.base.records import RequestRecord
from workbench.engine.base.validation import as_text, validated
from workbench.engine.config.experiment import RunConfig
from workbench.engine.measure.client import numbers

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
        ev.StallsFound,
        ev.ConfigFinished,
        ev.Notice,
        ev.PredictionMade,
        ev.ExperimentFinished,
    )
}
MAX_ENTRIES = 100_000  # in any one list or object: a request's chunks are the longest


class WireError(ValueError):
    """What the far side sent is not an event of this protocol (the text says which field)."""


class Wire(BaseModel):
    """A message on the wire: read from JSON strictly (no text as a number, no 1.0 as a
    count), every number finite, a field it does not know ignored (as protocol 2 always
    has), and the records inside read the same way."""

    model_config = ConfigDict(strict=True, frozen=True, allow_inf_nan=False, defer_build=True)


def bounded(value: Any) -> Any:
    """``value`` (an event or a record, as read) with no list or table of more than
    ``MAX_ENTRIES``; a request's ``usage`` and ``timings``, the server's own figures, are
    kept as the client keeps them (``client.numbers``)."""
    unseen = [value]
    while unseen:
        item = unseen.pop()
        if isinstance(item, RequestRecord):
            item.usage = None if item.usage is None else numbers(item.usage)
            item.timings = None if item.timings is None else numbers(item.timings)
        if isinstance(item, list | tuple | dict):
            if len(item) > MAX_ENTRIES:
                raise ValueError(f"has {len(item)} entries, more than {MAX_ENTRIES}")
            unseen += item.values() if isinstance(item, dict) else item
        elif hasattr(type(item), "__dataclass_fields__"):
            unseen += [getattr(item, name) for name in _holding(type(item))]
    return value


@functools.cache
def _holding(cls: type) -> tuple[str, ...]:
    """The fields of the record ``cls`` that may hold a list, a table or a record: those
    ``bounded`` looks into (a request's chunks, not each chunk's time)."""
    hints = typing.get_type_hints(cls)
    return tuple(f.name for f in dataclasses.fields(cls) if not _plain(hints[f.name]))


def _plain(hint: Any) -> bool:
    if typing.get_origin(hint) in (Union, types.UnionType):
        return all(_plain(inner) for inner in typing.get_args(hint))
    return hint in (int, float, str, bool, type(None)) or (
        isinstance(hint, type) and issubclass(hint, enum.Enum)
    )


# The records of a message: as read, then bounded.
Bounded = AfterValidator(bounded)


@dataclasses.dataclass(frozen=True)
class _ConfigStarted(ev.ConfigStarted):
    """``ConfigStarted`` as it is read: its config (typed loosely in ``events``, to keep that
    module free of import cycles) is a ``RunConfig``."""

    config: RunConfig


def _event(cls: type) -> Any:
    """The message of one event: its name, and its fields as the event's dataclass."""
    data: Any = cls
    if cls is ev.ConfigStarted:
        data = Annotated[_ConfigStarted, AfterValidator(lambda e: ev.ConfigStarted(**vars(e)))]
    return create_model(
        f"{cls.__name__}Message",
        __base__=Wire,
        type=(Literal[cls.__name__], ...),
        data=(data, ...),
    )


# An event as it comes: its message, read into the event itself.
Event = Annotated[
    Union[tuple(_event(cls) for cls in EVENTS.values())],  # noqa: UP007 (built at run time)
    Field(discriminator="type"),
    AfterValidator(lambda message: bounded(message.data)),
]


def encode(event: Any) -> dict[str, Any]:
    """``{"type": name, "data": fields}``, every value plain JSON."""
    name = type(event).__name__
    if name not in EVENTS:
        raise TypeError(f"{name} is not sent over the wire")
    return {"type": name, "data": plain(event)}


def decode(message: str | bytes | Any) -> Any:
    """The event ``encode`` made, from its JSON text (or that text parsed), checked;
    ``WireError`` names what is wrong, in one line."""
    try:
        if not isinstance(message, str | bytes):
            message = json.dumps(message)
        return validated(Event, message, "the event", WireError, json=True)
    except WireError as exc:
        raise WireError(printable(str(exc))) from None
    except (TypeError, ValueError, RecursionError):  # a value no JSON holds
        raise WireError(f"the event is no JSON: {as_text(message, 80)!r}") from None


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
