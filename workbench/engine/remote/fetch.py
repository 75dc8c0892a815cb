"""``workbench fetch``: a session recorded through an agent, completed from the far copy.

The local session names the far run by its id (``remote_origin``), never by a path; the
agent finds its own copy from it. What comes is checked before it replaces anything: its
size within a bound and as announced, its sha256, and a session that opens. The local
file's ``remote_origin`` is kept (now saying it holds everything), and the far servers' log
paths are prefixed with the host, as a live run's are.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from dataclasses import replace
from pathlib import Path

from workbench.engine.base.errors import OutputDirError, SessionError, WorkbenchError
from workbench.engine.remote.link import REPLY_TIMEOUT_S, AgentLink
from workbench.engine.remote.protocol import ProtocolError
from workbench.engine.remote.targets import check_reachable, target_for
from workbench.engine.store import open_session
from workbench.engine.store.rows import CONFIGS, RemoteOrigin
from workbench.engine.store.writer import write_remote_origin


def fetch_session(
    host: str, remote_command: list[str], path: Path, timeout_s: float = REPLY_TIMEOUT_S
) -> RemoteOrigin:
    """Replace ``path`` with the far copy of its run, fetched from ``host``'s agent."""
    with open_session(path) as session:
        origin = session.remote_origin()
    if origin is None:
        raise WorkbenchError(f"{path} was measured on this machine: there is nothing to fetch")
    check_reachable(host)
    partial = path.with_name(path.name + ".fetching")
    link = AgentLink(target_for(host), remote_command)
    try:
        link.hello(timeout_s)
        link.send("fetch", run_id=origin.run_id)
        _receive(link, partial, timeout_s)
        try:
            with open_session(partial):
                pass
        except SessionError as exc:
            raise ProtocolError(f"{host} sent a session that does not open: {exc}") from None
        _far_logs(partial, host)
        write_remote_origin(partial, replace(origin, received_all=True))
        for stale in (Path(f"{path}-wal"), Path(f"{path}-shm")):  # the old file's, not this
            stale.unlink(missing_ok=True)
        os.replace(partial, path)
    except (OSError, sqlite3.Error) as exc:
        raise OutputDirError(f"cannot write the fetched session beside {path}: {exc}") from None
    finally:
        link.close()
        for leftover in (partial, Path(f"{partial}-wal"), Path(f"{partial}-shm")):
            with contextlib.suppress(OSError):
                leftover.unlink(missing_ok=True)
    return replace(origin, received_all=True)


def _receive(link: AgentLink, partial: Path, timeout_s: float) -> None:
    """The file, chunk by chunk, into ``partial``: no more than it announced (within
    ``MAX_FETCH_BYTES``: ``protocol.FileMessage``), with the sha256 it announced."""
    announced = link.expect("file", timeout_s)
    size, sha256 = announced.size, announced.sha256
    digest, written = hashlib.sha256(), 0
    with partial.open("wb") as out:
        while (message := link.receive(timeout_s)).kind == "chunk":
            chunk = message.data
            written += len(chunk)
            if written > size:
                raise ProtocolError(f"{link.host} sent more than the {size} bytes announced")
            digest.update(chunk)
            out.write(chunk)
    if message.kind != "file_end":
        raise ProtocolError(f"{link.host} sent a {message.kind} message inside a file")
    if written != size or digest.hexdigest() != sha256:
        raise ProtocolError(
            f"{link.host} sent {written} bytes whose sha256 is not the one announced"
        )


def _far_logs(path: Path, host: str) -> None:
    """Each server log's path as a path on ``host``, never one to open here."""
    column = CONFIGS.fields["log_path"].name
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.execute(
                f"UPDATE configs SET {column} = ? || {column} WHERE {column} IS NOT NULL",
                (f"{host}:",),
            )
    finally:
        with contextlib.suppress(sqlite3.Error):
            conn.close()
