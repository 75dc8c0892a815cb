"""A watch kept: a SQLite file (``*.watch.sqlite``) written as the watch goes, so a crash
keeps what it saw up to its last second. It holds counts and times only, never a prompt or
an answer: the watch's address and settings (the SLOs it was given among them, so that
``workbench show`` and a replay judge them wherever and however the watch ended), each
ended task, each ``/metrics`` poll's load,
and the watch's counters (polls, busy slots, the server's memory and latency histograms,
the times the server did not answer, the ledger of the tasks no poll saw), brought up
to date each second.

Read back (``read``), it is the ``Watched`` the summary takes, every value checked: a file
of a newer version is refused, and a value of the wrong kind or out of range is one clear
error, not a traceback. Its size grows by a row per ended task and per ``/metrics`` poll
(``bench/watch_long.py`` prints it for a watch of hours).
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.server_kinds import KINDS, Buckets
from workbench.engine.tune.records import SloTarget
from workbench.engine.tune.slo_targets import parse_slos, slo_text
from workbench.engine.watch.slot_tasks import WatchedTask
from workbench.engine.watch.unseen import TokenLedger
from workbench.engine.watch.watcher import GAPS_KEPT, Gap, Load, Watched

VERSION = 4  # 2: a load's KV-cache use; 3: its cached-token, request and
# seconds counters; 4: the SLOs the watch was given (``watch.slos``)
SUFFIX = ".watch.sqlite"
SAVE_EVERY_S = 1.0
MAX_ROWS = 10_000_000  # a watch of days at 0.1 s; a file beyond is damage
MAX_NUMBER = 1e15
HEAD_COLUMNS = ("url", "interval_s", "started", "kind", "counters", "slos")
MAX_HEAD_CHARS = 4_000_000  # a value of the watch row: its counters are far less
MAX_SLOS = 32  # above the 13 distinct ones --slo takes: more is damage
MAX_SLO_CHARS = 64  # one as typed: ``ttft_p90:2000`` is 13
MAX_SLOS_TEXT = MAX_SLOS * (MAX_SLO_CHARS + 4) + 2  # their JSON list, bounded before it is read

SCHEMA = """
CREATE TABLE watch (url TEXT NOT NULL, interval_s REAL NOT NULL, started TEXT NOT NULL,
    kind TEXT, counters TEXT NOT NULL, slos TEXT);
CREATE TABLE tasks (slot INTEGER NOT NULL, task INTEGER NOT NULL, seen_s REAL NOT NULL,
    last_s REAL NOT NULL, decoding_s REAL, gone_s REAL, prompt_tokens INTEGER,
    cached_tokens INTEGER, decoded INTEGER NOT NULL, running_at_start INTEGER NOT NULL,
    decoded_all INTEGER NOT NULL, missed INTEGER NOT NULL, sequence_tokens INTEGER);
CREATE TABLE loads (t_s REAL NOT NULL, running REAL, waiting REAL, prompt_tokens REAL,
    output_tokens REAL, kv_usage REAL, cached_tokens REAL, requests REAL,
    prompt_seconds REAL, output_seconds REAL);
"""


TASK_PLACES = ",".join("?" * len(fields(WatchedTask)))  # the tasks table: a column a field
LOAD_FIELDS = frozenset(f.name for f in fields(Load))
LOAD_PLACES = ",".join("?" * len(LOAD_FIELDS))  # the loads table: a column a field


def kept_at(folder: Path) -> Path:
    """A new watch file's path in ``folder`` (made if need be): named by the time, never an
    older one's."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"watch-{time.strftime('%Y%m%d-%H%M%S')}"
    path = folder / f"{stem}{SUFFIX}"
    number = 1
    while path.exists():
        number += 1
        path = folder / f"{stem}-{number}{SUFFIX}"
    return path


class WatchFileError(WorkbenchError):
    """A watch file that cannot be read: damaged, newer, or no watch file."""


