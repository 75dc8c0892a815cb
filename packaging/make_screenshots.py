"""Make the documentation's pictures (docs/*.png) again, from the real app, in one command.

    make screenshots                                   # every picture
    .venv/bin/python packaging/make_screenshots.py --only workbench-1920x1080-dark.png
    .venv/bin/python packaging/make_screenshots.py --no-runs  # only those needing no server

The window's pictures are taken of the real window (``MainWindow``, built by the ``gui``
command's own ``build_window`` from its own flags) on an Xvfb screen of 1920x1080 that this
script starts and stops, so they do not depend on the developer's screen, fonts' scaling or
window manager. Most show the recorded demo session (resources/demo/), which needs no
server; three need a real llama-server run (a conversations run, a long document refused by
small slots, and the lab with three repeats), made first into a temporary folder with
``workbench run`` (a few minutes on a 2-core machine). The charts come from ``workbench
compare`` and ``workbench export``. Each PNG is then made small with pngquant (lossy, 256
colours: a screenshot's flat colours lose nothing one sees) or, without it, optipng
(lossless); with neither it is written as Qt saved it.

Needs: ``apt-get install xvfb pngquant`` (optipng instead of pngquant will do) and the
libxcb packages Qt's xcb plugin loads (docs/developer/screenshots.md lists them).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DEMO = ROOT / "resources" / "demo" / "slots-1-2-4.session.sqlite"
SCREEN = "1920x1080x24"
SHOT_TIMEOUT_S = 180  # one picture: a replay to its moment, at most a few seconds
RUN_TIMEOUT_S = 1200  # one real run on a busy 2-core machine


@dataclass(frozen=True)
class Run:
    """A real run whose session some pictures show: ``workbench run`` with these arguments,
    and the exit statuses it may end with (3: some requests failed, as the long document's
    refused ones must)."""

    key: str
    args: tuple[str, ...]
    ends: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class WindowShot:
    """A picture of the window: the ``gui`` flags it starts with, the session it shows (the
    demo, or a run's by its key), and what is clicked before the picture (``lanes``: Gantt
    lanes by slot). ``watch``: the watch window instead, on a real server under traffic
    (``take_watch_picture``)."""

    name: str
    flags: tuple[str, ...]
    session: str = "demo"
    lanes: bool = False
    watch: bool = False


@dataclass(frozen=True)
class ChartShot:
    """A chart written by a command: ``command`` (``{demo}``, ``{repeats}`` and ``{out}``
    filled in) writes ``made`` under ``{out}``."""

    name: str
    command: tuple[str, ...]
    made: str
    needs: tuple[str, ...] = field(default=())


RUNS = (
    Run(
        "conversations",
        (
            "experiments/conversations-vs-slots.toml",
            "--slots", "1,4", "--cache-ram-mib", "0", "--users", "4", "--turns", "3",
        ),
    ),
    Run(
        "long-doc",
        (
            "experiments/long-doc-ctx-shrink.toml",
            "--slots", "1,4", "--requests", "2", "--concurrency", "2",
            "--input-tokens", "2500", "--max-tokens", "16",
        ),
        ends=(3,),
    ),
    Run("repeats", ("experiments/slots-1-2-4.toml", "--repeats", "3")),
)  # fmt: skip

WINDOW_SHOTS = (
    WindowShot("workbench-1920x1080-dark.png", ("--size", "1920x1080")),
    WindowShot("workbench-1366x768-light.png", ("--size", "1366x768", "--theme", "light")),
    WindowShot("workbench-lanes-by-slot.png", ("--size", "1920x1080"), lanes=True),
    WindowShot(
        "presentation-1920x1080.png",
        ("--size", "1920x1080", "--present", "--replay", "10", "--screenshot-at", "23"),
    ),
    WindowShot("workbench-conversations.png", ("--size", "1920x1080"), session="conversations"),
    WindowShot("long-doc-4-slots-refused.png", ("--size", "1366x768"), session="long-doc"),
    WindowShot("watch-window.png", ("--size", "1366x768"), watch=True),
)

CHART_SHOTS = (
    ChartShot(
        "compare-repeats-agg-tok-s.png",
        ("compare", "{repeats}", "{demo}", "--out", "{out}"),
        "charts/agg_tok_s.png",
        needs=("repeats",),
    ),
    ChartShot(
        "compare-throughput-vs-ttft.png",
        ("compare", "{repeats}", "{demo}", "--out", "{out}"),
        "charts/throughput_vs_ttft.png",
        needs=("repeats",),
    ),
    ChartShot(
        "gantt-export-slots.png", ("export", "{demo}", "--gantt", "{out}"), "gantt-slots.png"
    ),
)


def workbench() -> str:
    """This environment's ``workbench`` command (beside the Python running this script)."""
    beside = Path(sys.executable).parent / "workbench"
    return str(beside) if beside.exists() else "workbench"


