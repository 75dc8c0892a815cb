"""A session file can come from anyone: every value read from one is checked before use.

Every check is driven by the annotation of the field the value is for, in one walk over a
record's fields (``read_record``): a row of a table, or a record kept as JSON inside one.
A value of the wrong type raises ``TypeError``, a JSON text that does not parse
``ValueError``; the reader turns either into one ``SessionError`` naming the file. Inside
the startup facts and the hardware fingerprint, which views show and summaries fall back
from (records kept as JSON), and in a column declared ``lenient``, a wrong value reads as
unknown instead, so one odd entry costs only itself.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from workbench.engine.base.columns import column_of

R = TypeVar("R")


def typed(value: Any, kinds: type | tuple[type, ...], what: str) -> Any:
    """``value`` if it has one of ``kinds`` (None passes where ``kinds`` has NoneType; a
    bool is no int here)."""
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise TypeError(f"{what} is a {type(value).__name__}")
    return value


@functools.cache
def declared_fields(cls: type) -> tuple[tuple[dataclasses.Field[Any], Any], ...]:
    """A record's fields, each with its resolved annotation."""
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls))


def read_record(
    cls: type[R],
    stored: Mapping[str, Any],
    *,
    lenient: bool = False,
    sql: bool = False,
    **given: Any,
) -> R:
    """The record ``cls`` from ``stored`` (its values by field name), each checked against
    its field's annotation (``read_value``), so a field added to a record is checked with no
    change here. ``given``: fields whose values are already known (not read). A field that is
    no column (``not_stored``) keeps its default. An unknown key of ``stored`` is dropped."""
    values = dict(given)
    for name, read in _readers(cls, lenient, sql):
        if name not in given:
            values[name] = read(stored.get(name))
    return cls(**values)


def read_value(
    hint: Any,
    value: Any,
    what: str,
    *,
    lenient: bool = False,
    json_text: bool = False,
    sql: bool = False,
) -> Any:
    """``value`` as a ``hint``: ``X | None`` takes None; a bool is no number (but ``sql``: a
    bool column holds 0 or 1), a number no bool, a float must be finite (but in a column
    declared ``finite=False``, a server's own numbers); ``tuple[X, ...]``
    and ``list[X]`` take a list of X, ``dict[str, X]`` an object of X; a record takes an
    object, read with ``lenient``. ``json_text``: ``value`` is JSON text (empty reads as
    None). Where ``lenient``, a wrong value reads as None, a wrong entry is left out."""
    return _reader(hint, what, lenient, json_text, sql)(value)


# What a wrong value raises on its way in: a wrong type or word, JSON that does not parse or
# nests deeper than Python recurses, a number too large for a float.
WRONG = (TypeError, ValueError, RecursionError, OverflowError)

# Each check is worked out once per annotation (a session reads thousands of rows).
Check = Callable[[Any], Any]


@functools.cache
def _readers(cls: type, lenient: bool, sql: bool) -> tuple[tuple[str, Check], ...]:
    """Each stored field of ``cls`` with the check of its values."""
    readers = []
    for f, hint in declared_fields(cls):
        stored_as = column_of(f)
        if stored_as.stored:
            lenient_here = lenient or stored_as.lenient
            read = _reader(hint, f.name, lenient_here, stored_as.json, sql, stored_as.finite)
            readers.append((f.name, read))
    return tuple(readers)


@functools.cache
def _reader(
    hint: Any, what: str, lenient: bool, json_text: bool, sql: bool, finite: bool = True
) -> Check:
    check = _check(hint, what, lenient, sql, finite)
    empty = () if typing.get_origin(hint) is tuple else None

    def read(value: Any) -> Any:
        try:
            if json_text:
                text = None if value in (None, "") else typed(value, str, what)
                value = None if text is None else json.loads(text, parse_int=_json_int)
            return check(value)
        except WRONG:
            if lenient:
                return empty
            raise

    return read