class Recorder:
    """Writes one watch into ``path`` as it goes: rows as they come, committed with the
    watch's counters at most once a second. The SLOs it was given are written with its
    head, before its first poll, so that however it ends its file can be judged on them."""

    def __init__(
        self, path: Path, url: str, interval_s: float, slos: Sequence[SloTarget] = ()
    ) -> None:
        self.path = path
        self._conn = sqlite3.connect(path)
        self._conn.executescript(f"BEGIN;\n{SCHEMA}\nPRAGMA user_version = {VERSION};\nCOMMIT;")
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        given = json.dumps([slo_text(slo) for slo in slos])
        self._conn.execute(
            "INSERT INTO watch VALUES (?, ?, ?, NULL, '{}', ?)", (url, interval_s, started, given)
        )
        self._conn.commit()
        self._saved = time.monotonic()

    def task(self, task: WatchedTask) -> None:
        self._conn.execute(f"INSERT INTO tasks VALUES ({TASK_PLACES})", astuple(task))

    def load(self, load: Load) -> None:
        self._conn.execute(f"INSERT INTO loads VALUES ({LOAD_PLACES})", astuple(load))

    def save(self, watched: Watched, now: bool = False) -> None:
        """The watch's counters, and every row since the last save, on disk (at most once a
        second unless ``now``)."""
        if not now and time.monotonic() - self._saved < SAVE_EVERY_S:
            return
        self._saved = time.monotonic()
        counters = {
            "polls": watched.polls,
            "unanswered": watched.unanswered,
            "busy": {str(k): v for k, v in watched.busy.items()},
            "all_busy": watched.all_busy,
            "slots_on": watched.slots_on,
            "seconds": watched.seconds or (time.perf_counter_ns() - watched.started_ns) / 1e9,
            "memory_max_bytes": watched.memory_max_bytes,
            "memory_note": watched.memory_note,
            "running": [astuple(t) for t in watched.tasks.in_flight],
            "histograms_first": _buckets_out(watched.histograms_first),
            "histograms_last": _buckets_out(watched.histograms_last),
            "gaps": [[g.down_s, g.up_s] for g in watched.gaps],
            "gaps_count": watched.gaps_count,
            "down_s": watched.down_s,
            "ledger": watched.ledger.kept(),
        }
        kind = watched.kind.key if watched.kind else None
        self._conn.execute("UPDATE watch SET kind = ?, counters = ?", (kind, json.dumps(counters)))
        self._conn.commit()

    def close(self, watched: Watched) -> None:
        self.save(watched, now=True)
        self._conn.close()

    def abandon(self) -> None:
        """The watch failed before it began (the address could not be watched): no file."""
        self._conn.close()
        self.path.unlink(missing_ok=True)


def _buckets_out(histograms: dict[str, Buckets]) -> dict[str, list[list[float | str]]]:
    return {
        name: [["+Inf" if math.isinf(le) else le, n] for le, n in sorted(b.items())]
        for name, b in histograms.items()
    }


def _buckets_in(found: Any) -> dict[str, Buckets]:
    if not isinstance(found, dict):
        raise ValueError("histograms are not a table")
    histograms = {}
    for name, rows in found.items():
        if not isinstance(name, str) or not isinstance(rows, list) or len(rows) > 256:
            raise ValueError("a histogram is not a list of buckets")
        histograms[name] = {math.inf if le == "+Inf" else _number(le): _number(n) for le, n in rows}
    return histograms


