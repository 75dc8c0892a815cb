"""The server as it is now: state, what it said about itself at start-up, its log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.base.records import StartupFacts
from workbench.engine.base.states import ServerState
from workbench.engine.server.llama_server import read_tail
from workbench.ui.theme.qt_theme import theme_color
from workbench.ui.widgets.shown_late import DrawnWhenShown

FACTS = (
    ("n_slots", "n_slots"),
    ("n_ctx_slot", "n_ctx_slot"),
    ("kv_unified", "kv_unified"),
    ("n_ctx", "n_ctx"),
    ("KV buffer", "kv_buffer_mib"),
    ("model buffer", "model_buffer_mib"),
    ("compute buffer", "compute_buffer_mib"),
    ("backend", "backend"),
    ("build", "build"),
)


CALIBRATION_LINES = 100  # a probe's lines and its costs kept, at most
CALIBRATION_SHOWN = 7  # lines of them in view


def fact_text(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key.endswith("_mib"):
        return f"{value:.1f} MiB"
    return str(value)


CALIBRATE_TIP = (
    "Measure what a step of the server's work costs on this machine: the real llama-server "
    "with the experiment's first server settings, at most a minute of requests. Stored, it "
    "predicts every run with those settings before it starts (workbench calibrate)"
)


class ServerPanel(DrawnWhenShown, QWidget):
    start_requested = Signal()
    stop_requested = Signal()
    calibrate_requested = Signal()
    cancel_calibration = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.state = QLabel(ServerState.IDLE)
        self.state.setObjectName("serverState")
        self.detail = QLabel()
        self.detail.setWordWrap(True)
        self.url = QLabel("-")
        self.binary = QLabel("-")
        self.binary.setWordWrap(True)
        self.binary.setTextFormat(Qt.TextFormat.PlainText)
        self.binary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.kind = QLabel("-")  # which kind of server, and what its plots can show
        self.kind.setObjectName("serverKind")
        self.kind.setWordWrap(True)
        self.kind.setTextFormat(Qt.TextFormat.PlainText)
        self.facts: dict[str, QLabel] = {}
        facts_box = QGroupBox("Startup facts (from the server's log)")
        form = QFormLayout(facts_box)
        for title, key in FACTS:
            label = QLabel("-")
            label.setWordWrap(True)
            self.facts[key] = label
            form.addRow(title, label)
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setObjectName("serverLog")
        self.log.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.log.setMaximumBlockCount(400)
        self.start_button = QPushButton("Start server")
        self.start_button.setToolTip(
            "Start a server with the experiment's first settings, "
            "to poke at it outside an experiment"
        )
        self.stop_button = QPushButton("Stop server")
        self.start_button.clicked.connect(self.start_requested)
        self.stop_button.clicked.connect(self.stop_requested)
        self.stop_button.setEnabled(False)
        buttons = QHBoxLayout()
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.stop_button)
        calibration = self._calibration_box()
        top = QFormLayout()
        top.addRow("state", self.state)
        top.addRow("address", self.url)
        top.addRow("binary", self.binary)
        top.addRow("kind", self.kind)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.detail)
        layout.addLayout(buttons)
        layout.addWidget(calibration)
        layout.addWidget(facts_box)
        layout.addWidget(QLabel("Log (tail)"))
        layout.addWidget(self.log, 1)
        self._log_path: Path | None = None
        self._log_text = ""
        self.show_state(ServerState.IDLE)

    def _calibration_box(self) -> QGroupBox:
        """Calibrate and Cancel, whether the form's settings have a calibration, and the
        probe's lines as it measures (then the costs it found)."""
        box = QGroupBox("Calibration (for predictions)")
        self.calibrate_button = QPushButton("Calibrate")
        self.calibrate_button.setObjectName("calibrateButton")
        self.calibrate_button.setToolTip(CALIBRATE_TIP)
        self.cancel_calibrate_button = QPushButton("Cancel")
        self.cancel_calibrate_button.setEnabled(False)
        self.calibrate_button.clicked.connect(self.calibrate_requested)
        self.cancel_calibrate_button.clicked.connect(self.cancel_calibration)
        self.calibration_known = QLabel("-")
        self.calibration_known.setObjectName("calibrationKnown")
        self.calibration_known.setWordWrap(True)
        self.calibration_known.setTextFormat(Qt.TextFormat.PlainText)  # a file's words
        # The probe's lines, then the costs: a box that scrolls, so that a probe's dozen
        # lines, wrapped in the narrow panel, never make the window taller than the screen.
        self.calibration_lines = QPlainTextEdit()
        self.calibration_lines.setObjectName("calibrationLines")
        self.calibration_lines.setReadOnly(True)
        self.calibration_lines.setMaximumBlockCount(CALIBRATION_LINES)
        line = self.fontMetrics().lineSpacing()
        self.calibration_lines.setMinimumHeight(line * 2 + 12)  # it scrolls: little is owed
        self.calibration_lines.setMaximumHeight(line * CALIBRATION_SHOWN + 12)
        self.calibration_lines.hide()
        row = QHBoxLayout()
        row.addWidget(self.calibrate_button)
        row.addWidget(self.cancel_calibrate_button)
        row.addStretch(1)
        layout = QVBoxLayout(box)
        layout.addLayout(row)
        layout.addWidget(self.calibration_known)
        layout.addWidget(self.calibration_lines)
        return box

    def set_calibrating(self, busy: bool, blocked: bool = False) -> None:
        """While a probe measures: Cancel, not Calibrate (and its lines start afresh);
        ``blocked``: a run or the hand-started server holds the machine."""
        self.calibrate_button.setEnabled(not busy and not blocked)
        self.cancel_calibrate_button.setEnabled(busy)
        if busy:
            self.calibration_lines.clear()

    def add_calibration_line(self, line: str) -> None:
        """One more of the probe's lines, in view."""
        self.calibration_lines.appendPlainText(line)
        self.calibration_lines.show()

    def show_calibration(self, lines: list[str], path: str) -> None:
        """After the probe's lines, the costs it found and where they are stored."""
        for line in [*lines, f"stored in {path}"]:
            self.add_calibration_line(line)

    def show_calibration_known(self, text: str) -> None:
        self.calibration_known.setText(text)

    def show_state(self, state: str, detail: str = "") -> None:
        """``state``: a ``ServerState`` (a signal hands it over as its text)."""
        state = ServerState(state)
        self.state.setText(state)
        style = f"color:{theme_color('server_states', state).name()}; font-weight:bold;"
        if self.state.styleSheet() != style:  # a style sheet set re-polishes, even the same
            self.state.setStyleSheet(style)
        self.detail.setText(detail if state is ServerState.CRASHED else "")

    def show_server(
        self,
        base_url: str,
        facts: StartupFacts,
        log_path: str | None,
        log_tail: str = "",
        binary: str = "",
    ) -> None:
        """``log_path``: a live server's log, which this app wrote and reads on a timer.
        A reopened session gives no path, only the tail it kept: a path found in a session
        file (a FIFO, /dev/zero, someone's file) is never opened. ``binary``: the
        llama-server a run uses and how it was found."""
        self.url.setText(base_url or "-")
        self.binary.setText(binary or "-")
        for key, label in self.facts.items():
            label.setText(fact_text(key, getattr(facts, key)))
        self._log_path = Path(log_path) if log_path else None
        if self._log_path is None:
            self._show_log(log_tail)
        self.refresh_log()

    def show_kind(self, text: str) -> None:
        """Which kind of server its /metrics say it is, and what its plots can show."""
        self.kind.setText(text or "-")

    def refresh_log(self) -> None:
        """Re-read the log's tail (called on a slow timer, not per event), while the panel
        shows: read and laid out in a hidden tab at every server event, it cost the frame
        that ends a configuration."""
        if self._log_path is not None:
            self.content_changed()

    def draw_content(self) -> None:
        if self._log_path is not None:
            self._show_log(read_tail(self._log_path, 200))

    def _show_log(self, text: str) -> None:
        if text != self._log_text:
            self._log_text = text
            self.log.setPlainText(text)
            bar = self.log.verticalScrollBar()
            bar.setValue(bar.maximum())

    def set_manual(self, running: bool, busy: bool) -> None:
        """Buttons for the hand-started server; disabled while an experiment runs."""
        self.start_button.setEnabled(not running and not busy)
        self.stop_button.setEnabled(running)
