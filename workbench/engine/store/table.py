"""One declaration per table: a frozen dataclass whose fields are the table's columns.

Every statement on a table is derived from that declaration, and every value passes by the
column's name: the INSERT names its columns with ``:name`` placeholders, the SELECT names
its columns and reads them through ``sqlite3.Row`` by name, an UPDATE names what it sets. No
column order is kept by hand anywhere, so a column added to a declaration is written and
read at once, and a value can never land in its neighbour's column.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, Generic, TypeVar

R = TypeVar("R")

_SINCE = "since"


def added_in(version: int) -> Any:
    """A column that came with schema ``version``: a file older than that reads it as NULL.
    (A column without this marker came with its table.)"""
    return field(metadata={_SINCE: version})


@dataclass(frozen=True)
class Table(Generic[R]):
    """A table and the row type that declares its columns. ``since``: the schema version
    that brought the table (a file older than that has none of its rows)."""

    name: str
    row: type[R]
    since: int = 1

    @cached_property
    def columns(self) -> tuple[str, ...]:
        """The declared columns, in the order of the row's fields."""
        return tuple(f.name for f in fields(self.row))

    @cached_property
    def _since(self) -> dict[str, int]:
        return {f.name: f.metadata.get(_SINCE, self.since) for f in fields(self.row)}

    def _known(self, names: Iterable[str]) -> list[str]:
        """``names``, each a declared column (names are pasted into SQL: never anything else)."""
        names = list(names)
        for name in names:
            if name not in self._since:
                raise ValueError(f"table {self.name} has no column {name!r}")
        return names

    # The statements, as text.

    def insert_sql(self, *, replace: bool = False) -> str:
        verb = "INSERT OR REPLACE" if replace else "INSERT"
        names = ", ".join(self.columns)
        values = ", ".join(f":{name}" for name in self.columns)
        return f"{verb} INTO {self.name} ({names}) VALUES ({values})"

    def select_sql(
        self, version: int, where: Iterable[str] = (), order_by: Iterable[str] = ()
    ) -> str:
        """Every declared column by name; one newer than a file of ``version`` as NULL."""
        picked = ", ".join(
            name if self._since[name] <= version else f"NULL AS {name}" for name in self.columns
        )
        sql = f"SELECT {picked} FROM {self.name}"
        if conditions := self._known(where):
            sql += " WHERE " + " AND ".join(f"{name} = :{name}" for name in conditions)
        if order := self._known(order_by):
            sql += " ORDER BY " + ", ".join(order)
        return sql

    def update_sql(self, where: Iterable[str], values: Iterable[str]) -> str:
        where, values = self._known(where), self._known(values)
        if not values or set(where) & set(values):
            raise ValueError(f"an update of {self.name} sets {values} where {where}")
        sets = ", ".join(f"{name} = :{name}" for name in values)
        conditions = " AND ".join(f"{name} = :{name}" for name in where)
        return f"UPDATE {self.name} SET {sets}" + (f" WHERE {conditions}" if where else "")

    def delete_sql(self, where: Iterable[str]) -> str:
        conditions = " AND ".join(f"{name} = :{name}" for name in self._known(where))
        if not conditions:
            raise ValueError(f"a delete from {self.name} must say which rows")
        return f"DELETE FROM {self.name} WHERE {conditions}"

    # The statements, run.

    def values(self, row: R) -> dict[str, Any]:
        """A row's values by column name."""
        if type(row) is not self.row:
            raise TypeError(f"table {self.name} holds {self.row.__name__}, not {row!r}")
        return {name: getattr(row, name) for name in self.columns}

    def insert(self, conn: sqlite3.Connection, rows: Iterable[R], *, replace: bool = False) -> None:
        conn.executemany(self.insert_sql(replace=replace), [self.values(r) for r in rows])

    def delete(self, conn: sqlite3.Connection, where: Mapping[str, Any]) -> None:
        """Delete the rows whose columns equal ``where``."""
        conn.execute(self.delete_sql(where), dict(where))

    def update(self, conn: sqlite3.Connection, where: Mapping[str, Any], **values: Any) -> None:
        """Set the named ``values`` in the rows whose columns equal ``where``."""
        conn.execute(self.update_sql(where, values), {**values, **where})

    def select(
        self,
        conn: sqlite3.Connection,
        version: int,
        where: Mapping[str, Any] | None = None,
        order_by: Iterable[str] = (),
    ) -> list[R]:
        """The rows whose columns equal ``where``, from a file of schema ``version``. The
        values are what the file holds: whoever uses one checks it first (``checks.py``)."""
        return [
            self.row(**{name: found[name] for name in self.columns})
            for found in self.found(conn, version, where, order_by)
        ]

    def found(
        self,
        conn: sqlite3.Connection,
        version: int,
        where: Mapping[str, Any] | None = None,
        order_by: Iterable[str] = (),
    ) -> Iterable[sqlite3.Row]:
        """The same rows as ``sqlite3.Row``s, still read by column name, without building a
        declared row for each: for the chunks table, a row per token, where that object
        more than doubled the time to reopen a long session."""
        if version < self.since:
            return []
        where = dict(where or {})
        cursor = conn.cursor()
        cursor.row_factory = sqlite3.Row
        return cursor.execute(self.select_sql(version, where, order_by), where)
