"""A kept watch's time control, under its views: Play/Pause, the speed, a slider over its
whole length to scrub, and the time shown (into the watch, and of the day).

Not the main window's session replay bar (``panels/replay_bar``): a watch lasts hours, not
minutes, so its speeds go to 600x, its slider has ten times the steps and seeks however it
is moved (dragged, clicked, or by its keys), and its clock reads ``h:mm:ss``.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QStyle,
    QWidget,
)

SPEEDS = (1, 10, 60, 600)
SLIDER_STEPS = 10_000  # an 8-hour watch: a step of 2.9 s
PLAY, PAUSE = "Play", "Pause"  # with the style's own icons: every font draws them


class WatchReplayBar(QWidget):
    play_toggled = Signal(bool)
    seeked = Signal(float)  # seconds into the watch
    speed_changed = Signal(float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("watchReplayBar")
        self.play = QPushButton()
        self._icons = {
            playing: self.style().standardIcon(
                QStyle.StandardPixmap.SP_MediaPause
                if playing
                else QStyle.StandardPixmap.SP_MediaPlay
            )
            for playing in (False, True)
        }
        self._show_playing(False)
        self.play.setCheckable(True)
        self.play.setToolTip("Play the watch back from the time shown (from its start at its end)")
        self.play.toggled.connect(self._toggled)
        self.speed_box = QComboBox()
        self.speed_box.addItems([f"{s}x" for s in SPEEDS])
        self.speed_box.setToolTip("How fast it plays: 60x is a minute of the watch a second")
        self.speed_box.currentIndexChanged.connect(lambda _: self.speed_changed.emit(self.speed()))
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, SLIDER_STEPS)
        self.slider.setPageStep(SLIDER_STEPS // 20)
        self.slider.setToolTip("Scrub: the views show the watch as it was at this time")
        self.slider.valueChanged.connect(self._moved)
        self.clock = QLabel()
        self.clock.setObjectName("watchClock")
        self.clock.setStyleSheet("font-weight:bold;")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.play)
        layout.addWidget(self.speed_box)
        layout.addWidget(self.slider, 1)
        layout.addWidget(self.clock)
        self._duration = 0.0

    def speed(self) -> float:
        return float(SPEEDS[self.speed_box.currentIndex()])

    def set_speed(self, speed: int) -> None:
        self.speed_box.setCurrentIndex(SPEEDS.index(speed))

    def load(self, duration_s: float) -> None:
        self._duration = duration_s

    def set_playing(self, playing: bool) -> None:
        self.play.blockSignals(True)
        self.play.setChecked(playing)
        self.play.blockSignals(False)
        self._show_playing(playing)

    def _show_playing(self, playing: bool) -> None:
        self.play.setText(PAUSE if playing else PLAY)
        self.play.setIcon(self._icons[playing])

    def set_position(self, t_s: float, said: str) -> None:
        """The time shown, on the slider (unless a hand holds it) and in words."""
        if not self.slider.isSliderDown():
            fraction = t_s / self._duration if self._duration > 0 else 1.0
            self.slider.blockSignals(True)
            self.slider.setValue(round(fraction * SLIDER_STEPS))
            self.slider.blockSignals(False)
        self.clock.setText(said)

    def _toggled(self, playing: bool) -> None:
        self._show_playing(playing)
        self.play_toggled.emit(playing)

    def _moved(self, value: int) -> None:
        self.seeked.emit(value / SLIDER_STEPS * self._duration)
