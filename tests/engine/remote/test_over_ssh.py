"""Runs on another machine over a real SSH connection: ``workbench run --host`` through the
test sshd (tests/sshd.py) to a ``workbench agent`` at its far end, and what a dropped
connection leaves. The far workbench is this checkout's, with a data folder of the test's."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from tests.cli_process import start_run, stop, wait_for_finished_requests
from tests.engine.waiting import ended, until
from tests.sshd import SshServer, fingerprint, public
from workbench.engine.store import open_session

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(300)]

SMALL = """
name = "small"
[server]
slots = 2
ctx = 2048
[workload]
requests = 4
concurrency = 2
max_tokens = 12
warmup = 0
"""

LONG = """
name = "long"
[server]
slots = 1
ctx = 2048
[workload]
requests = 40
max_tokens = 24
warmup = 0
"""


def far_workbench(tmp_path: Path) -> str:
    """``--remote-workbench``: this checkout's workbench, keeping its runs in the test's
    folder (sshd passes no environment on, so it is named in the command)."""
    return shlex.join(
        [
            "env",
            f"XDG_DATA_HOME={tmp_path / 'far'}",
            f"WORKBENCH_CONFIG_DIR={os.environ['WORKBENCH_CONFIG_DIR']}",
            sys.executable,
            "-m",
            "workbench",
        ]
    )


def far_sessions(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "far").rglob("*.session.sqlite"))


def workbench(*args: str, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "workbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        stdin=subprocess.DEVNULL,
    )


def run_on(tmp_path: Path, experiment: str, *hosts: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "experiment.toml"
    path.write_text(experiment)
    flags = [word for host in hosts for word in ("--host", host)]
    return workbench(
        "run", str(path), "--out", str(tmp_path / "out"), *flags,
        "--remote-workbench", far_workbench(tmp_path),
    )  # fmt: skip


def same_requests(near: Path, far: Path) -> None:
    with open_session(near) as here, open_session(far) as there:
        assert here.status == there.status
        assert here.records(0) == there.records(0)
        origin = here.remote_origin()
    assert origin is not None and origin.host == "wbtest" and origin.received_all


@pytest.mark.server
def test_a_run_over_ssh_records_here_what_the_far_side_measured(ssh_env: SshServer, tmp_path):
    done = run_on(tmp_path, SMALL, "wbtest")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("wbtest: workbench ")
    [near] = (tmp_path / "out").glob("*.session.sqlite")
    [far] = far_sessions(tmp_path)
    same_requests(near, far)
    with open_session(near) as session:
        assert session.status == "complete"
        assert [r.ok for r in session.records(0)] == [True] * 4


@pytest.mark.server
def test_this_machine_and_one_over_ssh_run_side_by_side(ssh_env: SshServer, tmp_path):
    done = run_on(tmp_path, SMALL, "local", "wbtest")
    assert done.returncode == 0, done.stdout + done.stderr
    [here] = (tmp_path / "out" / "local").glob("*.session.sqlite")
    [there] = (tmp_path / "out" / "wbtest").glob("*.session.sqlite")
    [far] = far_sessions(tmp_path)
    same_requests(there, far)
    with open_session(here) as session:
        assert session.status == "complete" and session.remote_origin() is None
        assert [r.ok for r in session.records(0)] == [True] * 4
    assert f"local: session {here}" in done.stdout
    assert f"wbtest: session {there}" in done.stdout


@pytest.mark.server
def test_a_dropped_connection_leaves_both_sessions_and_fetch_completes_the_near_one(
    ssh_env: SshServer, tmp_path
):
    proc, out, log = start_run(
        LONG, tmp_path, "--host", "wbtest", "--remote-workbench", far_workbench(tmp_path)
    )
    try:
        progress = wait_for_finished_requests(proc, out, log, count=2, timeout_s=180)
        # The far agent and its server: orphans once sshd's session process has gone.
        far_side = psutil.Process(ssh_env.process.pid).children(recursive=True)
        assert {"llama-server"} <= {p.name() for p in far_side}
        [client] = [p for p in psutil.Process(proc.pid).children() if p.name() == "ssh"]
        client.kill()  # the connection drops: the far side sees its stdin end
        assert proc.wait(60) != 0, log.read_text()
    finally:
        stop(proc)
    said = log.read_text()
    assert f"`workbench fetch wbtest {progress.session}` completes it" in " ".join(said.split())
    # The far side stops its server, keeps its session, and its agent exits.
    until(lambda: all(ended(p) for p in far_side), within_s=60, what="the far side's ending")
    [far] = far_sessions(tmp_path)
    with open_session(progress.session) as near, open_session(far) as there:
        assert near.status == "incomplete" and there.status == "cancelled"
        # A request's slot may be read from the server's log when its configuration
        # ends, which the near side never heard of.
        kept = [replace(r, slot=None) for r in near.records(0) if r.ok]
        assert len(kept) >= 2
        measured = [replace(r, slot=None) for r in there.records(0)]
        assert all(r in measured for r in kept)
    fetched = workbench(
        "fetch", "wbtest", str(progress.session), "--remote-workbench", far_workbench(tmp_path)
    )
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    assert fetched.stdout.endswith("from wbtest, complete\n")
    same_requests(progress.session, far)


def test_a_changed_host_key_is_refused_before_anything_starts(ssh_env: SshServer, tmp_path):
    dest = ssh_env.mismatch_alias("run-changed")
    done = run_on(tmp_path, SMALL, dest)
    assert done.returncode == 1
    expected = fingerprint(public(ssh_env.host_key))
    assert done.stdout == (
        f"{dest}: the host key of 127.0.0.1 port {ssh_env.port} has CHANGED since it was "
        f"trusted ({expected} now): refused. If the machine was reinstalled, remove the old "
        f'key with: ssh-keygen -f "{ssh_env.known_hosts_of(dest)}" -R '
        f'"[127.0.0.1]:{ssh_env.port}"\n'
    )
    assert done.stderr == "error: nothing was started: 1 problem above\n"
    assert not far_sessions(tmp_path) and not (tmp_path / "out").exists()


def test_an_unknown_host_key_is_refused_with_the_command_that_accepts_it(
    ssh_env: SshServer, tmp_path
):
    dest = ssh_env.unknown_alias("run-unknown")
    done = run_on(tmp_path, SMALL, dest)
    assert done.returncode == 1
    assert done.stdout == (
        f"{dest}: the host key of 127.0.0.1 port {ssh_env.port} is not known "
        f"({fingerprint(public(ssh_env.host_key))}): if that is the machine's key, accept it "
        f"with: {ssh_env.ssh_command} {dest} true (and answer yes if it shows the same "
        "fingerprint)\n"
    )
    assert ssh_env.known_hosts_of(dest).read_text() == ""
