"""Where a session measured through ``workbench agent`` came from: written, replaced, read."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tests.made_sessions import write_session
from workbench.engine.store import open_session
from workbench.engine.store.rows import RemoteOrigin
from workbench.engine.store.writer import write_remote_origin

ORIGIN = RemoteOrigin(
    host="gpubox",
    run_id="0" * 32,
    agent_version="0.1.0",
    protocol=1,
    clock_offset_ns=-1234,
    rtt_ns=5678,
    received_all=False,
)


def test_a_session_measured_here_has_no_remote_origin(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.session.sqlite")
    with open_session(path) as session:
        assert session.remote_origin() is None


def test_the_remote_origin_reads_back_and_is_replaced(tmp_path: Path) -> None:
    path = write_session(tmp_path / "s.session.sqlite")
    write_remote_origin(path, ORIGIN)
    with open_session(path) as session:
        assert session.remote_origin() == ORIGIN
    write_remote_origin(path, replace(ORIGIN, received_all=True))
    with open_session(path) as session:
        assert session.remote_origin() == replace(ORIGIN, received_all=True)