def _json_int(text: str) -> int | float:
    """A JSON integer; one beyond 64 bits as an infinity: none larger is a count or a time,
    and one would overflow the first float made of it. An infinity is no int, and no finite
    float, so the field's own check refuses it (or a lenient record forgets it)."""
    value = int(text)
    if -(2**63) <= value < 2**64:
        return value
    return math.inf if value > 0 else -math.inf


def _check(hint: Any, what: str, lenient: bool, sql: bool, finite: bool) -> Check:
    """The check of a value of ``hint`` (raising TypeError), as ``read_value`` says."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        present = _check(inner, what, lenient, sql, finite)
        return lambda value: None if value is None else present(value)
    if hint is Any:
        return lambda value: value
    if origin in (typing.Union, types.UnionType) and all(map(dataclasses.is_dataclass, args)):
        return _kinds_check(args, what)
    if origin is typing.Literal:  # a setting's choices (``engine/config``)
        return _choice_check(args, what)
    if origin in (tuple, list, dict):
        entry = _check(args[1] if origin is dict else args[0], what, lenient, sql, finite)

        def entries(value: Any) -> Any:
            """Each entry checked (a dict's keys text); where ``lenient``, a wrong one left out."""
            given = typed(value, dict if origin is dict else list, what)
            kept: dict[Any, Any] = {}
            for key, e in given.items() if origin is dict else enumerate(given):
                try:
                    kept[typed(key, str, what) if origin is dict else key] = entry(e)
                except WRONG:
                    if not lenient:
                        raise
            return kept if origin is dict else origin(kept.values())

        return entries
    if dataclasses.is_dataclass(hint):
        record = typing.cast(type, hint)
        return lambda value: read_record(record, typed(value, dict, what), lenient=True)
    if hint is bool and sql:
        return lambda value: typed(value, int, what) != 0
    if isinstance(hint, type) and issubclass(hint, enum.StrEnum):
        return _state_check(hint, what)

    def plain(value: Any) -> Any:
        if (type(value) is hint and (hint is not float or not finite)) or _is(value, hint):
            return value
        raise TypeError(f"{what} is a {type(value).__name__}")

    return plain


def _kinds_check(kinds: tuple[Any, ...], what: str) -> Check:
    """A record of one of several kinds (a workload): the kind its fields say, as their
    common base tells (``kind_for``), read as a record is."""
    base = next(c for c in kinds[0].__mro__ if c.__dict__.get("KINDS"))

    def one_of(value: Any) -> Any:
        given = typed(value, dict, what)
        return read_record(base.kind_for(given), given, lenient=True)

    return one_of


def _choice_check(choices: tuple[Any, ...], what: str) -> Check:
    """One of ``choices`` exactly (a bool is not 1, nor 1 True)."""

    def choice(value: Any) -> Any:
        if any(type(value) is type(c) and value == c for c in choices):
            return value
        said = repr(value)[:40]
        raise ValueError(f"{what} is {said}, not one of {', '.join(map(str, choices))}")

    return choice


def _state_check(kind: type[enum.StrEnum], what: str) -> Check:
    """A state is one of its words (``base/states.py``): read as its member, so no view
    meets a state it has no name or colour for."""
    members = {member.value: member for member in kind}

    def state(value: Any) -> Any:
        if (member := members.get(typed(value, str, what))) is None:
            known = ", ".join(members)
            raise ValueError(f"{what} is {value[:40]!r}, not one of {known}")
        return member

    return state


def _is(value: Any, kind: type) -> bool:
    """Whether ``value`` is a ``kind``: a bool is no number, a number no bool, and a float
    (which also takes an int) must be finite."""
    if isinstance(value, bool) != (kind is bool):
        return False
    if kind is float:
        if isinstance(value, int):  # exact: an int too large for a float is none
            return -sys.float_info.max <= value <= sys.float_info.max
        return isinstance(value, float) and math.isfinite(value)
    return isinstance(value, kind)
