"""Presentation mode: the window as a speaker shows it on a projector, and back.

Full screen, the projector theme in large type, the stream grid and the Gantt side by side
with a caption above them, the panels a speaker does not need hidden. Everything it changes
is saved on entering and put back on leaving, so the window returns exactly as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QByteArray, QEvent, QObject, QRect, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow, QSplitter, QWidget

from workbench.ui.captions import caption, phase_of
from workbench.ui.run_model import RunModel
from workbench.ui.theme.qt_theme import apply_theme, restyle_plots, theme, theme_name

THEME = "projector"
FONT_PT = 18.0  # at 1080 lines: readable from the back of a room
LEAST_FONT_PT = 12.0
ZOOM_STEP_PT = 2.0
FONT_LIMITS_PT = (8.0, 32.0)  # at 32 pt the window needs ~1,570 px; much more, 1920 is short
CAPTION_SCALE = 1.5  # of the font: the line the audience reads first
GRID_SHARE = 0.55  # of the width, the stream grid's; the Gantt has the rest


@dataclass(frozen=True)
class Stage:
    """The parts of the window presentation mode rearranges."""

    window: QMainWindow
    columns: QSplitter  # the window's three columns
    views: QSplitter  # the stream grid over the Gantt, side by side while presenting
    chrome: tuple[QWidget, ...]  # hidden while presenting
    caption: QLabel


@dataclass(frozen=True)
class Saved:
    """The window as it was before presenting, to put back."""

    geometry: QRect  # the window's normal geometry (maximized, it is the one it returns to)
    state: Qt.WindowState
    theme: str
    font_pt: float
    columns: QByteArray
    views: QByteArray
    shown: tuple[bool, ...]  # each chrome widget's visibility


class Presentation(QObject):
    toggled = Signal(bool)

    def __init__(self, stage: Stage, model: RunModel, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.stage = stage
        self.model = model
        self.saved: Saved | None = None
        self.font_pt: float | None = None  # chosen for the screen, then kept: same room
        self.captions = True
        stage.caption.hide()

    @property
    def on(self) -> bool:
        return self.saved is not None

    def set_on(self, on: bool) -> None:
        if on == self.on:
            return
        if on:
            self._enter()
        else:
            self._leave()
        self.toggled.emit(on)

    def _enter(self) -> None:
        app, window, views = _app(), self.stage.window, self.stage.views
        self.saved = Saved(
            window.normalGeometry(),
            window.windowState(),
            theme_name(app),
            app.font().pointSizeF(),
            self.stage.columns.saveState(),
            views.saveState(),
            tuple(w.isVisibleTo(window) for w in self.stage.chrome),
        )
        if self.font_pt is None:
            self.font_pt = font_for_screen(window.screen().geometry().height())
        for widget in self.stage.chrome:
            widget.hide()
        views.setOrientation(Qt.Orientation.Horizontal)
        window.setWindowState(window.windowState() | Qt.WindowState.WindowFullScreen)
        self.relayout()
        self._apply_font()
        self._show_caption()

    def _leave(self) -> None:
        assert self.saved is not None
        saved, self.saved = self.saved, None
        app, window = _app(), self.stage.window
        self.stage.caption.hide()
        apply_theme(app, saved.theme, saved.font_pt)
        restyle_plots(window, theme(saved.theme))
        _settle(app)  # before showing the panels: in large type they would widen the window
        for widget, shown in zip(self.stage.chrome, saved.shown, strict=True):
            widget.setVisible(shown)
        _settle(app)
        self.stage.columns.restoreState(saved.columns)
        self.stage.views.restoreState(saved.views)
        window.setWindowState(Qt.WindowState.WindowNoState)
        window.setGeometry(saved.geometry)
        window.setWindowState(saved.state)

    def relayout(self) -> None:
        """The grid and the Gantt share the window's width (it changes on going full screen)."""
        width = self.stage.window.width()
        self.stage.views.setSizes([round(width * GRID_SHARE), round(width * (1 - GRID_SHARE))])

    def zoom(self, steps: int) -> None:
        """Larger (or smaller) type for the room, ``steps`` of 2 pt."""
        low, high = FONT_LIMITS_PT
        current = self.font_pt if self.font_pt is not None else FONT_PT
        self.font_pt = min(high, max(low, current + steps * ZOOM_STEP_PT))
        if self.on:
            self._apply_font()

    def toggle_full_screen(self) -> None:
        window = self.stage.window
        window.setWindowState(window.windowState() ^ Qt.WindowState.WindowFullScreen)

    def show_captions(self, on: bool) -> None:
        self.captions = on
        self._show_caption()

    def _apply_font(self) -> None:
        assert self.saved is not None and self.font_pt is not None
        apply_theme(_app(), THEME, self.font_pt)
        restyle_plots(self.stage.window, theme(THEME), self.font_pt / self.saved.font_pt)
        font = QFont(_app().font())
        font.setPointSizeF(self.font_pt * CAPTION_SCALE)
        font.setBold(True)
        self.stage.caption.setFont(font)

    def _show_caption(self) -> None:
        self.stage.caption.setVisible(self.on and self.captions)
        self.refresh_caption()

    def refresh_caption(self) -> None:
        """The caption from the run model as it stands: called on the views' refresh tick
        (a run's pump, a replay's frame), never per token; nothing while it is hidden."""
        if not self.stage.caption.isVisibleTo(self.stage.window):
            return
        text = caption(phase_of(self.model))
        if text != self.stage.caption.text():
            self.stage.caption.setText(text)


def font_for_screen(height: int) -> float:
    """18 pt on a 1080-line screen, in proportion on others (never under 12 pt): the type
    takes the same share of the projected picture whatever its resolution."""
    return max(LEAST_FONT_PT, round(FONT_PT * height / 1080))


def _settle(app: QApplication) -> None:
    """Deliver the font change and the layouts it asks for now: they arrive as posted
    events, and until then the window's minimum size is the large type's, which clamps
    (or grows) the geometry being put back."""
    for kind in (QEvent.Type.ApplicationFontChange, QEvent.Type.LayoutRequest):
        app.sendPostedEvents(None, kind)


def _app() -> QApplication:
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    return app
