"""``workbench preferences`` shows the Machine picker's lists as the hosts they hold."""

from __future__ import annotations

from workbench.cli.main import main
from workbench.engine.config.preferences import remember


def test_the_machines_are_shown_as_hosts(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path))
    remember(machines_ticked=("local", "gpubox"))
    assert main(["preferences"]) == 0
    out = capsys.readouterr().out
    assert "  machines_ticked: local, gpubox" in out and "  machines: -" in out