def start_xvfb() -> tuple[subprocess.Popen[bytes], str]:
    """An Xvfb server on a free display (it names it through ``-displayfd``)."""
    if shutil.which("Xvfb") is None:
        raise SystemExit("Xvfb not found: apt-get install xvfb (docs/developer/screenshots.md)")
    read, write = os.pipe()
    server = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", SCREEN, "-nolisten", "tcp"],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    with os.fdopen(read) as pipe:
        number = pipe.readline().strip()
    if not number:
        server.kill()
        raise SystemExit("Xvfb did not start")
    return server, f":{number}"


def real_run(run: Run, folder: Path) -> Path:
    """Run it into its own folder; its session file (one made before is used again: with
    ``--keep DIR``, pictures can be made again without running again)."""
    out = folder / run.key
    if made := sorted(out.glob("*.session.sqlite")):
        print(f"using {made[-1]}", flush=True)
        return made[-1]
    print(f"running {run.key}: workbench run {' '.join(run.args)}", flush=True)
    started = time.monotonic()
    done = subprocess.run(
        [workbench(), "run", *run.args, "--out", str(out), "--quiet"],
        cwd=ROOT,
        timeout=RUN_TIMEOUT_S,
        stdout=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode not in run.ends:
        raise SystemExit(f"workbench run for {run.key} ended with {done.returncode}")
    (session,) = out.glob("*.session.sqlite")
    print(f"  {session.name} in {time.monotonic() - started:.0f} s", flush=True)
    return session


def window_shot(shot: WindowShot, session: Path, out: Path, display: str) -> None:
    """The picture, taken by this script in a process of its own (``--window``)."""
    command = [sys.executable, __file__, "--window", str(out), "--session", str(session)]
    command += ["--lanes"] if shot.lanes else []
    command += ["--watch"] if shot.watch else []
    env = {**os.environ, "DISPLAY": display}
    env.pop("QT_QPA_PLATFORM", None)  # the real xcb window, not offscreen
    subprocess.run(
        [*command, "--", *shot.flags], cwd=ROOT, env=env, check=True, timeout=SHOT_TIMEOUT_S
    )


def take_window_picture(out: Path, session: Path, lanes: bool, flags: list[str]) -> int:
    """In this process: open the window as ``workbench gui`` would with ``flags``, show
    ``session`` (played to ``--screenshot-at`` where given), click what ``lanes`` asks, and
    save the picture to ``out``."""
    import asyncio

    import qasync
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from workbench.cli.run_commands import add_gui_arguments
    from workbench.ui.app import build_window, stop_at
    from workbench.ui.theme.qt_theme import apply_theme

    parser = argparse.ArgumentParser()
    add_gui_arguments(parser)
    args = parser.parse_args([*flags, "--session", str(session), "--out", tempfile.mkdtemp()])
    app = QApplication([sys.argv[0]])
    apply_theme(app, args.theme, args.font_size)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    window, _ = build_window(args)
    window.confirm_close = False
    window.show()
    if args.present:
        window.presentation.set_on(True)
        window.resize(*args.size)  # no window manager under Xvfb makes it full screen
    taken = asyncio.Event()
    saved: list[bool] = []

    def picture() -> None:
        saved.append(window.screenshot(out))
        window.close()
        taken.set()

    def finished(status: str) -> None:
        if lanes:
            window.lanes_box.setChecked(True)
        QTimer.singleShot(300, picture)  # a frame for the views (and the lanes) to settle

    if args.screenshot_at is not None:
        stop_at(window, args.screenshot_at, played=bool(args.replay), then=finished)
    else:
        window.replay_finished.connect(finished)
    QTimer.singleShot(0, lambda: window.open_session_later(session, args.replay))
    with loop:
        loop.run_until_complete(taken.wait())
    window.shutdown()
    return 0 if saved == [True] else 1


WATCH_AT_S = 8.0  # the watch's picture: two rounds of requests under way
WATCH_PROMPT = "You are a helpful assistant. Answer briefly and plainly. " * 12


def take_watch_picture(out: Path, flags: list[str]) -> int:
    """In this process: a real llama-server (2 slots) sent rounds of six requests that share
    a system prompt, the watch window on it at the size ``flags`` ask, and its picture
    ``WATCH_AT_S`` into the watch."""
    import asyncio
    import concurrent.futures
    import threading
    from dataclasses import replace

    import httpx
    import qasync
    from PySide6.QtWidgets import QApplication

    from workbench.cli.run_commands import add_gui_arguments
    from workbench.engine.config.server_settings import ServerSettings
    from workbench.engine.models.model_file import default_model_path
    from workbench.engine.server.discovery import find_server_binary
    from workbench.engine.server.llama_server import LlamaServer
    from workbench.ui.theme.qt_theme import apply_theme
    from workbench.ui.watch_window import WatchWindow

    parser = argparse.ArgumentParser()
    add_gui_arguments(parser)
    args = parser.parse_args(flags)
    app = QApplication([sys.argv[0]])
    apply_theme(app, args.theme, args.font_size)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    work = Path(tempfile.mkdtemp(prefix="watch-shot-"))
    settings = replace(ServerSettings(), slots=2, ctx=8192)
    server = LlamaServer(find_server_binary().path, default_model_path(), settings, work / "log")
    loop.run_until_complete(server.start())

    def one(k: int) -> None:
        prompt = WATCH_PROMPT + f"Question {k % 3}: tell me about the number {k}. " * (
            4 + k % 4 * 4
        )
        body = {"prompt": prompt, "max_tokens": 48, "stream": True}
        httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=120)

    def traffic() -> None:
        time.sleep(0.5)
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            for round_ in range(3):
                list(pool.map(one, range(8 * round_, 8 * round_ + 6)))

    window = WatchWindow(server.base_url, None, work, 0.1)
    window.resize(*args.size)
    window.show()
    window.start()
    sender = threading.Thread(target=traffic)
    sender.start()

    async def picture() -> bool:
        await asyncio.sleep(WATCH_AT_S)
        window.draw()
        await asyncio.sleep(0.3)  # a frame for the views to settle
        saved = window.grab().save(str(out))
        window.stop()
        while not window.over:
            await asyncio.sleep(0.05)
        return saved

    with loop:  # closed, it stops its executor's threads: Qt aborts on one left running
        try:
            saved = loop.run_until_complete(picture())
        finally:
            sender.join()
            window.close()
            loop.run_until_complete(asyncio.to_thread(server.stop))
    return 0 if saved else 1


