"""``run --host``'s checks and flags, ``fetch`` and ``agent`` without a server: every host
is checked before anything starts, and what is wrong is one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.made_sessions import HARDWARE, write_session
from workbench.cli.main import main
from workbench.cli.run_commands import host_models
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.remote.protocol import PROTOCOL
from workbench.engine.remote.targets import TRANSPORT_VARIABLE
from workbench.engine.store import create_session, open_session
from workbench.engine.store.rows import RemoteOrigin
from workbench.engine.store.writer import write_remote_origin

pytestmark = pytest.mark.timeout(60)

WORKBENCH = str(Path(sys.executable).with_name("workbench"))
FAR_SIDES = str(Path(__file__).parents[1] / "engine" / "remote" / "far_sides.py")


@pytest.fixture(autouse=True)
def by_process(monkeypatch):
    monkeypatch.setenv(TRANSPORT_VARIABLE, "process")


def test_a_model_flag_is_every_host_s_or_one_host_s():
    hosts = ["local", "gpubox"]
    assert host_models([], hosts) == (None, {})
    assert host_models(["/m.gguf"], hosts) == ("/m.gguf", {})
    assert host_models(["gpubox=/far/m.gguf", "/m.gguf"], hosts) == (
        "/m.gguf",
        {"gpubox": "/far/m.gguf"},
    )
    assert host_models(["/a=b.gguf"], hosts) == ("/a=b.gguf", {})  # no host of the run
    with pytest.raises(WorkbenchError, match="given twice"):
        host_models(["gpubox=/a.gguf", "gpubox=/b.gguf"], hosts)
    with pytest.raises(WorkbenchError, match="given once"):
        host_models(["/a.gguf", "/b.gguf"], hosts)


def test_every_host_is_checked_and_a_problem_stops_the_run_before_anything(tmp_path, capsys):
    out = tmp_path / "out"
    far = f"env XDG_DATA_HOME={tmp_path / 'far'} {WORKBENCH}"
    hosts = ["--host", "local", "--host", "gpubox", "--remote-workbench", far]
    model = ["--model", f"gpubox={tmp_path / 'none.gguf'}"]
    code = main(["run", "--requests", "1", "--out", str(out), *hosts, *model])
    captured = capsys.readouterr()
    assert code == 1
    assert "local: workbench" in captured.out and "gpubox: workbench" in captured.out
    assert f"gpubox: model file not found: {tmp_path / 'none.gguf'}" in captured.out
    assert captured.err.strip() == "error: nothing was started: 1 problem above"
    assert not list(out.rglob("*.session.sqlite"))
    assert not (tmp_path / "far").exists()  # the agent was asked, nothing ran there


def test_another_protocol_on_a_host_is_one_line(tmp_path, capsys):
    far = f"{sys.executable} {FAR_SIDES} old"
    hosts = ["--host", "gpubox", "--remote-workbench", far]
    code = main(["run", "--requests", "1", "--out", str(tmp_path), *hosts])
    captured = capsys.readouterr()
    assert code == 1
    assert "gpubox: workbench 9.9.9 there" in captured.out
    assert f"protocol {PROTOCOL + 1} vs {PROTOCOL}" in captured.out


def test_a_host_given_twice_or_with_base_url_is_refused(tmp_path, capsys):
    assert main(["run", "--requests", "1", "--host", "a", "--host", "a"]) == 1
    assert "each --host is given once" in capsys.readouterr().err
    assert main(["run", "--requests", "1", "--host", "a", "--base-url", "http://x"]) == 1
    assert "--base-url is for a run from this machine" in capsys.readouterr().err


def test_fetch_of_a_session_measured_here_is_one_line(tmp_path, capsys):
    path = write_session(tmp_path / "here.session.sqlite")
    assert main(["fetch", "gpubox", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.strip() == f"error: {path} was measured on this machine: there is nothing to fetch"


def test_the_agent_writes_nothing_but_its_protocol_on_stdout(tmp_path):
    hello = json.dumps({"op": "hello", "protocol": PROTOCOL, "version": "0.1.0"})
    ping = json.dumps({"op": "ping", "seq": 1})
    done = subprocess.run(
        [WORKBENCH, "agent"],
        input=f"{hello}\n{ping}\n".encode(),
        capture_output=True,
        timeout=30,
        env={"XDG_DATA_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    kinds = [json.loads(line)["kind"] for line in done.stdout.splitlines()]
    assert kinds == ["hello", "pong"]


def measured_far(tmp_path: Path) -> tuple[Path, Path, str]:
    """A local session of a far run that arrived in part (no requests), and the far copy of
    that run whole, in the agent's data folder under ``tmp_path / "far"``."""
    run_id = "c0" * 16
    far_dir = tmp_path / "far" / "concurrency-workbench" / "agent" / run_id
    far_dir.mkdir(parents=True)
    far_copy = write_session(far_dir / "far.session.sqlite")
    local = tmp_path / "here" / "far.session.sqlite"
    local.parent.mkdir()
    toml = "[server]\nslots = 1\n"
    create_session(local, "made", toml, None, "managed", None, HARDWARE, 0)
    origin = RemoteOrigin(
        host="gpubox",
        run_id=run_id,
        agent_version="0.1.0",
        protocol=PROTOCOL,
        clock_offset_ns=5,
        rtt_ns=10,
        received_all=False,
    )
    write_remote_origin(local, origin)
    return local, far_copy, f"env XDG_DATA_HOME={tmp_path / 'far'} {WORKBENCH}"


def test_fetch_replaces_the_local_copy_with_the_far_one(tmp_path, capsys):
    local, far_copy, far = measured_far(tmp_path)
    assert main(["fetch", "gpubox", str(local), "--remote-workbench", far]) == 0
    assert "complete" in capsys.readouterr().out
    with open_session(local) as fetched, open_session(far_copy) as whole:
        assert fetched.records(0) == whole.records(0) and fetched.records(0)
        origin = fetched.remote_origin()
        assert origin is not None and origin.received_all and origin.clock_offset_ns == 5
        assert fetched.configs[0].log_path == f"gpubox:{whole.configs[0].log_path}"
    assert sorted(p.name for p in local.parent.iterdir()) == [local.name]


def test_a_fetched_file_that_is_not_what_was_announced_replaces_nothing(tmp_path, capsys):
    local, _, _ = measured_far(tmp_path)
    before = local.read_bytes()
    far = f"{sys.executable} {FAR_SIDES} bad-file"
    assert main(["fetch", "gpubox", str(local), "--remote-workbench", far]) == 1
    assert "sha256 is not the one announced" in capsys.readouterr().err
    assert local.read_bytes() == before
    assert sorted(p.name for p in local.parent.iterdir()) == [local.name]


def test_a_fetched_session_that_cannot_be_written_is_one_line(tmp_path, capsys):
    local, _, far = measured_far(tmp_path)
    local.with_name(local.name + ".fetching").mkdir()  # in the way of the file fetched
    assert main(["fetch", "gpubox", str(local), "--remote-workbench", far]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot write the fetched session beside") and err.count("\n") == 1
