"""Watch a server from the window, against the mock server under traffic: the slots' tasks
and the queue live, Stop's summary and verdict, the watch kept as ``workbench watch`` keeps
it; an address it cannot watch in one line; the window closed mid-watch, its SLOs kept."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.ui.driving import click, click_until, run
from tests.ui.kept_watches import send
from workbench.engine.tune.slo_targets import parse_slos
from workbench.engine.watch.record import read
from workbench.mock_server.process import MockProcess
from workbench.ui.watch_settings import WatchSettings
from workbench.ui.watch_window import NO_SLOTS, WatchWindow

INTERVAL_S = 0.05


@contextmanager
def traffic(
    loop, url: str, at_once: int, rounds: int, prompt: str = "x" * 200, tokens: int = 40
) -> Iterator[None]:
    """``rounds`` of ``at_once`` requests sent to ``url`` from a thread meanwhile; at the
    end the loop runs (the watch polls) until they are all answered."""

    sender = threading.Thread(target=send, args=(url, at_once, rounds, tokens, prompt))
    sender.start()
    try:
        yield
        run(loop, lambda: not sender.is_alive(), 240)  # a loaded machine's real server
    finally:
        sender.join()


@pytest.fixture
def mock() -> Iterator[MockProcess]:
    with MockProcess("--ttft-ms", "100", "--itl-ms", "20", "--tokens", "40", "--slots", "2") as m:
        yield m


def watching(qtbot, url: str, out: Path, settings: WatchSettings | None = None) -> WatchWindow:
    window = WatchWindow(url, None, out, settings or WatchSettings(INTERVAL_S))
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    window.start()
    return window


def points(curve) -> int:
    x, _ = curve.getData()
    return 0 if x is None else len(x)


def kept(folder: Path) -> Path:
    (path,) = folder.glob("watch-*.watch.sqlite")
    return path


def test_a_watch_of_the_mock_shows_its_slots_and_queue_then_the_summary(
    window, loop, mock, tmp_path
):
    window.form.external.setChecked(True)
    window.form.base_url.setText(mock.url)
    watches = window.watch_windows
    click_until(loop, window.watch_button, lambda: window.watch_dialog is not None, 10)
    start = window.watch_dialog.watch_button  # the settings as they come: every 0.1 s
    click_until(loop, start, lambda: watches and watches[0].model.watched, 10)
    (watch,) = window.watch_windows
    assert watch.windowTitle().startswith(f"Watching {mock.url}")
    watch.resize(1366, 768)
    with traffic(loop, mock.url, at_once=3, rounds=3):
        run(loop, lambda: watch.gantt.bar_count() >= 3 and watch.gantt.label_texts(), 30)
        queue = (watch.plots.running, watch.plots.waiting)
        run(loop, lambda: min(points(curve) for curve in queue) >= 2, 30)
    assert watch.gantt.bar_count() >= 3 and watch.context.shares  # a row each slot, live
    assert {bar.slot for bar in watch.model.bars()} <= {0, 1}
    assert watch.status.text().startswith(f"watching {mock.url} every 0.1 s")
    click_until(loop, watch.stop_button, lambda: watch.over, 10)
    summary = watch.model.summary
    assert summary is not None and summary.tasks_ended >= 3
    assert watch.line.text() == f"verdict: {summary.verdict}" and watch.line.isVisible()
    assert watch.figures.horizontalHeaderItem(1).text() == "summary"
    path = kept(tmp_path / "out")  # the window's own results folder, as the CLI names it
    assert watch.kept.text() == f"kept in {path} (workbench show reads it)"
    file = read(path)
    assert file.url == mock.url and file.watched.tasks.ended == summary.tasks_ended
    assert not watch.timer.isActive()
    watch.close()


def test_the_button_asks_for_the_external_servers_address(window, loop):
    assert not window.form.external.isChecked()
    click(loop, window.watch_button)
    assert window.watch_windows == []
    assert "tick External server" in window.banner.text()


def test_an_address_where_nothing_answers_is_one_line_and_keeps_nothing(qtbot, loop, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    watch = watching(qtbot, url, tmp_path)
    run(loop, lambda: watch.over, 10)
    assert watch.line.text().startswith(f"nothing answers at {url}")
    assert "\n" not in watch.line.text()
    assert not watch.stop_button.isEnabled() and not watch.timer.isActive()
    assert list(tmp_path.glob("*.watch.sqlite")) == []
    watch.close()


def test_an_api_key_variable_not_set_is_one_line(qtbot, loop, tmp_path, monkeypatch):
    monkeypatch.delenv("WATCH_TEST_KEY", raising=False)
    watch = WatchWindow("http://127.0.0.1:9", "WATCH_TEST_KEY", tmp_path, WatchSettings(INTERVAL_S))
    qtbot.addWidget(watch)
    watch.start()
    assert "WATCH_TEST_KEY: that environment variable is not set" in watch.line.text()
    assert watch.controller.task is None and not watch.stop_button.isEnabled()


def test_a_results_folder_it_cannot_write_is_one_line(qtbot, loop, mock, tmp_path):
    taken = tmp_path / "results"
    taken.write_text("a file, not a folder")
    watch = watching(qtbot, mock.url, taken)
    run(loop, lambda: watch.over, 10)
    assert watch.line.text().startswith(f"the watch cannot be kept in {taken}: ")
    assert watch.controller.task is not None and not watch.controller.running
    watch.close()


def test_closing_the_window_mid_watch_cancels_it_and_keeps_the_file(qtbot, loop, mock, tmp_path):
    slos = parse_slos(["ttft_p90:2000", "e2el_p99:20000"])
    watch = watching(qtbot, mock.url, tmp_path, WatchSettings(INTERVAL_S, slos=slos))
    with traffic(loop, mock.url, at_once=2, rounds=2):
        run(loop, lambda: watch.model.watched and watch.model.watched.tasks.ended, 30)
    task = watch.controller.task
    assert task is not None
    watch.close()
    run(loop, task.done, 10)
    assert task.cancelled()
    path = kept(tmp_path)
    run(loop, lambda: read(path).watched.polls > 0, 10)  # closed on the keeper's thread
    assert read(path).watched.tasks.ended >= 1
    assert read(path).slos == slos  # not judged here: kept for `show` and a replay


def test_a_vllm_server_is_watched_by_its_metrics_alone(qtbot, loop, tmp_path):
    with MockProcess(
        "--ttft-ms", "100", "--itl-ms", "20", "--tokens", "20", "--metrics", "vllm"
    ) as m:
        watch = watching(qtbot, m.url, tmp_path)
        with traffic(loop, m.url, at_once=3, rounds=2):
            run(loop, lambda: watch.model.running[1] and max(watch.model.running[1]) > 0, 30)
        run(loop, lambda: watch.model.output_rate[0], 10)
        assert watch.slots_row.isHidden() and NO_SLOTS in watch.status.text()
        assert not watch.plots.notes["requests"].isVisible()
        click_until(loop, watch.stop_button, lambda: watch.over, 10)
    assert dict(watch.model.figures())["in the server at once"].endswith("max 3")
    watch.close()


def test_a_server_gone_mid_watch_is_said_and_the_watch_goes_on(qtbot, loop, tmp_path):
    mock = MockProcess("--slots", "2")
    try:
        watch = watching(qtbot, mock.url, tmp_path)
        run(loop, lambda: watch.model.watched is not None and watch.model.now > 0.2, 10)
    finally:
        mock.stop()
    run(loop, lambda: "the server is down (no answer)" in watch.line.text(), 10)
    assert watch.controller.running
    polls = watch.model.watched.unanswered
    run(loop, lambda: watch.model.watched.unanswered > polls, 10)  # it goes on polling
    click_until(loop, watch.stop_button, lambda: watch.over, 10)
    assert "not (down or slow)" in dict(watch.model.figures())["polls"]
    watch.close()
