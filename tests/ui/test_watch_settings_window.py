"""The window's watch with the settings ``workbench watch`` takes, against the mock server:
asked by "Watch…" before the watch starts and remembered for the next; the interval polled
at, a duration that ends the watch on its own, the SLOs judged at the end as ``--slo``
judges them and shown under the verdict, the server's own /metrics read where it is given;
a bad field one line, and nothing started.

A test that watches runs whole in one run of the loop (``scenario``): qasync's
``run_until_complete`` processes Qt's pending events once more after it has unset the
running loop, and a poll's socket ready then resumes the watch with no running loop ("no
running event loop", a rare failure). Clicks are made inside that run, waits are awaited."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QWidget

from tests.ui.driving import click_until, run
from tests.ui.kept_watches import send
from tests.ui.test_watch_window import kept, watching
from workbench.cli.watch_commands import slo_lines
from workbench.engine.watch.record import read
from workbench.engine.watch.slo_judged import MET, MISSED, NOT_JUDGED, judge_kept
from workbench.mock_server.process import MockProcess
from workbench.ui.theme.qt_theme import signal_color
from workbench.ui.watch_settings import WatchSettings, WatchTexts, read_settings
from workbench.ui.watch_window import slo_cells


@pytest.fixture
def mock():
    with MockProcess("--ttft-ms", "100", "--itl-ms", "20", "--tokens", "30", "--slots", "2") as m:
        yield m


def scenario(loop, body: Callable[[], Awaitable[None]], timeout_s: float = 120) -> None:
    """``body`` in one run of the loop, its failure raised here."""
    task = asyncio.ensure_future(body(), loop=loop)
    run(loop, task.done, timeout_s)
    task.result()


async def until(condition: Callable[[], object], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s} s")
        await asyncio.sleep(0.01)


async def press(widget: QWidget, condition: Callable[[], object], timeout_s: float) -> None:
    """Click ``widget`` (in the running loop) and wait until ``condition`` holds."""
    QTest.mouseClick(widget, Qt.MouseButton.LeftButton)
    await until(condition, timeout_s)


async def traffic(url: str, at_once: int, rounds: int) -> None:
    """``rounds`` of ``at_once`` requests sent to ``url`` from a thread, until answered."""

    sender = threading.Thread(target=send, args=(url, at_once, rounds, 30))
    sender.start()
    try:
        await until(lambda: not sender.is_alive(), 120)
    finally:
        sender.join()


async def asked(window, url: str):
    """Watch… pressed with ``url`` as the External server: its settings dialog."""
    window.form.external.setChecked(True)
    window.form.base_url.setText(url)
    before = window.watch_dialog
    await press(window.watch_button, lambda: window.watch_dialog not in (None, before), 10)
    dialog = window.watch_dialog
    await until(dialog.isVisible, 10)
    return dialog


def test_the_dialogs_interval_is_polled_at_and_remembered(window, loop, mock, tmp_path):
    async def body():
        dialog = await asked(window, mock.url)
        assert dialog.interval.text() == "0.1" and dialog.duration.text() == ""  # the flags'
        dialog.interval.setText("0.2")
        watches = window.watch_windows
        await press(dialog.watch_button, lambda: watches and watches[0].model.watched, 10)
        (watch,) = watches
        assert window.watch_dialog is None  # closed, and gone
        said = f"watching {mock.url} every 0.2 s; until Stop; it sends no load"
        assert watch.status.text() == said
        assert watch.kept.text().startswith(f"kept as it goes in {tmp_path / 'out'}")
        await until(lambda: watch.model.watched.polls >= 11, 10)
        await press(watch.stop_button, lambda: watch.over, 10)
        summary = watch.model.summary
        between_s = summary.seconds / (summary.polls - 1)
        assert 0.19 <= between_s <= 0.3, between_s  # not the 0.1 s it polls at unasked
        assert read(kept(tmp_path / "out")).interval_s == 0.2
        assert watch.slos.isHidden()  # none given: no SLO lines
        # the next watch starts from what was typed, for as long as the app runs
        again = await asked(window, mock.url)
        assert again is not dialog and again.interval.text() == "0.2"
        assert window.watch_texts == WatchTexts(interval="0.2")
        again.reject()
        watch.close()

    scenario(loop, body)


def test_a_duration_ends_the_watch_on_its_own_and_keeps_it(qtbot, loop, mock, tmp_path):
    watch = watching(qtbot, mock.url, tmp_path, read_settings(WatchTexts("0.1", "2s")))

    async def body():
        await until(lambda: watch.model.watched is not None, 10)
        assert watch.status.text().startswith(f"watching {mock.url} every 0.1 s; for 2 s;")
        await until(lambda: watch.over, 10)  # no Stop pressed

    scenario(loop, body)
    summary = watch.model.summary
    assert summary is not None and 1.8 <= summary.seconds <= 2.2  # its last poll within
    assert watch.line.text() == f"verdict: {summary.verdict}"
    assert watch.status.text().endswith(f"for {summary.seconds:.1f} s, the 2 s it was given")
    assert not watch.stop_button.isEnabled() and not watch.timer.isActive()
    path = kept(tmp_path)
    assert watch.kept.text() == f"kept in {path} (workbench show reads it)"
    assert read(path).watched.polls == summary.polls
    watch.close()


def test_the_slos_are_judged_as_the_command_judges_them_and_shown(qtbot, loop, mock, tmp_path):
    settings = read_settings(WatchTexts("0.05", slos="tpot_p50:1000 itl_p90:100 e2el_p50:10"))
    watch = watching(qtbot, mock.url, tmp_path, settings)
    assert not watch.slos.isHidden()  # named before the watch ends
    assert watch.slos.title.text() == (
        "SLOs, judged when the watch ends: TPOT p50 ≤ 1,000 ms, ITL p90 ≤ 100 ms, E2EL p50 ≤ 10 ms"
    )

    async def body():
        await until(lambda: watch.model.watched is not None, 10)
        await traffic(mock.url, at_once=2, rounds=3)
        await until(lambda: watch.model.watched.tasks.ended >= 4, 10)
        await press(watch.stop_button, lambda: watch.over, 10)

    scenario(loop, body)
    judged = judge_kept(kept(tmp_path), settings.slos)  # the command's, on the same file
    assert [j.outcome for j in judged] == [MET, NOT_JUDGED, MISSED]
    assert watch.slos.isVisible() and watch.slos.title.text().startswith("SLOs on the watch")
    shown = [tuple(label.text() for label in row) for row in watch.slos.rows]
    assert shown == [slo_cells(j) for j in judged]
    for row, one in zip(shown, judged, strict=True):
        head = slo_lines(one)[0]  # what `workbench watch --slo` prints
        assert row[0] in head and row[3] in head and row[4] == one.basis
        if one.value_ms is not None:
            assert f"{row[1]} against {row[2]}: {row[3]}" in head
    met, not_judged, missed = watch.slos.rows
    assert "±" in met[1].text()  # how far the polls may put it off
    assert not_judged[1].text() == "-"
    assert not_judged[4].text().startswith("a watch sees a task's time")
    error = signal_color("error").name()
    assert error in missed[3].styleSheet() and error not in met[3].styleSheet()
    layout = watch.layout()  # under the verdict
    assert layout.indexOf(watch.slos) == layout.indexOf(watch.line) + 1
    watch.close()


@pytest.mark.parametrize(
    ("field", "text", "line"),
    [
        ("slos", "ttft_p90=3000", "SLOs: 'ttft_p90=3000': write METRIC_PCT:MS, e.g. ttft_p90"),
        ("interval", "0.01", "Interval: must be seconds from 0.02 to 60, got '0.01'"),
        (
            "metrics_url",
            "127.0.0.1:9001/metrics",
            "/metrics URL: base URL must start with http:// or https://, got "
            "'127.0.0.1:9001/metrics'",
        ),
    ],
)
def test_a_bad_setting_is_one_line_and_starts_nothing(window, loop, field, text, line, tmp_path):
    window.form.external.setChecked(True)
    window.form.base_url.setText("http://127.0.0.1:9")  # nothing is asked of it
    click_until(loop, window.watch_button, lambda: window.watch_dialog is not None, 10)
    dialog = window.watch_dialog
    getattr(dialog, field).setText(text)
    click_until(loop, dialog.watch_button, dialog.error.isVisible, 10)
    assert dialog.error.text().startswith(line) and "\n" not in dialog.error.text()
    assert dialog.isVisible() and getattr(dialog, field).hasFocus()
    assert window.watch_windows == [] and not list(tmp_path.rglob("*.watch.sqlite"))
    assert window.watch_texts == WatchTexts()  # what was refused is not remembered
    dialog.reject()


def test_a_metrics_url_given_apart_is_read_there(qtbot, loop, mock, tmp_path):
    """The address's /slots, and another server's /metrics (a proxy's server): the queue
    and the rates are that server's, loaded while the address's slots stay idle."""
    with MockProcess("--ttft-ms", "100", "--itl-ms", "20", "--tokens", "30") as behind:
        metrics = f"{behind.url}/metrics"
        settings = read_settings(WatchTexts("0.05", metrics_url=metrics))
        watch = watching(qtbot, mock.url, tmp_path, settings)

        async def body():
            await until(lambda: watch.model.watched is not None, 10)
            assert watch.status.text().endswith(f"; it sends no load; metrics from {metrics}")
            assert "slots from" not in watch.status.text()  # read at the address
            await traffic(behind.url, at_once=3, rounds=2)
            await until(lambda: watch.model.output_rate[0], 10)
            await press(watch.stop_button, lambda: watch.over, 10)

        scenario(loop, body)
    assert max(watch.model.running[1]) >= 2  # the server behind's requests at once
    assert watch.model.bars() == []  # the address's slots: nothing ran there
    assert watch.status.text().endswith(f"; metrics from {metrics}")  # said at the end too
    summary = watch.model.summary
    assert summary.in_server_max is not None and summary.in_server_max >= 2
    assert summary.tasks_ended == 0
    watch.close()


def test_the_settings_reach_the_engine(qtbot, loop, mock, tmp_path, monkeypatch):
    """What the controller hands ``watch``: the interval, the duration, the endpoints."""
    import workbench.ui.controllers.watch_controller as controller

    given = {}
    real = controller.watch

    async def spy(url, interval_s, duration_s, headers, **kw):
        given.update(interval_s=interval_s, duration_s=duration_s, endpoints=kw["endpoints"])
        return await real(url, interval_s, duration_s, headers, **kw)

    monkeypatch.setattr(controller, "watch", spy)
    slots = f"{mock.url}/slots"
    settings = WatchSettings(0.25, 1.0, (), slots, None)
    watch = watching(qtbot, mock.url, tmp_path, settings)
    run(loop, lambda: watch.over, 10)  # the whole watch in this one run
    assert given == {
        "interval_s": 0.25,
        "duration_s": 1.0,
        "endpoints": settings.endpoints(mock.url),
    }
    watch.close()
