"""One declaration per table: a frozen dataclass (an event, a record, or a row of its own)
whose fields are the table's columns, each field saying how it is stored where that is not
plainly (``base/columns.py``: its column's name, the version that added it, JSON text).

Everything about a table is derived from that declaration: its ``CREATE TABLE`` (types from
the annotations, NOT NULL where a field takes no None and came with its table, the key), the
INSERT with ``:name`` placeholders, the SELECT that names its columns and reads them by
name, an UPDATE that names what it sets, and the reading of a row back into the declared
type, every value validated against its annotation (``checks.read_record``). Callers name
fields, never columns; no value passes by position, so a field added to a declaration is
created, written and read at once, and a value can never land in its neighbour's column.
"""

from __future__ import annotations

import json
import sqlite3
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, is_dataclass
from functools import cached_property
from typing import Any, Generic, TypeVar

from workbench.engine.base.columns import column_of, declared_fields
from workbench.engine.store.checks import read_record

R = TypeVar("R")

ONE_ROW = "id"  # the key of a table of one row (``Table.single_row``)


@dataclass(frozen=True)
class Written:
    """A column worked out from the row when it is written, never read back (the row works
    it out again): a request's text and token count, kept for whoever reads the file with
    SQL."""

    name: str
    kind: Any  # its annotation, for its SQL type
    of: Callable[[Any], Any]


@dataclass(frozen=True)
class _Column:
    """One column of a table, as derived from its declaration."""

    name: str
    field: str | None  # None: a written column, or a one-row table's implicit key
    kind: Any
    since: int
    json: bool = False
    sql_default: str | None = None
    nullable: bool = False
    of: Callable[[Any], Any] | None = None  # how a written column is worked out
    # A NULL in it reads as the field's default: a column newer than its table (an older
    # row never had it). False: NULL reads as None (checked against the annotation).
    defaulted: bool = False


def _sql_type(kind: Any) -> tuple[str, bool]:
    """A field's SQL type, and whether it takes None."""
    args = typing.get_args(kind)
    optional = typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in args
    if optional:
        (kind,) = [a for a in args if a is not type(None)]
    if kind in (int, bool):
        return "INTEGER", optional
    if kind is float:
        return "REAL", optional
    return "TEXT", optional  # str, and anything kept as JSON


