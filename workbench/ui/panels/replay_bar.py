"""Play a recorded session back: play/pause, speed, and a scrubber over its whole length."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QSlider, QWidget

from workbench.engine.run.replay import Playback

SPEEDS = (1, 2, 5, 10)
SLIDER_STEPS = 1000


class ReplayBar(QWidget):
    play_toggled = Signal(bool)
    seeked = Signal(float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.play = QPushButton("▶ Replay")
        self.play.setCheckable(True)
        self.play.toggled.connect(self.play_toggled)
        self.speed_box = QComboBox()
        self.speed_box.addItems([f"{s}x" for s in SPEEDS])
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, SLIDER_STEPS)
        self.slider.setMinimumWidth(160)
        self.slider.sliderMoved.connect(self._moved)
        self.clock = QLabel("0.0 / 0.0 s")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.play, self.speed_box, self.slider, self.clock):
            layout.addWidget(widget)
        self._duration = 0.0
        self.hide()

    def speed(self) -> float:
        return float(SPEEDS[self.speed_box.currentIndex()])

    def set_speed(self, speed: int) -> None:
        self.speed_box.setCurrentIndex(SPEEDS.index(speed))

    def load(self, playback: Playback) -> None:
        self._duration = playback.duration_s
        self.set_position(playback)
        self.show()

    def set_playing(self, playing: bool) -> None:
        self.play.blockSignals(True)
        self.play.setChecked(playing)
        self.play.setText("⏸ Pause" if playing else "▶ Replay")
        self.play.blockSignals(False)

    def set_position(self, playback: Playback) -> None:
        fraction = playback.position_s / playback.duration_s if playback.duration_s else 1.0
        if not self.slider.isSliderDown():
            self.slider.setValue(round(fraction * SLIDER_STEPS))
        self.clock.setText(f"{playback.position_s:.1f} / {playback.duration_s:.1f} s")

    def _moved(self, value: int) -> None:
        self.seeked.emit(value / SLIDER_STEPS * self._duration)
