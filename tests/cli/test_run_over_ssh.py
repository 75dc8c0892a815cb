"""``run --host`` and ``fetch`` through the real OpenSSH client and server (tests/sshd.py):
the agent started over SSH, its facts, a run's local copy, its far copy fetched."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.sshd import ALIAS, SshServer
from workbench.cli.main import main
from workbench.engine.remote.hosts import check_host
from workbench.engine.store import open_session

pytestmark = [pytest.mark.ssh, pytest.mark.timeout(180)]

WORKBENCH = str(Path(sys.executable).with_name("workbench"))
SHORT = (
    'name = "ssh"\n[server]\nslots = 1\nctx = 512\n'
    "[workload]\nrequests = 2\nmax_tokens = 4\nwarmup = 0\n"
)


def far(tmp_path: Path) -> list[str]:
    return ["env", f"XDG_DATA_HOME={tmp_path / 'far'}", WORKBENCH]


def test_a_host_over_ssh_is_checked_by_its_agent(ssh_env: SshServer, tmp_path):
    facts = check_host(ALIAS, str(tmp_path / "none.gguf"), None, far(tmp_path))
    assert facts.problems == (f"model file not found: {tmp_path / 'none.gguf'}",)
    assert facts.server_binary is not None


@pytest.mark.server
def test_a_run_over_ssh_is_recorded_here_and_fetched_whole(ssh_env: SshServer, tmp_path, capsys):
    experiment = tmp_path / "ssh.toml"
    experiment.write_text(SHORT)
    command = " ".join(far(tmp_path))
    out = tmp_path / "out"
    argv = ["run", str(experiment), "--out", str(out), "--host", ALIAS, "--quiet"]
    assert main([*argv, "--remote-workbench", command]) == 0, capsys.readouterr()
    (session,) = out.glob("*.session.sqlite")
    with open_session(session) as opened:
        records = opened.records(0)
        origin = opened.remote_origin()
        log_path = opened.configs[0].log_path
    assert log_path is not None and log_path.startswith(f"{ALIAS}:/")
    assert len(records) == 2 and origin is not None and origin.host == ALIAS
    assert main(["fetch", ALIAS, str(session), "--remote-workbench", command]) == 0
    with open_session(session) as opened:
        assert opened.records(0) == records
        assert opened.remote_origin() == origin  # it had everything already
        assert opened.configs[0].log_path == log_path  # a far path, said so once
