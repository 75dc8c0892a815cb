"""The session file's schema version; its tables are those declared in ``rows.py``.

A file records the version that wrote it (SQLite's ``user_version``). One of a newer version
is refused, untouched (``reader.open_session``): this version cannot know what it holds. One
of an older version lacks what came later; each table and column that came later says so in
its declaration (``Table(since=...)``, a field's ``column(since=...)``), and reading an older
file finds no rows in such a table and the field's default in such a column.

Adding a column: add the field to its declaration with ``column(since=...)`` a new version,
and the version here with a line below saying what an older file reads; the table's SQL,
INSERT and SELECT follow from the declaration.
"""

from __future__ import annotations

import sqlite3

from workbench.engine.store.rows import TABLES

# 1: the first sessions
# 2: gpu_samples (a version-1 file reads as having none)
# 3: request_slots (older files read as requests with no slot known)
# 4: requests' intended/ready times and connect time, client_load, server_counters
#    (older: not recorded)
# 5: requests' prompt_tokens, the length of a prompt built to a size (older: not known), and
#    streamed (older: every request was streamed)
# 6: import_source and reported_figures, for a session made from another tool's result file
#    (older: every session was measured by the workbench)
# 7: requests' t_first_answer_ns and chunks' reasoning flag, for servers that stream reasoning
#    apart from the answer (older: reasoning and answer were joined, every chunk reads as
#    answer and no first answer time is known)
# 8: requests' conversation_id and turn, for a conversations run (older: every request was
#    an independent one)
# 9: predictions, predicted_requests and prediction_left_out: the prediction a run made from
#    this machine's calibrations before its first configuration (older: none was made)
# 10: requests' worker, the client process that sent each request (older: one process), and
#     remote_origin, for a session measured on another machine through the agent (older:
#     every session was measured where it was written)
# 11: requests' trace_line, the trace file's line a trace replay's request replays (older:
#     not recorded); machine_load, what else used the machine per repeat (older: not
#     recorded, so never flagged busy)
SCHEMA_VERSION = 11

SCHEMA = "".join(f"{table.create_sql()};\n" for table in TABLES)


def create_tables(conn: sqlite3.Connection) -> None:
    """Every table of this version, in an empty file, and the version that wrote it, in a
    transaction the caller commits (with its first rows) or rolls back: a file is created
    whole or not at all, and with one sync to disk instead of one per table."""
    conn.executescript(f"BEGIN;\n{SCHEMA}\nPRAGMA user_version = {SCHEMA_VERSION};")
