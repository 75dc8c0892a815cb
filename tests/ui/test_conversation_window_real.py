"""A conversations run in the window on the real server: the live path colours each bar by
its conversation as it is sent and outlines the turns that lost their history."""

from __future__ import annotations

import pytest

from tests.ui.driving import click_until
from workbench.engine.config.experiment import parse_experiment

pytestmark = pytest.mark.server

ONE_SLOT = """
name = "chats"
[server]
slots = 1
ctx = 2048
[workload]
kind = "conversations"
users = 2
turns = 2
max_tokens = 8
warmup = 0
"""


def test_at_one_slot_each_second_turn_is_outlined_and_each_conversation_has_its_pane(window, loop):
    """One slot, two conversations: the slot serves the other conversation between a
    conversation's turns, so each second turn re-prefills its history (as the engine's
    real-server test measured at 1 slot)."""
    window.form.load(parse_experiment(ONE_SLOT))
    statuses: list[str] = []
    window.run_finished.connect(statuses.append)
    click_until(loop, window.run_button, lambda: statuses, 240)
    assert statuses == ["complete"], window.banner.text()
    views = window.model.ordered()
    assert sorted((v.user, v.turn) for v in views) == [("u1", 1), ("u1", 2), ("u2", 1), ("u2", 2)]
    gantt = window.gantt
    coloured = sorted(int(y) for item in gantt.conversation_bars for y in item.opts["y"])
    assert coloured == [0, 1, 2, 3]
    lost = sorted(int(y) for y in gantt.lost.opts["y"])
    assert lost == sorted(v.row for v in views if v.turn == 2)
    assert all(v.cache is not None and v.cache.lost for v in views if v.turn == 2)
    assert not window.conversation_legend.isHidden()
    titles = sorted(p.title.text() for p in window.grid.panes.values())
    assert titles == ["u1 · turn 2", "u2 · turn 2"]
    assert all("── turn 1 ──" in p.body.text() for p in window.grid.panes.values())
