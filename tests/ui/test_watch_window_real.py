"""The watch window on a real llama-server (2 slots) while requests reach it: its tasks
with their prompts and cached tokens, its queue, its memory, and the watch kept."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from tests.ui.driving import click_until, run
from tests.ui.test_watch_window import kept, points, traffic, watching
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.server.llama_server import LlamaServer
from workbench.engine.watch.record import read

pytestmark = pytest.mark.server

PROMPT = "The watch sends no request of its own; it polls. " * 24


def test_a_real_server_watched_in_the_window(qtbot, loop, server_binary, model_path, tmp_path):
    settings = replace(ServerSettings(), slots=2, ctx=4096)
    server = LlamaServer(server_binary, model_path, settings, tmp_path / "server.log")
    loop.run_until_complete(server.start())
    try:
        watch = watching(qtbot, server.base_url, tmp_path / "out")
        # three at once on two slots, twice: a queue, and the same prompt found cached
        with traffic(loop, server.base_url, at_once=3, rounds=2, prompt=PROMPT, tokens=12):
            run(loop, lambda: watch.model.watched is not None, 30)
        run(loop, lambda: watch.gantt.bar_count() >= 6, 10)  # drawn, a frame later
        assert watch.model.slot_count() == 2
        bars = [b for b in watch.model.bars() if not b.missed]
        assert all(b.prompt and b.prompt > 100 for b in bars if b.decoding is not None)
        assert any(b.cached for b in bars)  # a slot kept the prompt it had read
        assert points(watch.plots.waiting) >= 2 and watch.plots.memory.isVisible()
        click_until(loop, watch.stop_button, lambda: watch.over, 10)
        summary = watch.model.summary
        assert summary is not None and summary.memory_max_bytes
        assert summary.verdict in watch.line.text()
        file = read(kept(tmp_path / "out"))
        assert file.watched.tasks.ended == summary.tasks_ended
        watch.close()
    finally:
        loop.run_until_complete(asyncio.to_thread(server.stop))
