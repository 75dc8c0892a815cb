"""Sessions on disk: one self-describing SQLite file per experiment run, written as it goes.

- ``schema``: the schema version; what an older or a newer file means.
- ``table``: a table declared once, by a dataclass of its columns; its SQL, its statements
  and the reading of its rows from that.
- ``rows``: every table, each declared by the record or event its rows stand for.
- ``checks``: every value read from a file (which can come from anyone) validated by
  pydantic against the annotation of its field, and what a session's columns add to that.
- ``writer``: ``create_session`` and ``SessionWriter``, the thread that records a run, and
  ``reopen_session`` for a run that goes on in the same file.
- ``reader``: ``open_session`` and ``Session``, a file opened for reading.
"""

from workbench.engine.store.reader import Session, open_session, summarize_config_records
from workbench.engine.store.rows import ConfigRow
from workbench.engine.store.schema import SCHEMA_VERSION
from workbench.engine.store.writer import SessionWriter, create_session, reopen_session

__all__ = [
    "SCHEMA_VERSION",
    "ConfigRow",
    "Session",
    "SessionWriter",
    "create_session",
    "open_session",
    "reopen_session",
    "summarize_config_records",
]
