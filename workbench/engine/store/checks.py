"""A session file can come from anyone: every value read from one is validated by pydantic
against the annotation of the field it is for, before use.

A row of a table is validated as its declared record (``read_record``), a record kept as
JSON text on its own as the same (``read_json``), strictly: a bool is no number, a number
no bool, a float finite, a state (a ``StrEnum``) one of its words, read as its member. This
module adds only what a session file's columns need on top (``base/columns.py``): a bool
column holds 0 or 1, a JSON column holds text to parse (an integer beyond 64 bits read as an
infinity), and a column declared ``finite=False`` holds a server's own numbers (NaN and the
infinities are values there). In a column declared ``lenient``, and inside a record kept as
JSON (the startup facts, the hardware fingerprint: views show them and summaries fall back
from them), a wrong value reads as unknown and a wrong entry is left out, so one odd entry
costs only itself. A wrong value anywhere else raises one ``ValueError`` line naming the
field, which the reader turns into one ``SessionError`` naming the file.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING
from typing import Annotated, Any, NotRequired, TypeVar

from pydantic import (
    AfterValidator,
    AllowInfNan,
    BeforeValidator,
    ConfigDict,
    Strict,
    TypeAdapter,
    ValidationError,
    WrapValidator,
)
from typing_extensions import TypedDict

from workbench.engine.base.columns import column_of, declared_fields
from workbench.engine.base.validation import problem

R = TypeVar("R")

# What every value read is held to: no text as a number, no 1.0 as a count, no NaN.
_STRICT = ConfigDict(strict=True, allow_inf_nan=False)


def read_record(cls: type[R], stored: Mapping[str, Any], where: str, *, sql: bool = False) -> R:
    """The record ``cls`` from ``stored`` (its values by field name), each validated against
    its field's annotation and column, so a field added to a record is checked with no change
    here. ``sql``: the values are a row's, as SQLite holds them (a bool as 0 or 1). A field
    ``stored`` lacks, or that is no column (``not_stored``), keeps its default; an unknown key
    is dropped. A wrong value raises ``ValueError``: ``where: field what is wrong``."""
    return _validated(_adapter(cls, sql), stored, where)


def read_json(cls: type[R], text: Any, where: str) -> R:
    """The record ``cls`` from the JSON text a column holds, as a record kept as JSON inside
    a row is read: a wrong value in it reads as unknown, but text that is no JSON object
    raises ``ValueError``."""
    return _validated(_json_adapter(cls), text, where)


def _validated(adapter: TypeAdapter[Any], value: Any, where: str) -> Any:
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise ValueError(f"{where}: {problem(exc)}") from None


@functools.cache
def _adapter(cls: type, sql: bool) -> TypeAdapter[Any]:
    """The adapter of a record's stored values: built once per record (a session reads
    thousands of rows)."""
    return TypeAdapter(_record(cls, False, sql))


@functools.cache
def _json_adapter(cls: type) -> TypeAdapter[Any]:
    return TypeAdapter(Annotated[_record(cls, True, False), BeforeValidator(_parsed)])


def _record(cls: type, lenient: bool, sql: bool) -> Any:
    """``cls``'s stored fields as a ``TypedDict`` of their checked kinds (``_kind``), read into
    ``cls`` itself. Where ``lenient``, each field's wrong value reads as unknown."""
    kinds: dict[str, Any] = {}
    for f, hint in declared_fields(cls):
        stored_as = column_of(f)
        if not stored_as.stored:
            continue
        lenient_here = lenient or stored_as.lenient
        if stored_as.json:  # no bool inside is 0/1
            kind = _kind(hint, lenient_here, False, stored_as.finite)
            kind = Annotated[kind, BeforeValidator(_parsed)]
        else:
            kind = _kind(hint, lenient_here, sql, stored_as.finite)
        if lenient_here:
            empty = () if typing.get_origin(hint) is tuple else None
            kind = Annotated[kind, WrapValidator(functools.partial(_or_unknown, empty))]
        defaulted = (f.default, f.default_factory) != (MISSING, MISSING)
        kinds[f.name] = NotRequired[kind] if defaulted else kind
    fields = TypedDict(f"Stored{cls.__name__}", kinds)  # type: ignore[operator]
    fields.__pydantic_config__ = _STRICT  # type: ignore[attr-defined]
    return Annotated[fields, AfterValidator(lambda values: cls(**values))]


def _kind(hint: Any, lenient: bool, sql: bool, finite: bool) -> Any:
    """The kind pydantic validates a value of ``hint`` as, where a session's columns need
    more than the annotation says (see the module's docstring); ``lenient``: a wrong entry of a
    list or table is left out, a record inside reads its wrong values as unknown."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in args and len(args) == 2:
        (inner,) = [a for a in args if a is not type(None)]
        return _kind(inner, lenient, sql, finite) | None
    if origin in (tuple, list, dict):
        entry = _kind(args[-1] if origin is dict else args[0], lenient, sql, finite)
        # a tuple is kept as a JSON list: read from one (its entries still strictly)
        kind: Any = {
            tuple: Annotated[tuple[entry, ...], Strict(False)],
            list: list[entry],
            dict: dict[str, entry],
        }[origin]
        return Annotated[kind, WrapValidator(_without_wrong)] if lenient else kind
    if dataclasses.is_dataclass(hint):
        return _record(typing.cast(type, hint), True, False)
    if hint is bool and sql:
        return Annotated[bool, BeforeValidator(_sql_bool)]
    if hint is float and not finite:
        return Annotated[float, AllowInfNan(True)]
    if isinstance(hint, type) and issubclass(hint, enum.StrEnum):
        return Annotated[hint, Strict(False)]  # one of its words, read as its member
    return hint


def _parsed(value: Any) -> Any:
    """A JSON column's text, parsed (empty: none), with an integer beyond 64 bits as an
    infinity: none larger is a count or a time, and one would overflow the first float made of
    it. An infinity is no int, and no finite float, so its field refuses it (or keeps it, where
    a server's numbers may be infinite)."""
    if value is None or value == "":
        return None
    if type(value) is not str:
        raise ValueError(f"must be JSON text, not {type(value).__name__}")
    try:
        return json.loads(value, parse_int=_json_int)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None


def _json_int(text: str) -> int | float:
    value = int(text)
    if -(2**63) <= value < 2**64:
        return value
    return math.inf if value > 0 else -math.inf


def _sql_bool(value: Any) -> Any:
    """A bool column holds 0 or 1 (SQLite has no bool); anything else is left to refuse."""
    return value != 0 if type(value) is int else value


def _or_unknown(empty: Any, value: Any, handler: Callable[[Any], Any]) -> Any:
    """A lenient field's value, or unknown (``empty``) where it is wrong."""
    try:
        return handler(value)
    except ValidationError:
        return empty


def _without_wrong(value: Any, handler: Callable[[Any], Any]) -> Any:
    """A lenient list or table, its wrong entries left out (itself of the wrong kind: refused)."""
    try:
        return handler(value)
    except ValidationError as exc:
        wrong = {e["loc"][0] for e in exc.errors() if e["loc"]}
        if isinstance(value, dict):
            return handler({k: v for k, v in value.items() if k not in wrong})
        if isinstance(value, list) and wrong:
            return handler([v for n, v in enumerate(value) if n not in wrong])
        raise
