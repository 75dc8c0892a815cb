"""Presentation mode: the caption's wording, the state colours under colour-blind vision,
the speaker's keys on the recorded demo session, and the window put back as it was."""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.ui.driving import run
from workbench.cli.run_commands import add_gui_arguments
from workbench.engine.base.states import RequestState
from workbench.engine.events import RequestSubmitted
from workbench.engine.run.replay import Playback, load_session
from workbench.ui.app import stop_at
from workbench.ui.captions import Phase, caption, phase_of
from workbench.ui.controllers.replay_controller import config_starts
from workbench.ui.presentation import THEME, ZOOM_STEP_PT, font_for_screen
from workbench.ui.run_model import RunModel
from workbench.ui.theme.qt_theme import state_color, theme_name

DEMO = Path(__file__).resolve().parents[2] / "resources" / "demo" / "slots-1-2-4.session.sqlite"


# -- the caption's wording ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("phase", "text"),
    [
        (Phase(), "Ready to run"),
        (Phase(status="running"), "Starting…"),
        (
            Phase("np=2", 2, status="running", starting=True),
            "np=2: starting the server with 2 slots",
        ),
        (
            Phase("np=1", 1, status="running", starting=True),
            "np=1: starting the server with 1 slot",
        ),
        (Phase("np=1", status="running", starting=True), "np=1: starting the server"),
        (Phase("np=1", 1, queued=8, status="running"), "8 requests, 1 slot: all 8 waiting"),
        (Phase("np=1", 1, queued=1, status="running"), "1 request, 1 slot: all 1 waiting"),
        (
            Phase("np=1", 1, queued=7, prefill=1, status="running"),
            "8 requests, 1 slot: 1 in prefill, 7 waiting",
        ),
        (
            Phase("np=1", 1, queued=5, decoding=1, done=2, status="running"),
            "8 requests, 1 slot: 1 decoding, 5 waiting, 2 answered",
        ),
        (
            Phase("np=4", 4, queued=4, decoding=4, status="running"),
            "8 requests, 4 slots: 4 decoding together, 4 waiting",
        ),
        (
            Phase("np=4", 4, decoding=3, done=4, failed=1, status="running"),
            "8 requests, 4 slots: 3 decoding together, 4 answered, 1 failed",
        ),
        (
            Phase("ext", None, decoding=2, status="running"),
            "2 requests: 2 decoding together",
        ),
        (
            Phase("np=1", 1, done=8, span_s=12.34, status="running"),
            "1 slot: all 8 answered in 12.3 s",
        ),
        (
            Phase("np=4", 4, done=1, span_s=0.5, status="complete"),
            "4 slots: the request answered in 0.5 s",
        ),
        (
            Phase("np=2", 2, done=6, failed=2, span_s=3.0, status="complete"),
            "2 slots: 6 of 8 answered in 3.0 s, 2 failed",
        ),
        (Phase("np=2", 2, failed=8, status="complete"), "2 slots: all 8 failed"),
        (
            Phase("np=2", 2, done=5, failed=1, cancelled=2, span_s=3.0, status="cancelled"),
            "2 slots: 5 of 8 answered in 3.0 s, 1 failed, 2 cancelled",
        ),
        (Phase("np=2", 2, cancelled=8, status="cancelled"), "2 slots: all 8 cancelled"),
        (
            Phase("np=2", 2, failed=1, cancelled=1, status="cancelled"),
            "2 slots: 0 of 2 answered, 1 failed, 1 cancelled",
        ),
        (
            Phase("np=4", 4, decoding=3, done=4, cancelled=1, status="running"),
            "8 requests, 4 slots: 3 decoding together, 4 answered, 1 cancelled",
        ),
        (Phase("np=2", 2, failed=1, status="complete"), "2 slots: the request failed"),
        (Phase("ext", None, done=3, span_s=1.0, status="complete"), "ext: all 3 answered in 1.0 s"),
        (Phase("np=2", 2, queued=5, done=3, status="cancelled"), "Stopped: 3 of 8 answered"),
    ],
)
def test_the_caption_says_what_happens_now(phase: Phase, text: str) -> None:
    assert caption(phase) == text


