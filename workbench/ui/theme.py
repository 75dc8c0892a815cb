"""Colours and fonts: one place, shared by the Gantt, the grid, the plots and the legends."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import pyqtgraph as pg
from PySide6.QtGui import QColor, QFont, QIcon, QPalette, QPixmap
from PySide6.QtWidgets import QApplication


@cache
def _data() -> dict[str, Any]:
    return json.loads(resources.files("workbench.resources").joinpath("theme.json").read_text())


def state_color(state: str) -> QColor:
    return QColor(_data()["states"][state])


def series_color(name: str) -> QColor:
    return QColor(_data()["series"][name])


@dataclass(frozen=True)
class Theme:
    name: str
    colors: dict[str, str]

    def color(self, role: str) -> QColor:
        return QColor(self.colors[role])


def theme(name: str) -> Theme:
    return Theme(name, _data()["themes"][name])


def app_icon() -> QIcon:
    svg = resources.files("workbench.resources").joinpath("icon.svg").read_bytes()
    pixmap = QPixmap()
    pixmap.loadFromData(svg, "SVG")
    return QIcon(pixmap)


def apply_theme(app: QApplication, name: str = "dark", font_pt: int = 11) -> Theme:
    """Fusion style with our palette, a readable base font, and matching plot colours."""
    t = theme(name)
    app.setStyle("Fusion")
    palette = QPalette()
    roles = {
        QPalette.ColorRole.Window: "window",
        QPalette.ColorRole.Base: "base",
        QPalette.ColorRole.AlternateBase: "alternate",
        QPalette.ColorRole.Text: "text",
        QPalette.ColorRole.WindowText: "text",
        QPalette.ColorRole.ButtonText: "text",
        QPalette.ColorRole.ToolTipText: "text",
        QPalette.ColorRole.ToolTipBase: "base",
        QPalette.ColorRole.PlaceholderText: "muted",
        QPalette.ColorRole.Button: "button",
        QPalette.ColorRole.Highlight: "highlight",
    }
    for role, key in roles.items():
        palette.setColor(role, t.color(key))
    palette.setColor(QPalette.ColorRole.HighlightedText, QColor("#ffffff"))
    app.setPalette(palette)
    font = QFont(app.font())
    font.setPointSize(font_pt)
    app.setFont(font)
    pg.setConfigOptions(
        background=t.colors["plot_background"],
        foreground=t.colors["plot_foreground"],
        antialias=False,
    )
    return t
