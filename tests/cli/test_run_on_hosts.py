"""``workbench run --host`` with agents run as local processes (``WORKBENCH_AGENT_TRANSPORT=
process``) against the real llama-server: the local copy of a far run, two hosts at once, a
channel dropped and the session fetched whole, an agent killed, a far disk full."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil
import pytest

from tests.engine.waiting import ended, until
from workbench.cli.main import main
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import RequestFinished, ServerReady
from workbench.engine.remote.remote_runner import RemoteRunner
from workbench.engine.remote.targets import TRANSPORT_VARIABLE, ProcessTarget
from workbench.engine.run.lifecycle import RunLifecycle
from workbench.engine.run.runner import RunOptions
from workbench.engine.store import open_session

pytestmark = [pytest.mark.server, pytest.mark.timeout(180)]

WORKBENCH = str(Path(sys.executable).with_name("workbench"))
FAR_SIDES = str(Path(__file__).parents[1] / "engine" / "remote" / "far_sides.py")
SHORT = (
    'name = "far"\n[server]\nslots = 1\nctx = 512\n'
    "[workload]\nrequests = 2\nmax_tokens = 4\nwarmup = 0\n"
)
LONGER = SHORT.replace("requests = 2", "requests = 6")


@pytest.fixture(autouse=True)
def by_process(monkeypatch):
    monkeypatch.setenv(TRANSPORT_VARIABLE, "process")


def far_command(tmp_path: Path) -> list[str]:
    """This checkout's workbench, its agent's data folder under ``tmp_path``."""
    return ["env", f"XDG_DATA_HOME={tmp_path / 'far'}", WORKBENCH]


def far_session(tmp_path: Path, run_id: str) -> Path:
    (found,) = (tmp_path / "far" / "concurrency-workbench" / "agent" / run_id).glob(
        "*.session.sqlite"
    )
    return found


def test_two_hosts_at_once_and_the_far_copy_equals_the_local(tmp_path, capsys):
    experiment = tmp_path / "far.toml"
    experiment.write_text(SHORT)
    far = " ".join(far_command(tmp_path))
    out = tmp_path / "out"
    args = ["run", str(experiment), "--out", str(out), "--host", "local", "--host", "gpubox"]
    code = main([*args, "--remote-workbench", far])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "local: workbench" in printed and "gpubox: workbench" in printed  # the checks
    (here,) = (out / "local").glob("*.session.sqlite")
    (there,) = (out / "gpubox").glob("*.session.sqlite")
    with open_session(here) as session:
        assert session.status == "complete" and session.remote_origin() is None
        assert len(session.records(0)) == 2
    with open_session(there) as session:
        origin = session.remote_origin()
        assert origin is not None and origin.host == "gpubox" and origin.received_all
        assert origin.clock_offset_ns is not None and origin.rtt_ns is not None
        records = session.records(0)
        assert session.status == "complete"
        assert session.configs[0].log_path.startswith("gpubox:/")
    with open_session(far_session(tmp_path, origin.run_id)) as session:
        assert records == session.records(0) and len(records) == 2


def runner(tmp_path: Path, command: list[str], text: str = LONGER) -> RemoteRunner:
    experiment = parse_experiment(text, name_hint="far")
    return RemoteRunner(
        experiment, RunOptions(tmp_path / "out"), ProcessTarget("gpubox"), command, None
    )


def run_until(far: RemoteRunner, event_type: type) -> tuple[RunLifecycle, object]:
    """Start ``far`` and return once its first ``event_type`` arrived."""
    lifecycle = RunLifecycle(far, stop_wait_s=30.0)
    lifecycle.prepare()
    events = lifecycle.start()
    found: list[object] = []

    def arrived() -> bool:
        found.extend(e for e in events.drain() if isinstance(e, event_type))
        return bool(found) or not far.running

    until(arrived, 120.0, f"a {event_type.__name__}")
    assert found, "the run ended first"
    return lifecycle, found[0]


def test_a_dropped_channel_leaves_an_incomplete_session_that_fetch_completes(tmp_path, capsys):
    command = [sys.executable, FAR_SIDES, "relay", *far_command(tmp_path)]
    far = runner(tmp_path, command)
    lifecycle, _ = run_until(far, RequestFinished)
    assert far._link is not None
    os.kill(far._link.process.pid, signal.SIGKILL)  # the channel (ssh) is gone
    result = lifecycle.finish()
    assert result.status == "incomplete"
    fetch = f"workbench fetch gpubox {far.session_path}"
    assert fetch in (result.error or "")
    with open_session(far.session_path) as session:
        assert session.status == "incomplete"
        kept = session.records(0)
        assert kept and any(fetch in n.text for n in session.notices())
    far_path = far_session(tmp_path, far.run_id or "")

    def far_ended() -> bool:  # the agent saw its stdin end and stopped its run
        with open_session(far_path) as session:
            return session.meta["status"] != "running"

    until(far_ended, 60.0, "the far run's end")
    argv = ["fetch", "gpubox", str(far.session_path), "--remote-workbench"]
    assert main([*argv, " ".join(far_command(tmp_path))]) == 0, capsys.readouterr()
    with open_session(far.session_path) as session, open_session(far_path) as far_copy:
        assert session.records(0) == far_copy.records(0)
        assert len(session.records(0)) >= len(kept)
        assert session.status == far_copy.status == "cancelled"
        origin = session.remote_origin()
        assert origin is not None and origin.received_all and origin.run_id == far.run_id
        assert session.configs[0].log_path.startswith("gpubox:/")


def test_an_agent_killed_leaves_no_server_running(tmp_path):
    far = runner(tmp_path, far_command(tmp_path)[2:])  # the agent is the process itself
    lifecycle, ready = run_until(far, ServerReady)
    assert isinstance(ready, ServerReady) and ready.pid is not None
    server = psutil.Process(ready.pid)
    assert far._link is not None
    os.kill(far._link.process.pid, signal.SIGKILL)
    until(lambda: ended(server), 10.0, "the server's end")
    result = lifecycle.finish()
    assert result.status == "incomplete"


def test_a_far_disk_full_is_said_here_and_fails_the_run(tmp_path):
    limited = [sys.executable, FAR_SIDES, "limited", str(160 * 1024), *far_command(tmp_path)]
    result = RunLifecycle(runner(tmp_path, limited), stop_wait_s=30.0).run()
    assert result.status == "failed"
    assert "writing the session failed" in (result.error or "")
    with open_session(result.session_path) as session:
        assert session.status == "failed"
        assert any("the session file cannot be written" in n.text for n in session.notices())