def test_the_caption_follows_the_demo_session_through_its_phases() -> None:
    events, _ = load_session(DEMO)
    playback = Playback(events)
    starts = config_starts(playback)
    model = RunModel()
    played = playback.seek_forward(starts[0] + 0.001)
    model.apply(played)
    first = phase_of(model)
    # Every measured request sent so far is counted, in one of its states.
    sent = sum(isinstance(e, RequestSubmitted) and not e.warmup for e in played)
    assert sent > 0 and (first.label, first.slots, first.requests) == ("np=1", 1, sent)
    assert first.queued + first.prefill >= first.requests - 1  # one slot: at most one served
    model.apply(playback.seek_forward(playback.duration_s))
    last = phase_of(model)
    shown = model.current_requests()
    took = max(v.t_done for v in shown) - min(v.t_submit for v in shown)
    assert caption(last) == f"4 slots: all {len(shown)} answered in {took:.1f} s"


def test_configurations_start_at_their_first_request() -> None:
    events, _ = load_session(DEMO)
    playback = Playback(events)
    firsts: dict[int, float] = {}
    for t_ns, event in events:
        if isinstance(event, RequestSubmitted) and not event.warmup:
            firsts.setdefault(event.config_index, (t_ns - playback.start_ns) / 1e9)
    assert config_starts(playback) == [firsts[0], firsts[1], firsts[2]]
    assert firsts[0] < firsts[1] < firsts[2] < playback.duration_s


# -- the state colours ---------------------------------------------------------------------------
# Machado, Oliveira & Fernandes (2009), full severity, on linear RGB.
SIMULATIONS = {
    "normal": ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)),
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
}
LEAST_DELTA_E = 22.0  # CIE76: the old palette's queued and done were 20.2 apart (deuteranopia)