def _number(value: Any, whole: bool = False) -> Any:
    """A number from the file, checked: finite, within bounds, whole where asked."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a number")
    if not math.isfinite(value) or abs(value) > MAX_NUMBER or (whole and value != int(value)):
        raise ValueError(f"{value!r} is out of range")
    return int(value) if whole else float(value)


def _maybe(value: Any, whole: bool = False) -> Any:
    return None if value is None else _number(value, whole)


@dataclass(frozen=True)
class WatchFile:
    """A kept watch: where it watched, at what interval, from when, what it saw, and the
    SLOs it was given (none in a file older than version 4)."""

    url: str
    interval_s: float
    started: str
    watched: Watched
    slos: tuple[SloTarget, ...] = ()


@contextmanager
def _opened(path: Path) -> Iterator[sqlite3.Connection]:
    """The file read-only, its version checked; every failure one clear line."""
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise WatchFileError(f"{path.name}: not a watch file ({exc})") from None
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version > VERSION:
            raise WatchFileError(
                f"{path.name}: a watch file of version {version}, newer than this workbench's "
                f"{VERSION}: update the workbench to read it"
            )
        yield conn
    except sqlite3.Error as exc:
        raise WatchFileError(f"{path.name}: not a watch file ({exc})") from None
    except (ValueError, TypeError, KeyError) as exc:
        raise WatchFileError(f"{path.name}: a damaged watch file ({exc})") from None
    finally:
        conn.close()


def read(path: Path) -> WatchFile:
    """A watch file, every value checked; one clear line for a file that is no watch, a
    newer one or a damaged one. Its rows are streamed: a watch of days reads in the memory
    of its last ``slot_tasks.KEPT`` tasks."""
    with _opened(path) as conn:
        return _watch_file(_head(path, conn), _tasks(conn), _loads(conn))


def read_whole(path: Path) -> tuple[WatchFile, list[WatchedTask], list[Load]]:
    """A watch file as ``read`` gives it, with every ended task and every load, in order,
    each row read and checked once: what a replay draws (it holds them all)."""
    with _opened(path) as conn:
        tasks, loads = list(_tasks(conn)), list(_loads(conn))
        return _watch_file(_head(path, conn), tasks, loads), tasks, loads


def _head(path: Path, conn: sqlite3.Connection) -> dict[str, Any]:
    """The watch row by its columns' names (an older file's lacks the later ones), each
    measured before it is read: a value beyond ``MAX_HEAD_CHARS`` is damage."""
    present = {row[1] for row in conn.execute("PRAGMA table_info(watch)")}
    columns = [name for name in HEAD_COLUMNS if name in present]
    sizes = conn.execute(f"SELECT {', '.join(f'length({c})' for c in columns)} FROM watch")
    size = sizes.fetchone()
    if size is None:
        raise WatchFileError(f"{path.name}: a watch file without its watch")
    if any((n or 0) > MAX_HEAD_CHARS for n in size):
        raise ValueError(f"its watch row is longer than {MAX_HEAD_CHARS:,} characters")
    head = conn.execute(f"SELECT {', '.join(columns)} FROM watch").fetchone()
    return dict(zip(columns, head, strict=True))


def _slos_in(text: Any) -> tuple[SloTarget, ...]:
    """The SLOs kept as typed, bounded, then read by ``--slo``'s own parser (None: a file
    older than version 4, given none)."""
    if text is None:
        return ()
    specs = None
    if isinstance(text, str) and len(text) <= MAX_SLOS_TEXT:
        with suppress(json.JSONDecodeError):
            specs = json.loads(text)
    if (
        not isinstance(specs, list)
        or len(specs) > MAX_SLOS
        or not all(isinstance(s, str) and len(s) <= MAX_SLO_CHARS for s in specs)
    ):
        raise ValueError(f"its SLOs are not a list of at most {MAX_SLOS} METRIC_PCT:MS")
    try:
        return parse_slos(specs) if specs else ()
    except WorkbenchError as exc:
        raise ValueError(f"its SLO {str(exc).removeprefix('--slo ')}") from None


def _tasks(conn: sqlite3.Connection) -> Iterator[WatchedTask]:
    for row in conn.execute(f"SELECT * FROM tasks LIMIT {MAX_ROWS}"):
        yield _task(row)


@dataclass(frozen=True)
class KeptInfo:
    """A kept watch in a line of a listing (``error``: why it cannot be read)."""

    path: Path
    url: str = ""
    started: str = ""
    seconds: float = 0.0
    tasks: int = 0
    kind: str = ""
    error: str = ""


def describe(path: Path) -> KeptInfo:
    """A kept watch's head, without reading its rows; an unreadable file's error."""
    try:
        with _opened(path) as conn:
            head = conn.execute("SELECT url, started, kind, counters FROM watch").fetchone()
            if head is None:
                raise WatchFileError(f"{path.name}: a watch file without its watch")
            url, started, kind, counters_text = head
            counters = json.loads(counters_text)
            if not isinstance(counters, dict) or not isinstance(url, str):
                raise WatchFileError(f"{path.name}: a damaged watch file (its watch row)")
            count = conn.execute("SELECT COUNT(*) FROM tasks").fetchone()[0]
            names = {k.key: k.name for k in KINDS}
            return KeptInfo(
                path,
                url[:2000],
                str(started)[:100],
                _number(counters.get("seconds", 0.0)),
                min(_number(count, True), MAX_ROWS),
                names.get(kind, "no /metrics"),
            )
    except WatchFileError as exc:
        return KeptInfo(path, error=str(exc))


def kept_in(folders: Iterable[Path]) -> list[KeptInfo]:
    """Every kept watch in the folders (and their subfolders), newest first."""
    paths = {p for folder in folders if folder.is_dir() for p in folder.rglob(f"*{SUFFIX}")}
    return sorted(
        (describe(p) for p in paths), key=lambda i: (i.started, str(i.path)), reverse=True
    )


def loads(path: Path) -> Iterator[Load]:
    """Every ``/metrics`` poll's load the file holds, checked, in order, one at a time."""
    with _opened(path) as conn:
        yield from _loads(conn)