def chart_shot(shot: ChartShot, sessions: dict[str, Path], work: Path) -> Path:
    out = work / shot.name.removesuffix(".png")
    filled = [
        part.format(demo=DEMO, out=out, repeats=sessions.get("repeats", ""))
        for part in shot.command
    ]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    subprocess.run([workbench(), *filled], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return out / shot.made


def smaller(path: Path) -> None:
    """pngquant (lossy, 256 colours), else optipng (lossless), else as it is."""
    if shutil.which("pngquant"):
        subprocess.run(
            ["pngquant", "--quality=65-95", "--speed=1", "--strip", "--force", "--output",
             str(path), "--", str(path)],
            check=True,
        )  # fmt: skip
    elif shutil.which("optipng"):
        subprocess.run(["optipng", "-quiet", "-o5", "-strip", "all", str(path)], check=True)
    else:
        print("  (neither pngquant nor optipng: written as Qt saved it)")


def png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", default=[], help="this picture alone (again)")
    parser.add_argument(
        "--no-runs", action="store_true", help="skip the pictures that need a real run"
    )
    parser.add_argument(
        "--keep", metavar="DIR", help="keep the runs' sessions in DIR (and use those there)"
    )
    parser.add_argument(
        "--into", metavar="DIR", default=str(DOCS), help="write the pictures here (docs/)"
    )
    parser.add_argument("--window", help=argparse.SUPPRESS)  # a window's picture, in a child
    parser.add_argument("--session", help=argparse.SUPPRESS)
    parser.add_argument("--lanes", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--watch", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("flags", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.window and args.watch:
        return take_watch_picture(Path(args.window), args.flags)
    if args.window:
        return take_window_picture(Path(args.window), Path(args.session), args.lanes, args.flags)

    known = [s.name for s in (*WINDOW_SHOTS, *CHART_SHOTS)]
    if unknown := [n for n in args.only if n not in known]:
        parser.error(f"no picture {', '.join(unknown)}: one of {', '.join(known)}")
    wanted = set(args.only or known)
    shots = [s for s in (*WINDOW_SHOTS, *CHART_SHOTS) if s.name in wanted]

    def runs_of(shot: WindowShot | ChartShot) -> set[str]:
        return {shot.session} - {"demo"} if isinstance(shot, WindowShot) else set(shot.needs)

    if args.no_runs:
        shots = [s for s in shots if not runs_of(s)]
    needed = set().union(*(runs_of(s) for s in shots)) if shots else set()
    work = Path(args.keep or tempfile.mkdtemp(prefix="screenshots-"))
    work.mkdir(parents=True, exist_ok=True)
    Path(args.into).mkdir(parents=True, exist_ok=True)
    sessions = {"demo": DEMO}
    for run in RUNS:
        if run.key in needed:
            sessions[run.key] = real_run(run, work)
    xvfb, display = start_xvfb()
    try:
        for shot in shots:
            target = Path(args.into) / shot.name
            if isinstance(shot, WindowShot):
                window_shot(shot, sessions[shot.session], target, display)
            else:
                shutil.copyfile(chart_shot(shot, sessions, work), target)
            smaller(target)
            width, height = png_size(target)
            print(
                f"{shot.name}: {width}x{height}, {target.stat().st_size / 1024:.0f} KiB", flush=True
            )
    finally:
        xvfb.terminate()
        xvfb.wait(10)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
