"""Starting the window: one QApplication, one qasync event loop, optional scripted runs."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

import qasync
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.states import RunStatus
from workbench.engine.remote.ssh import check_dest
from workbench.engine.remote.targets import LOCAL
from workbench.engine.run.replay import Playback
from workbench.ui.controllers.hosts_controller import engine_machines
from workbench.ui.gui_thread_gc import GuiThreadGarbageCollection
from workbench.ui.main_window import MainWindow
from workbench.ui.theme.qt_theme import app_icon, apply_theme


def build_window(args: argparse.Namespace) -> tuple[MainWindow, bool]:
    """The window with the experiment loaded; False when the experiment could not be."""
    machines = engine_machines(args.remote_workbench)
    window = MainWindow(Path(args.out), server_bin=args.server_bin, machines=machines)
    window.resize(*args.size)  # WIDTHxHEIGHT, checked by its flag
    if args.hosts:
        window.form.machines.tick_only(args.hosts)
    loaded = True
    try:
        window.form.load_file(args.experiment)
    except WorkbenchError as exc:
        window.show_banner(str(exc), "error")
        loaded = False
    if args.base_url:
        window.form.external.setChecked(True)
        window.form.base_url.setText(args.base_url)
        window.form.api_key_env.setText(args.api_key_env or "")
    return window, loaded


def stop_at(
    window: MainWindow, position_s: float, played: bool, then: Callable[[str], None]
) -> None:
    """End a scripted look at a session at ``position_s`` of it: a replay pauses there
    (``played``), else the opened session is shown as it stood then; ``then`` ends the
    script (its screenshot), given ``COMPLETE`` unless the session failed to open."""
    ended = False

    def end(status: str) -> None:
        nonlocal ended
        if not ended:
            ended = True
            window.replay.pause()
            then(RunStatus.FAILED if status == RunStatus.FAILED else RunStatus.COMPLETE)

    def moved(playback: Playback) -> None:
        if playback.position_s >= position_s and window.replay.timer.isActive():
            end(RunStatus.COMPLETE)

    window.replay_finished.connect(end)
    if played:
        window.replay.moved.connect(moved)
    else:
        window.replay.opened.connect(lambda _path: window.replay.seek(position_s))


def check_display() -> None:
    """Qt aborts the process when it finds no display; say what to do instead."""
    if not sys.platform.startswith("linux") or os.environ.get("QT_QPA_PLATFORM"):
        return
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise WorkbenchError(
            "no display to open the window on (neither DISPLAY nor WAYLAND_DISPLAY is set). "
            "Run experiments headless with `workbench run EXPERIMENT`, or use "
            "QT_QPA_PLATFORM=offscreen for scripted screenshots (--autorun --screenshot)."
        )


def check_hosts(hosts: list[str]) -> None:
    """``--host`` destinations, checked before the window opens."""
    for host in hosts:
        if host != LOCAL:
            try:
                check_dest(host)
            except WorkbenchError as exc:
                raise WorkbenchError(f"--host {exc}") from None


def run_gui(args: argparse.Namespace) -> int:
    check_display()
    check_hosts(args.hosts)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Concurrency Workbench")
    app.setWindowIcon(app_icon())
    apply_theme(app, args.theme, args.font_size)
    collection = GuiThreadGarbageCollection()
    collection.start()
    # The loop first: the window starts tasks (the capacity panel) while it is built.
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window, loaded = build_window(args)
    exit_code = 0

    def finished(status: str) -> None:
        nonlocal exit_code
        exit_code = {RunStatus.COMPLETE: 0, RunStatus.CANCELLED: 130}.get(status, 1)
        if args.screenshot:
            window.screenshot(Path(args.screenshot))
        if args.quit_when_done:
            window.close()

    window.run_finished.connect(finished)
    closed = asyncio.Event()
    app.lastWindowClosed.connect(closed.set)

    def stop_and_close(*_: object) -> None:
        """Ctrl-C or SIGTERM: the close button's path, without asking (nobody may be there
        to answer)."""
        window.confirm_close = False
        QTimer.singleShot(0, window.close)

    signal.signal(signal.SIGINT, stop_and_close)
    signal.signal(signal.SIGTERM, stop_and_close)
    wake = QTimer()
    wake.start(200)  # lets Python notice signals while Qt's loop runs
    window.show()
    window.confirm_close = not args.quit_when_done
    if args.present:
        window.presentation.set_on(True)
    if args.session:
        if args.screenshot_at is not None:
            stop_at(window, args.screenshot_at, played=bool(args.replay), then=finished)
        else:
            window.replay_finished.connect(finished)
        QTimer.singleShot(0, lambda: window.open_session_later(Path(args.session), args.replay))
    elif args.autorun and not loaded:
        QTimer.singleShot(0, lambda: window.run_finished.emit(RunStatus.FAILED))  # run nothing else
    elif args.autorun:
        QTimer.singleShot(0, window.start_run)
    elif args.screenshot and args.quit_when_done:
        # Nothing to run or open, so no end would ever come: the picture is of the window
        # as it opened (the experiment in the form), which is what such a script asks for.
        status = RunStatus.COMPLETE if loaded else RunStatus.FAILED
        QTimer.singleShot(0, lambda: finished(status))
    with loop:
        loop.run_until_complete(closed.wait())
    wake.stop()
    collection.stop()
    if exit_code == 1 and args.quit_when_done and window.banner.text():
        # Nobody may be there to read the banner: the reason goes with the exit status.
        raise WorkbenchError(window.banner.text())
    return exit_code
