"""Watching a running server, in a window of its own: what its own users make it do, live
(its slots' tasks, its queue, its token rates, its memory), and at the end (Stop, or the
window closed) what the watch saw and the verdict. It sends no load.

A window apart from the main one: a watch is not a run (nothing is sent, nothing is
configured), it may go on while the main window runs an experiment against the same
server, and its views need the width the main window gives its three columns.

The engine polls on the window's loop (``WatchController``) with the settings the settings
dialog read (``WatchSettings``: the interval, how long, the SLOs, the server's own
endpoints); what the polls say is kept in the ``WatchModel``, and this window draws it on a
timer a few times a second. At the end the SLOs given are judged on the kept watch, as
``workbench watch --slo`` judges them, and shown under the verdict (``SloResults``).

The same window replays a kept watch (``WatchWindow.replaying``): its file is read off the
GUI thread (``WatchReplayController``) into a ``ReplayModel``, the live model's subclass,
which the same views draw as the watch was at the time its control shows; the time control
(Play/Pause, a speed, a slider) replaces Stop, and the figures are those at that time. The
SLOs the file keeps are judged on it and shown under the verdict, as at a live watch's end.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QCloseEvent, QGuiApplication
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.watch.slo_judged import CANNOT_TELL, MET, MISSED, Judged
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.controllers.watch_controller import WatchController
from workbench.ui.controllers.watch_replay_controller import WatchReplayController
from workbench.ui.theme.qt_theme import app_icon, text_style
from workbench.ui.views.slot_watch import ContextBars, SlotGantt
from workbench.ui.views.watch_plots import WINDOW_S, TimeAxis, WatchPlots
from workbench.ui.watch_model import WatchModel
from workbench.ui.watch_replay import ReplayModel
from workbench.ui.watch_replay_bar import WatchReplayBar
from workbench.ui.watch_settings import WatchSettings
from workbench.ui.widgets.elided_label import ElidedLabel
from workbench.ui.widgets.read_only_table import read_only_table

DRAW_EVERY_MS = 250  # the views redrawn four times a second, however often the polls come
SIDE_WIDTH = 340  # px: the figures' column
CONTEXT_WIDTH = 150  # px: the context bars beside the slots
NO_SLOTS = "no /slots (vLLM and SGLang have none; llama-server: --no-slots): no tasks"
SHOWN_A_SECOND_S = 60.0  # a replay shows this many seconds of its time a second of speed
OUTCOME_SIGNAL = {MET: "ok", MISSED: "error", CANNOT_TELL: "warning"}  # else quiet


def slo_cells(judged: Judged) -> tuple[str, str, str, str, str]:
    """One SLO judged, as ``workbench watch --slo`` prints it, in cells: its name, the
    percentile read with how far the polls may put it off (the ±), the limit, the outcome
    and what it was read from."""
    slo = judged.slo
    if judged.value_ms is None:
        read = "-"
    else:
        margin = f" ±{judged.margin_ms:,.0f}" if judged.margin_ms else ""
        read = f"{judged.value_ms:,.0f}{margin} ms"
    name = f"{slo.metric.upper()} p{slo.percentile}"
    return name, read, f"{slo.limit_ms:,g} ms", judged.outcome, judged.basis


class SloResults(QWidget):
    """The SLOs given to a watch: named while it goes, judged once it ended, a row each
    (the outcome in its signal's colour, a missed one in the error colour)."""

    HEADS = ("SLO", "percentile", "limit", "outcome", "read from")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("watchSlos")
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.setHorizontalSpacing(14)
        self.grid.setVerticalSpacing(2)
        self.grid.setColumnStretch(len(self.HEADS) - 1, 1)
        self.title = self._label("", "quiet")
        self.title.setWordWrap(True)  # many SLOs, or a long reason they were not judged
        self.grid.addWidget(self.title, 0, 0, 1, len(self.HEADS))
        self.rows: list[tuple[QLabel, ...]] = []
        self.hide()

    @staticmethod
    def _label(text: str, signal: str = "", bold: bool = False) -> QLabel:
        label = QLabel(text)
        label.setTextFormat(Qt.TextFormat.PlainText)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        label.setStyleSheet((text_style(signal) if signal else "") + ("font-weight:bold;" * bold))
        return label

    def expect(self, settings: WatchSettings) -> None:
        """The SLOs a watch will be judged on, named before it ends."""
        slos = ", ".join(
            f"{s.metric.upper()} p{s.percentile} ≤ {s.limit_ms:,g} ms" for s in settings.slos
        )
        self.title.setText(f"SLOs, judged when the watch ends: {slos}")
        self.setVisible(bool(settings.slos))

    def show_judged(self, judged: list[Judged], unjudged: str = "") -> None:
        """The SLOs judged on the watch, a row each; or why they could not be."""
        self.title.setText(unjudged or "SLOs on the watch (as workbench watch --slo judges them):")
        self.title.setStyleSheet(text_style("error" if unjudged else "quiet"))
        if not self.rows and judged:
            for column, head in enumerate(self.HEADS):
                label = self._label(head, "quiet")
                if column in (1, 2):  # over the numbers, as they are aligned
                    label.setAlignment(Qt.AlignmentFlag.AlignRight)
                self.grid.addWidget(label, 1, column)
        for index, one in enumerate(judged):
            name, read, limit, outcome, basis = slo_cells(one)
            signal = OUTCOME_SIGNAL.get(outcome, "quiet")
            row = (
                self._label(name, bold=True),
                self._label(read),
                self._label(limit),
                self._label(outcome, signal, bold=True),
                self._label(basis, "quiet"),
            )
            row[-1].setWordWrap(True)  # it fills its cell: the room the others leave
            for column, label in enumerate(row):
                right = (
                    Qt.AlignmentFlag.AlignRight if column in (1, 2) else Qt.AlignmentFlag.AlignLeft
                )
                label.setAlignment(right | Qt.AlignmentFlag.AlignTop)
                self.grid.addWidget(label, index + 2, column)
            self.rows.append(row)
        self.setVisible(bool(judged) or bool(unjudged))


class WatchWindow(QWidget):
    """One watch of the server at ``url``; ``start`` begins it. With ``kept`` (made by
    ``replaying``), that kept watch played back instead; ``start`` reads it."""

    def __init__(
        self,
        url: str,
        api_key_env: str | None,
        out_dir: Path,
        settings: WatchSettings | float | None = None,
        parent: QWidget | None = None,
        kept: Path | None = None,
    ) -> None:
        """``settings``: the watch's (a number: its interval, the others their defaults)."""
        super().__init__(parent)
        if not isinstance(settings, WatchSettings):
            settings = WatchSettings() if settings is None else WatchSettings(float(settings))
        self.settings = settings
        self.url, self.api_key_env = url, api_key_env
        self.kept_path = kept
        self.setWindowIcon(app_icon())
        self.tasks = Tasks()  # the watch's coroutine: cancelled when the window closes
        self.model: WatchModel = WatchModel()
        self.controller: WatchController | None = None
        self.replay: WatchReplayController | None = None
        if kept is None:
            self.setWindowTitle(f"Watching {url} — Concurrency Workbench")
            self.controller = WatchController(self.model, self.tasks, out_dir, settings, self)
        else:  # its file's name: the address inside it is only shown, in the status line
            self.setWindowTitle(f"Replaying {kept.name} — Concurrency Workbench")
            self.replay = WatchReplayController(self.tasks, self)
        self.over = False  # the watch ended, or never began: its last word stays
        self.notes: list[str] = []  # what the watch cannot see at this address

        self.stop_button = QPushButton("■  Stop")
        self.stop_button.setToolTip("End the watch: it is kept, and summed up here")
        self.stop_button.setEnabled(False)
        self.status = ElidedLabel(f"connecting to {url}…" if kept is None else "")
        self.status.setObjectName("watchStatus")
        # One line: a fault (the address, the server down) or, at the end, the verdict.
        self.line = QLabel()
        self.line.setObjectName("watchLine")
        self.line.setTextFormat(Qt.TextFormat.PlainText)  # it may quote what a server said
        self.line.setWordWrap(True)
        self.line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.line.hide()
        # Under the verdict: the SLOs given, judged once the watch ended.
        self.slos = SloResults()
        if kept is None:
            self.slos.expect(settings)
        # A replay's line: what its file does not keep, so not drawn.
        self.unkept = QLabel()
        self.unkept.setObjectName("watchUnkept")
        self.unkept.setTextFormat(Qt.TextFormat.PlainText)
        self.unkept.setWordWrap(True)
        self.unkept.setStyleSheet(text_style("quiet"))
        self.unkept.hide()
        self.replay_bar = WatchReplayBar()
        self.replay_bar.setEnabled(False)

        self.gantt = SlotGantt()
        self.context = ContextBars(self.gantt)
        self.context.setFixedWidth(CONTEXT_WIDTH)
        self.plots = WatchPlots()
        self.plots.requests.setXLink(self.gantt)
        self.time_axis = TimeAxis()
        self.slots_row = QWidget()
        row = QHBoxLayout(self.slots_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.gantt, 1)
        row.addWidget(self.context)
        self.views = QSplitter(Qt.Orientation.Vertical)
        for widget in (self.slots_row, *self.plots.plots):
            self.views.addWidget(widget)
        self.views.setSizes([360, 160, 160, 120, 120])

        self.figures = read_only_table(["", "now"])
        self.figures.setObjectName("watchFigures")
        self.figures.setWordWrap(True)
        # A row's height follows its words' lines at the width its column has once laid
        # out (a scroll bar that comes narrows it): a wrapped figure is never cut short.
        self.figures.horizontalHeader().sectionResized.connect(
            lambda *_: QTimer.singleShot(0, self.figures.resizeRowsToContents)
        )
        self.kept = QLabel()
        self.kept.setTextFormat(Qt.TextFormat.PlainText)
        self.kept.setWordWrap(True)
        self.kept.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        side = QWidget()
        side.setFixedWidth(SIDE_WIDTH)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        side_layout.addWidget(self.figures, 1)
        side_layout.addWidget(self.kept)

        bar = QHBoxLayout()
        bar.addWidget(self.stop_button)
        bar.addWidget(self.status, 1)
        body = QHBoxLayout()
        body.addWidget(self.views, 1)
        body.addWidget(side)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(bar)
        layout.addWidget(self.line)
        layout.addWidget(self.slos)
        layout.addWidget(self.unkept)
        layout.addLayout(body, 1)
        layout.addWidget(self.replay_bar)
        (self.stop_button if kept is not None else self.replay_bar).hide()

        self.timer = QTimer(self)
        self.timer.setInterval(DRAW_EVERY_MS)
        self.timer.timeout.connect(self._frame)
        self.stop_button.clicked.connect(self.stop)
        if self.controller is not None:
            self.controller.started.connect(self._started)
            self.controller.failed.connect(self._failed)
            self.controller.ended.connect(self._ended)
        if self.replay is not None:
            self.replay.opened.connect(self._opened)
            self.replay.failed.connect(self._failed)
            self.replay.moved.connect(self._moved)
            self.replay.playing.connect(self.replay_bar.set_playing)
            self.replay.judged.connect(self.slos.show_judged)
            self.replay_bar.play_toggled.connect(self._play)
            self.replay_bar.seeked.connect(self.replay.seek)
            self.replay_bar.speed_changed.connect(self._speed)
        self._fit_screen()

    @classmethod
    def replaying(cls, path: Path, parent: QWidget | None = None) -> WatchWindow:
        """A window that replays the watch kept at ``path`` once ``start`` is called."""
        return cls("", None, path.parent, parent=parent, kept=path)

    def _fit_screen(self) -> None:
        """As large as a 1366x768 screen leaves room for, and no larger than it needs."""
        screen = QGuiApplication.primaryScreen()
        room = screen.availableGeometry() if screen is not None else None
        width, height = 1500, 920
        if room is not None:
            width, height = min(width, room.width()), min(height, room.height() - 32)
        self.resize(width, height)

    def start(self) -> None:
        if self.replay is not None and self.kept_path is not None:
            self.status.setText(f"reading {self.kept_path}…")
            self.replay.open(self.kept_path)
            return
        assert self.controller is not None
        self.controller.start(self.url, self.api_key_env)
        if self.controller.running:
            self.stop_button.setEnabled(True)
            self.timer.start()

    def stop(self) -> None:
        if self.controller is None:
            return
        self.stop_button.setEnabled(False)
        self.status.setText(f"stopping the watch of {self.model.url}…")
        self.controller.stop()

    def _started(self) -> None:
        watched = self.model.watched
        assert watched is not None and self.controller is not None
        if not watched.slots_on:
            self.notes.append(NO_SLOTS)
            self.slots_row.hide()
        controller = self.controller
        said = [  # the interval and the time the engine was given, as the command says them
            f"watching {self.model.url} {controller.settings.pace()}",
            "it sends no load",
            *self._moved_endpoints(),
            *self.notes,
        ]
        self.status.setText("; ".join(said))
        # beside the figures, not in the status line: its middle is what a narrow one elides
        self.kept.setText(f"kept as it goes in {controller.path}")

    def _moved_endpoints(self) -> list[str]:
        """Where each endpoint is read, where not at the address (the command's words)."""
        endpoints = self.controller.endpoints if self.controller is not None else None
        moved = endpoints.describe(self.model.url) if endpoints is not None else ""
        return [moved] if moved else []

    def _failed(self, text: str) -> None:
        self.over = True
        self.timer.stop()
        self.slos.hide()  # nothing was kept to judge them on
        self.stop_button.setEnabled(False)
        if self.kept_path is not None:
            self.status.setText(f"not replaying {self.kept_path}")
        else:
            self.status.setText(f"not watching {self.model.url or self.url}")
        self._say(text, "error")
        self.draw()

    # -- a kept watch replayed ----------------------------------------------------------------
    def _opened(self, model: ReplayModel) -> None:
        """The file read: its whole watch, its summary and verdict, as the live window
        shows a watch once it has ended; the time control, at its end."""
        self.model = model
        self.over = True
        self.context.hide()  # each slot's context is not kept
        if not model.slots_on:
            self.notes.append(NO_SLOTS)
            self.slots_row.hide()
        assert self.kept_path is not None
        self.status.setText("; ".join([f"replaying {model.describe()}", *self.notes]))
        self._say(f"verdict: {model.whole.verdict}", "ok")
        self.unkept.setText(model.unkept())
        self.unkept.setVisible(bool(self.unkept.text()))
        self.kept.setText(f"kept in {self.kept_path} (workbench show reads it)")
        self.replay_bar.load(model.end_s)
        self.replay_bar.setEnabled(True)
        self.timer.start()
        self.draw()

    def _moved(self, t_s: float) -> None:
        model = self.model
        if isinstance(model, ReplayModel):
            said = f"{model.clock(t_s)} / {model.clock(model.end_s)}"
            if day := model.time_of_day(t_s):
                said += f"  ·  {day}"
            self.replay_bar.set_position(t_s, said)

    def _play(self, playing: bool) -> None:
        if self.replay is None:
            return
        if playing:
            self.replay.speed = self.replay_bar.speed()
            self.replay.play()
        else:
            self.replay.pause()

    def _speed(self, speed: float) -> None:
        if self.replay is not None:
            self.replay.speed = speed
            self.model.changed = True  # the time shown spans more, or less

    def _frame(self) -> None:
        if self.replay is not None:
            self.replay.step()
        self.draw()

    def _ended(self, path: Path) -> None:
        self.over = True
        self.timer.stop()
        self.stop_button.setEnabled(False)  # the time it was given may have ended it
        self.draw()
        summary = self.model.summary
        assert summary is not None and self.controller is not None
        controller = self.controller
        watched = f"watched {self.model.url} for {summary.seconds:.1f} s"
        given = controller.settings.duration_s
        if given is not None and not controller.stopped:
            watched += f", the {given:g} s it was given"
        self.status.setText("; ".join([watched, *self._moved_endpoints(), *self.notes]))
        self._say(f"verdict: {summary.verdict}", "ok")
        if controller.settings.slos:
            self.slos.show_judged(controller.judged, controller.unjudged)
        self.kept.setText(f"kept in {path} (workbench show reads it)")

    def _say(self, text: str, signal: str) -> None:
        self.line.setText(text)
        self.line.setStyleSheet(text_style(signal) + "font-weight:bold;")
        self.line.setVisible(bool(text))

    def draw(self) -> None:
        """One frame: the views redrawn from the model, if a poll came (or a replay moved)
        since the last."""
        model = self.model
        if not model.changed:
            return
        model.changed = False
        if model.slots_on:
            self.gantt.sync(model)
            if self.replay is None:
                self.context.sync(model)
        self.plots.sync(model)
        top = self.gantt if model.slots_on else self.plots.requests
        if isinstance(model, ReplayModel):
            span = max(WINDOW_S, self.replay_bar.speed() * SHOWN_A_SECOND_S)
            self.time_axis.replay(top, model.now, model.end_s, span, whole=model.at_end)
            shown = None if model.at_end else model.now
            self.plots.show_time(shown)
            self.gantt.cursor.setVisible(shown is not None)
            self.gantt.cursor.setValue(model.now)
        else:
            self.time_axis.follow(top, model.now, ended=model.summary is not None)
        if not self.over and self.line.text() != (fault := model.fault()):
            self._say(fault, "warning")
        self._show_figures(model.figures(), model.heading())

    def _show_figures(self, rows: list[tuple[str, str]], heading: str) -> None:
        """The figures, a row each; a row with no value heads those under it."""
        table = self.figures
        table.horizontalHeaderItem(1).setText(heading)
        if table.rowCount() != len(rows):
            table.setRowCount(len(rows))
        for index, (name, value) in enumerate(rows):
            heads = not value
            if (table.columnSpan(index, 0) == 2) != heads:
                table.setSpan(index, 0, 1, 2 if heads else 1)
            for column, text in enumerate((name, value)):
                item = table.item(index, column)
                if item is None:
                    item = QTableWidgetItem(text)
                    table.setItem(index, column, item)
                elif item.text() != text:
                    item.setText(text)
                if item.font().bold() != heads:
                    font = item.font()
                    font.setBold(heads)
                    item.setFont(font)
        table.resizeRowsToContents()

    def closeEvent(self, event: QCloseEvent) -> None:
        """Closing ends the watch: its coroutine is cancelled, and what it saw is kept (a
        replay stops, and its file is read no more)."""
        self.timer.stop()
        if self.replay is not None:
            self.replay.pause()
        self.tasks.cancel_all()
        super().closeEvent(event)
