"""The recorded demo session shipped in resources/: the lab replays on any machine, with no
server at all."""

from __future__ import annotations

from pathlib import Path

from tests.ui.driving import run
from workbench.engine.store import open_session

DEMO = Path(__file__).resolve().parents[2] / "resources" / "demo" / "slots-1-2-4.session.sqlite"


def test_the_demo_is_a_complete_recording_of_the_lab() -> None:
    before = DEMO.read_bytes()
    with open_session(DEMO) as session:
        assert session.status == "complete" and session.meta["name"] == "slots-1-2-4"
        summaries = session.summaries()
    assert [(s.label, s.status, s.value("requests"), s.value("failed")) for s in summaries] == [
        ("np=1", "ok", 8, 0),
        ("np=2", "ok", 8, 0),
        ("np=4", "ok", 8, 0),
    ]
    assert all(not s.trust_notes for s in summaries)  # nothing to doubt in a demo
    assert DEMO.read_bytes() == before  # opening it writes nothing


def test_the_demo_replays_in_the_window_with_no_server(window, loop) -> None:
    assert loop.run_until_complete(window.replay.open(DEMO))
    assert window.gantt.bar_count() > 0 and window.form.read_only
    assert window.form.fields[("server", "slots")].text() == "1, 2, 4"
    finished: list[str] = []
    window.replay_finished.connect(finished.append)
    window.replay_bar.set_speed(10)
    window.replay.seek(window.replay.playback.duration_s - 0.5)
    window.replay.play()
    run(loop, lambda: finished, 30)
    assert finished == ["complete"]
