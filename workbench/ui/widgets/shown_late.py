"""Views whose content is worked out only while they show."""

from __future__ import annotations

from PySide6.QtGui import QShowEvent


class DrawnWhenShown:
    """Mixed into a widget (before its Qt class): ``content_changed`` draws now if the widget
    shows, else at its next show. A tab most windows never open (verdicts, roofline) then
    costs nothing at the end of every configuration."""

    _stale = False

    def content_changed(self) -> None:
        self._stale = True
        if self.isVisible():  # type: ignore[attr-defined]
            self._draw_content()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)  # type: ignore[misc]
        if self._stale:
            self._draw_content()

    def _draw_content(self) -> None:
        self._stale = False
        self.draw_content()

    def draw_content(self) -> None:
        raise NotImplementedError
