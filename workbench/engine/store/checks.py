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
import functools
import json
import math
import types
import typing
from collections.abc import Mapping
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
    for f, hint in declared_fields(cls):
        stored_as = column_of(f)
        if f.name in given or not stored_as.stored:
            continue
        values[f.name] = read_value(
            hint,
            stored.get(f.name),
            f.name,
            lenient=lenient or stored_as.lenient,
            json_text=stored_as.json,
            sql=sql,
        )
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
    bool column holds 0 or 1), a number no bool, a float must be finite; ``tuple[X, ...]``
    and ``list[X]`` take a list of X, ``dict[str, X]`` an object of X; a record takes an
    object, read with ``lenient``. ``json_text``: ``value`` is JSON text (empty reads as
    None). Where ``lenient``, a wrong value reads as None, a wrong entry is left out."""
    try:
        if json_text:
            value = json.loads(typed(value, str, what)) if value not in (None, "") else None
        return _checked(hint, value, what, lenient, sql)
    except (TypeError, ValueError):
        if lenient:
            return () if typing.get_origin(hint) is tuple else None
        raise


def _checked(hint: Any, value: Any, what: str, lenient: bool, sql: bool) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (hint,) = [a for a in args if a is not type(None)]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (tuple, list):
        entries = typed(value, list, what)
        return origin(_entries(args[0], entries, what, lenient, sql))
    if origin is dict:
        entries = typed(value, dict, what)
        keys = [k for k in entries if isinstance(k, str)] if lenient else list(entries)
        return dict(
            zip(
                keys, _entries(args[1], [entries[k] for k in keys], what, lenient, sql), strict=True
            )
        )
    if dataclasses.is_dataclass(hint):
        return read_record(typing.cast(type, hint), typed(value, dict, what), lenient=True)
    if hint is bool and sql:
        return typed(value, int, what) != 0
    if not _is(value, hint):
        raise TypeError(f"{what} is a {type(value).__name__}")
    return value


def _entries(hint: Any, entries: list[Any], what: str, lenient: bool, sql: bool) -> list[Any]:
    """Each entry as a ``hint``; where ``lenient``, the wrong ones left out."""
    if not lenient:
        return [_checked(hint, e, what, False, sql) for e in entries]
    kept = []
    for e in entries:
        try:
            kept.append(_checked(hint, e, what, True, sql))
        except (TypeError, ValueError):
            continue
    return kept


def _is(value: Any, kind: type) -> bool:
    """Whether ``value`` is a ``kind``: a bool is no number, a number no bool, and a float
    (which also takes an int) must be finite."""
    if isinstance(value, bool) != (kind is bool):
        return False
    if kind is float:
        return isinstance(value, int | float) and math.isfinite(value)
    return isinstance(value, kind)