def lab_as_seen(hex_color: str, matrix: tuple) -> tuple[float, float, float]:
    """CIELAB (D65) of a colour as someone with that vision sees it."""

    def linear(c: int) -> float:
        v = c / 255
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    rgb = [linear(int(hex_color[i : i + 2], 16)) for i in (1, 3, 5)]
    r, g, b = (
        min(1.0, max(0.0, sum(m * c for m, c in zip(row, rgb, strict=True)))) for row in matrix
    )
    x, y, z = (
        (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
        0.2126 * r + 0.7152 * g + 0.0722 * b,
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
    )

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


@pytest.mark.parametrize("vision", SIMULATIONS)
def test_the_request_states_stay_apart_for_colour_blind_eyes(vision: str) -> None:
    colours = {state: state_color(state).name() for state in RequestState}
    seen = {state: lab_as_seen(c, SIMULATIONS[vision]) for state, c in colours.items()}
    closest = min(
        (math.dist(seen[a], seen[b]), a, b) for a, b in itertools.combinations(RequestState, 2)
    )
    assert closest[0] >= LEAST_DELTA_E, f"{vision}: {closest[1]} and {closest[2]} look alike"


def test_the_simulation_finds_colours_a_deuteranope_confuses() -> None:
    """The check can fail: red and green, far apart to most eyes, are close to a deuteranope."""
    red, green = "#d62728", "#2ca02c"
    normal = math.dist(*(lab_as_seen(c, SIMULATIONS["normal"]) for c in (red, green)))
    deutan = math.dist(*(lab_as_seen(c, SIMULATIONS["deuteranopia"]) for c in (red, green)))
    assert normal > 60 and deutan < LEAST_DELTA_E


# -- the command line ----------------------------------------------------------------------------
def test_the_type_takes_the_same_share_of_any_projector() -> None:
    assert font_for_screen(1080) == 18 and font_for_screen(2160) == 36
    assert font_for_screen(720) == 12 and font_for_screen(600) == 12  # never smaller


def test_present_and_a_screenshot_at_a_moment_parse() -> None:
    parser = argparse.ArgumentParser()
    add_gui_arguments(parser)
    args = parser.parse_args(["--present", "--screenshot-at", "12.5", "--theme", "projector"])
    assert args.present and args.screenshot_at == 12.5 and args.theme == "projector"
    assert not parser.parse_args([]).present


# -- the window ----------------------------------------------------------------------------------
def press(qtbot, window, key: Qt.Key, modifier=Qt.KeyboardModifier.NoModifier) -> None:
    qtbot.keyClick(window, key, modifier)


def looks(window) -> tuple:
    """What presentation mode changes and must give back."""
    app = QApplication.instance()
    return (
        window.geometry(),
        window.isFullScreen(),
        theme_name(app),
        app.font().pointSizeF(),
        window.splitter.sizes(),
        window.views.orientation(),
        window.views.sizes(),
        window.left.isVisible(),
        window.side.isVisible(),
        window.open_button.isVisible(),
        window.status.isVisible(),
        window.banner.isVisible(),
        window.caption.isVisible(),
        window.form.minimumSizeHint(),  # combo boxes once kept their large-type least width
    )


def grid_config(window) -> int:
    return {key[0] for key in window.grid.panes}.pop()


def test_presenting_and_back_with_the_speakers_keys(window, loop, qtbot) -> None:
    assert loop.run_until_complete(window.replay.open(DEMO))
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    before = looks(window)
    press(qtbot, window, Qt.Key.Key_Space)
    assert not window.replay.timer.isActive()  # no speaker's keys outside presentation mode

    press(qtbot, window, Qt.Key.Key_F5)
    assert window.presentation.on and window.isFullScreen()
    assert theme_name(QApplication.instance()) == THEME
    large = font_for_screen(window.screen().geometry().height())
    assert QApplication.instance().font().pointSizeF() == large > before[3]
    assert window.views.orientation() == Qt.Orientation.Horizontal  # side by side
    assert not window.left.isVisible() and not window.side.isVisible()
    assert not window.banner.isVisible()  # "press Replay": not for the audience
    assert window.caption.isVisible() and window.caption.text().startswith("4 slots: all 8")

    press(qtbot, window, Qt.Key.Key_F11)
    assert not window.isFullScreen()
    press(qtbot, window, Qt.Key.Key_F11)
    assert window.isFullScreen()
    press(qtbot, window, Qt.Key.Key_Left)  # the start of the last configuration
    assert grid_config(window) == 2 and window.caption.text().startswith("8 requests, 4 slots:")
    press(qtbot, window, Qt.Key.Key_Left)
    assert grid_config(window) == 1 and "2 slots" in window.caption.text()
    press(qtbot, window, Qt.Key.Key_Right)
    assert grid_config(window) == 2
    position = window.replay.playback.position_s

    press(qtbot, window, Qt.Key.Key_Space)
    assert window.replay.timer.isActive()
    run(loop, lambda: window.replay.playback.position_s > position, 10)
    press(qtbot, window, Qt.Key.Key_Escape)
    assert not window.replay.timer.isActive()

    press(qtbot, window, Qt.Key.Key_C)
    assert not window.caption.isVisible()
    press(qtbot, window, Qt.Key.Key_C)
    assert window.caption.isVisible()
    pane = next(iter(window.grid.panes.values()))
    press(qtbot, window, Qt.Key.Key_Equal, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.instance().font().pointSizeF() == large + ZOOM_STEP_PT
    qtbot.waitUntil(lambda: pane.font().pointSizeF() == large + ZOOM_STEP_PT)  # the panes too
    press(qtbot, window, Qt.Key.Key_Minus, Qt.KeyboardModifier.ControlModifier)
    assert QApplication.instance().font().pointSizeF() == large

    press(qtbot, window, Qt.Key.Key_F5)
    assert not window.presentation.on
    assert looks(window) == before
    assert not window.play_action.isEnabled()


def test_a_screenshot_at_a_moment_of_the_session(window, loop) -> None:
    """--screenshot-at: the session as it stood then (shown, or played up to it)."""
    ended: list[str] = []
    stop_at(window, 2.0, played=True, then=ended.append)
    window.open_session_later(DEMO, replay_speed=10)
    run(loop, lambda: ended, 30)
    assert ended == ["complete"] and not window.replay.timer.isActive()
    assert 2.0 <= window.replay.playback.position_s < 3.0

    ended.clear()
    stop_at(window, 3.0, played=False, then=ended.append)
    window.open_session_later(DEMO)
    run(loop, lambda: ended, 30)
    assert ended == ["complete"] and window.replay.playback.position_s == 3.0
    assert window.model.status == "running"  # mid-session: the live view


@pytest.mark.server
def test_captions_follow_a_live_run(window, loop) -> None:
    """Live, on the real server: the caption moves through the run's phases and ends with
    how long the configuration took, the window presenting throughout."""
    from workbench.engine.config.experiment import parse_experiment

    window.form.load(
        parse_experiment(
            'name = "live"\n[server]\nslots = 1\nctx = 2048\n'
            "[workload]\nrequests = 3\nmax_tokens = 8\nwarmup = 0\n"
        )
    )
    window.presentation.set_on(True)
    seen: list[str] = []
    window.caption.setText("")
    window.runs.pump.timeout.connect(lambda: seen.append(window.caption.text()))
    statuses: list[str] = []
    window.run_finished.connect(statuses.append)
    window.play_action.trigger()  # Space: nothing open, so it runs
    run(loop, lambda: statuses, 120)
    assert statuses == ["complete"], window.banner.text()
    assert any(text.startswith("3 requests, 1 slot: ") for text in seen)
    assert window.caption.text().startswith("1 slot: all 3 answered in ")
    window.presentation.set_on(False)
