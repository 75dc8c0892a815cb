"""``workbench preferences``: shows what is remembered, and forgets it."""

from __future__ import annotations

from workbench.cli.main import main
from workbench.engine.config.preferences import Preferences, load_preferences, remember


def test_the_command_shows_and_forgets(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WORKBENCH_CONFIG_DIR", str(tmp_path))
    remember(model="/models/qwen.gguf")
    assert main(["preferences"]) == 0
    out = capsys.readouterr().out
    assert f"preferences: {tmp_path / 'preferences.json'}" in out
    assert "  model: /models/qwen.gguf" in out and "  server_bin: -" in out
    assert main(["preferences", "--reset"]) == 0
    assert "forgot" in capsys.readouterr().out
    assert load_preferences() == (Preferences(), [])