@dataclass(frozen=True)
class Table(Generic[R]):
    """A table and the type that declares its columns. ``since``: the schema version that
    brought the table (a file older than that has none of its rows). ``key``: the fields of
    its primary key. ``order``: fields that lead the file's columns, in the order the first
    sessions laid them out (the rest follow in declaration order, a later version's after
    an earlier's). ``single_row``: the table holds one row, keyed ``id = 1`` (the field
    ``id`` where the row declares one). ``written``: columns only written."""

    name: str
    row: type[R]
    since: int = 1
    key: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    single_row: bool = False
    without_rowid: bool = False
    written: tuple[Written, ...] = ()

    @cached_property
    def _columns(self) -> tuple[_Column, ...]:
        declared = []
        for f, hint in declared_fields(self.row):
            stored = column_of(f)
            if not stored.stored:
                continue
            since = stored.since or self.since
            declared.append(
                _Column(
                    stored.name or f.name,
                    f.name,
                    hint,
                    since,
                    stored.json,
                    stored.sql_default,
                    stored.nullable,
                    defaulted=since > self.since,
                )
            )
        if self.single_row and all(c.field != ONE_ROW for c in declared):
            declared.insert(0, _Column(ONE_ROW, None, int, self.since, of=lambda _: 1))
        declared += [_Column(w.name, None, w.kind, self.since, of=w.of) for w in self.written]
        # Place: the fields named in ``order``, then the rest, each version after the last.
        place = {name: n for n, name in enumerate(self.order)}
        ranked = sorted(
            enumerate(declared),
            key=lambda c: (c[1].since, place.get(c[1].field or "", len(place)), c[0]),
        )
        return tuple(column for _, column in ranked)

    @cached_property
    def fields(self) -> dict[str, _Column]:
        """The stored fields' columns, by field name."""
        return {c.field: c for c in self._columns if c.field is not None}

    @cached_property
    def columns(self) -> tuple[str, ...]:
        """The file's columns, in their order."""
        return tuple(c.name for c in self._columns)

    def _named(self, names: Iterable[str]) -> list[str]:
        """The columns of fields ``names`` (pasted into SQL: never anything else)."""
        found = []
        for name in names:
            if name not in self.fields:
                raise ValueError(f"table {self.name} has no column {name!r}")
            found.append(self.fields[name].name)
        return found

    # The statements, as text.

    def create_sql(self) -> str:
        one_key = None  # a key of one INTEGER column is declared with it (the rowid)
        if self.single_row:
            one_key = ONE_ROW
        elif len(self.key) == 1:
            (one_key,) = self._named(self.key)
        lines = []
        for c in self._columns:
            kind, optional = _sql_type(c.kind)
            line = f"{c.name} {kind}"
            if c.name == one_key:
                line += " PRIMARY KEY"  # never NULL: the rowid
                if self.single_row:
                    line += f" CHECK ({ONE_ROW} = 1)"
            elif not (optional or c.nullable) and c.since == self.since:  # a later one: NULL
                line += " NOT NULL"
            if c.sql_default is not None:
                line += " DEFAULT '{}'".format(c.sql_default.replace("'", "''"))
            lines.append(line)
        if len(self.key) > 1:
            lines.append(f"PRIMARY KEY ({', '.join(self._named(self.key))})")
        body = ",\n    ".join(lines)
        return f"CREATE TABLE {self.name} (\n    {body}\n)" + (
            " WITHOUT ROWID" if self.without_rowid else ""
        )

    def insert_sql(self, *, replace: bool = False) -> str:
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        names = ", ".join(self.columns)
        values = ", ".join(f":{name}" for name in self.columns)
        return f"{verb} INTO {self.name} ({names}) VALUES ({values})"

    def select_sql(
        self, version: int, where: Iterable[str] = (), order_by: Iterable[str] = ()
    ) -> str:
        """Every stored field's column by name; one newer than a file of ``version`` as NULL."""
        picked = ", ".join(
            c.name if c.since <= version else f"NULL AS {c.name}"
            for c in self._columns
            if c.field is not None
        )
        sql = f"SELECT {picked} FROM {self.name}"
        if conditions := self._named(where):
            sql += " WHERE " + " AND ".join(f"{name} = :{name}" for name in conditions)
        if order := self._named(order_by):
            sql += " ORDER BY " + ", ".join(order)
        return sql

    def update_sql(self, where: Iterable[str], values: Iterable[str]) -> str:
        where, values = self._named(where), self._named(values)
        if not values or set(where) & set(values):
            raise ValueError(f"an update of {self.name} sets {values} where {where}")
        sets = ", ".join(f"{name} = :{name}" for name in values)
        conditions = " AND ".join(f"{name} = :{name}" for name in where)
        return f"UPDATE {self.name} SET {sets}" + (f" WHERE {conditions}" if where else "")

    def delete_sql(self, where: Iterable[str]) -> str:
        conditions = " AND ".join(f"{name} = :{name}" for name in self._named(where))
        if not conditions:
            raise ValueError(f"a delete from {self.name} must say which rows")
        return f"DELETE FROM {self.name} WHERE {conditions}"

    # Values, both ways.

    def _stored(self, names: Mapping[str, Any]) -> dict[str, Any]:
        """Values by field name as their columns hold them, by column name."""
        return {self.fields[f].name: _to_sql(v, self.fields[f].json) for f, v in names.items()}

    def values(self, row: R) -> dict[str, Any]:
        """A row's values by column name, as the file holds them (JSON as text, a bool as
        0/1)."""
        if type(row) is not self.row:
            raise TypeError(f"table {self.name} holds {self.row.__name__}, not {row!r}")
        return {
            c.name: c.of(row) if c.of else _to_sql(getattr(row, c.field or ""), c.json)
            for c in self._columns
        }

    def read(self, found: Mapping[str, Any]) -> R:
        """The declared row from a row of this table (by column name), every value checked;
        a NULL in a column newer than the table reads as the field's default (an older
        file's row never had it)."""
        stored = {
            name: found[c.name]
            for name, c in self.fields.items()
            if not (c.defaulted and found[c.name] is None)
        }
        return read_record(self.row, stored, self.name, sql=True)

    # The statements, run.

    def insert(self, conn: sqlite3.Connection, rows: Iterable[R], *, replace: bool = False) -> None:
        conn.executemany(self.insert_sql(replace=replace), [self.values(r) for r in rows])

    def delete(self, conn: sqlite3.Connection, where: Mapping[str, Any]) -> None:
        """Delete the rows whose fields equal ``where``."""
        conn.execute(self.delete_sql(where), self._stored(where))

    def update(self, conn: sqlite3.Connection, where: Mapping[str, Any], **values: Any) -> None:
        """Set the named fields to ``values`` in the rows whose fields equal ``where``."""
        conn.execute(self.update_sql(where, values), self._stored({**values, **where}))

    def select(
        self,
        conn: sqlite3.Connection,
        version: int,
        where: Mapping[str, Any] | None = None,
        order_by: Iterable[str] = (),
    ) -> list[R]:
        """The rows whose fields equal ``where``, from a file of schema ``version``, each
        value checked (a file can come from anyone)."""
        return [self.read(found) for found in self.found(conn, version, where, order_by)]

    def found(
        self,
        conn: sqlite3.Connection,
        version: int,
        where: Mapping[str, Any] | None = None,
        order_by: Iterable[str] = (),
    ) -> Iterable[sqlite3.Row]:
        """The same rows as ``sqlite3.Row``s, read by column name, unchecked, without
        building a declared row for each: for the chunks table, a row per token, where that
        object more than doubled the time to reopen a long session."""
        if version < self.since:
            return []
        where = dict(where or {})
        cursor = conn.cursor()
        cursor.row_factory = sqlite3.Row
        return cursor.execute(self.select_sql(version, where, order_by), self._stored(where))


def _to_sql(value: Any, as_json: bool) -> Any:
    """A value as its column holds it."""
    if value is None or not as_json:
        return int(value) if isinstance(value, bool) else value
    return json.dumps(value.to_dict() if is_dataclass(value) else value)  # type: ignore[union-attr]
