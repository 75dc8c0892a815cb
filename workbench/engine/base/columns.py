"""How a record's field is kept in a session file, said on the field itself.

An event or a record is declared once; where its table's column is named otherwise, came
with a later schema version or holds JSON text, its field says so here, and the store
derives the table's SQL, the writing of a row and its reading back from that declaration
(``store/table.py``). This module holds only the words, no SQL: the records at the bottom
of the engine can say how they are stored without knowing the store.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import MISSING, dataclass
from typing import Any

COLUMN = "column"  # the key of a field's metadata that holds its ``Column``


@dataclass(frozen=True)
class Column:
    """How one field is stored. A field with no ``Column`` is a column of its own name,
    came with its table, and holds its value as SQLite holds it (a bool as 0/1)."""

    name: str | None = None  # the column's name where it is not the field's
    since: int | None = None  # the schema version that added it (None: came with its table)
    json: bool = False  # held as JSON text (a record as its ``to_dict()``)
    lenient: bool = False  # a damaged value reads as not recorded (None), not as damage
    sql_default: str | None = None  # the DEFAULT of the file's column
    # The file's column takes NULL though the field takes no None: so the first sessions
    # declared it; no workbench writes one, and one read is damage.
    nullable: bool = False
    # False: a server's own numbers, where NaN and the infinities are values (Prometheus
    # allows them); a number the workbench measured must be finite.
    finite: bool = True
    stored: bool = True  # False: no column of its table (kept in a table of its own)


PLAIN = Column()


def column(
    name: str | None = None,
    *,
    since: int | None = None,
    json: bool = False,
    lenient: bool = False,
    sql_default: str | None = None,
    nullable: bool = False,
    finite: bool = True,
    default: Any = MISSING,
    default_factory: Any = MISSING,
) -> Any:
    """A field kept in a column: named ``name`` in the file, added in schema ``since`` (a
    file older than that reads the field's default), as JSON text where ``json``."""
    stored = Column(name, since, json, lenient, sql_default, nullable, finite)
    return dataclasses.field(
        default=default, default_factory=default_factory, metadata={COLUMN: stored}
    )


def not_stored(*, default: Any = MISSING, default_factory: Any = MISSING) -> Any:
    """A field that is no column of its record's table (a request's chunks and slot have
    tables of their own): read back as its default, then filled in by the reader."""
    return dataclasses.field(
        default=default, default_factory=default_factory, metadata={COLUMN: Column(stored=False)}
    )


def column_of(f: dataclasses.Field[Any]) -> Column:
    return f.metadata.get(COLUMN, PLAIN)


@functools.cache
def declared_fields(cls: type) -> tuple[tuple[dataclasses.Field[Any], Any], ...]:
    """A record's fields, each with its resolved annotation: what its table's columns and the
    validation of its stored values are derived from."""
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls))
