"""The paced repaint: 60 frames a second, each with bounded work, counted in panes drawn
(never timed: the machine's speed must not decide a test)."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tests.ui.test_run_model import S
from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import (
    ConfigStarted,
    ExperimentFinished,
    ExperimentStarted,
    FirstToken,
    RequestSubmitted,
    TokenChunkArrived,
)
from workbench.ui.views.stream_grid import BIND_DRAWS, MAX_PANES, PANE_DRAWS_PER_FRAME

KEYS = [(0, 0, i) for i in range(MAX_PANES)]


def burst() -> list[object]:
    """A run whose first configuration sends 64 requests at once."""
    config = parse_experiment("[server]\nslots = 64\n").configs()[0]
    return [
        ExperimentStarted("e", "s", 1, "external", 0),
        ConfigStarted(config, MAX_PANES),
        *(RequestSubmitted(*key, False, S // 100) for key in KEYS),
    ]


def test_the_views_repaint_at_60_hz(window):
    for timer in (window.pump, window.replay.timer):
        assert 1000 / timer.interval() >= 60
        assert timer.timerType() == Qt.TimerType.PreciseTimer


def test_a_burst_of_64_requests_is_drawn_over_short_frames(window, monkeypatch):
    """The frame the requests arrive in binds a few panes, not 64 (that frame held the
    window for 135 ms); a frame that redraws the Gantt binds none; all show within a few
    frames, in their order."""
    plotted = []
    sync = window.gantt.sync
    monkeypatch.setattr(window.gantt, "sync", lambda *a: (plotted.append(True), sync(*a)))
    counts: list[int] = []
    events = burst()
    while not counts or counts[-1] < MAX_PANES:
        plotted.clear()
        window.renderer.render(events, 0.02 + 0.016 * len(counts))
        events = []
        shown = sum(pane.isVisible() for pane in window.grid.panes.values())
        added = shown - (counts[-1] if counts else 0)
        assert added <= (0 if plotted else PANE_DRAWS_PER_FRAME // BIND_DRAWS)
        counts.append(shown)
        assert len(counts) <= 20, f"64 panes not shown after 20 frames: {counts}"
    assert len(window.grid.panes) == MAX_PANES


def test_the_last_frame_draws_what_waited(window):
    """Paced frames leave panes and texts for the next frames; the frame that ends the run
    draws all that still waited, so the panes end whole."""
    window.renderer.render([*burst(), *(FirstToken(*key, S) for key in KEYS)], 1.0)
    window.renderer.render([TokenChunkArrived(*key, 2 * S, " last") for key in KEYS], 2.0)
    assert not all(pane.text.endswith(" last") for pane in window.grid.panes.values())
    window.renderer.render([ExperimentFinished("complete")], 2.0)
    assert all(pane.isVisible() for pane in window.grid.panes.values())
    assert all(pane.text == " last" for pane in window.grid.panes.values())