def tasks(path: Path) -> Iterator[WatchedTask]:
    """Every ended task the file holds (not only the recent ones ``read`` keeps), checked,
    in the order they ended, one at a time."""
    with _opened(path) as conn:
        yield from _tasks(conn)


def _loads(conn: sqlite3.Connection) -> Iterator[Load]:
    """The loads table's rows, by their columns' names: an older file's lack the later
    counters, which read as not given."""
    rows = conn.execute(f"SELECT * FROM loads LIMIT {MAX_ROWS}")
    names = [column[0] for column in rows.description]
    for row in rows:
        load = Load(**{n: _maybe(v) for n, v in zip(names, row, strict=True) if n in LOAD_FIELDS})
        if load.t_s is None:
            raise ValueError("a load without its time")
        yield load


def _task(row: Any) -> WatchedTask:
    (
        slot,
        task,
        seen,
        last,
        decoding,
        gone,
        prompt,
        cached,
        decoded,
        at_start,
        whole,
        missed,
        seq,
    ) = row
    return WatchedTask(
        _number(slot, True),
        _number(task, True),
        _number(seen),
        _number(last),
        _maybe(decoding),
        _maybe(gone),
        _maybe(prompt, True),
        _maybe(cached, True),
        _number(decoded, True),
        bool(at_start),
        bool(whole),
        bool(missed),
        _maybe(seq, True),
    )


def _watch_file(
    head: dict[str, Any], ended: Iterable[WatchedTask], loads: Iterable[Load]
) -> WatchFile:
    url, interval_s, started, kind_key = (head[k] for k in ("url", "interval_s", "started", "kind"))
    counters = json.loads(head["counters"])
    if not isinstance(counters, dict) or not isinstance(url, str) or not isinstance(started, str):
        raise ValueError("its watch row is not one")
    kind = next((k for k in KINDS if k.key == kind_key), None)
    watched = Watched(kind=kind, slots_on=bool(counters.get("slots_on", True)))
    watched.polls = _number(counters.get("polls", 0), True)
    watched.unanswered = _number(counters.get("unanswered", 0), True)
    watched.all_busy = _number(counters.get("all_busy", 0), True)
    watched.busy = {
        _number(int(k), True): _number(v, True) for k, v in counters.get("busy", {}).items()
    }
    watched.seconds = _number(counters.get("seconds", 0.0))
    watched.memory_max_bytes = _maybe(counters.get("memory_max_bytes"), True)
    watched.memory_note = str(counters.get("memory_note", ""))[:1000]
    watched.histograms_first = _buckets_in(counters.get("histograms_first", {}))
    watched.histograms_last = _buckets_in(counters.get("histograms_last", {}))
    for down, up in counters.get("gaps", [])[:GAPS_KEPT]:
        watched.gaps.append(Gap(_number(down), _maybe(up)))
    watched.gaps_count = max(len(watched.gaps), _number(counters.get("gaps_count", 0), True))
    watched.down_s = _number(counters.get("down_s", 0.0))
    watched.ledger = TokenLedger.restored(counters.get("ledger"), _number)
    for task in ended:
        watched.tasks.restore(task)
    running = [_task(row) for row in counters.get("running", [])[:1024]]
    if len({task.slot for task in running}) < len(running):
        raise ValueError("two tasks running on one slot")
    for task in running:
        watched.tasks.restore(task, running=True)
    for load in loads:
        watched.count_load(load)
    return WatchFile(
        url[:2000], _number(interval_s), started[:100], watched, _slos_in(head.get("slos"))
    )
