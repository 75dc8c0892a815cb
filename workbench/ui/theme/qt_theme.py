"""Colours and fonts: one place, shared by the Gantt, the grid, the plots and the legends.
Every colour the window draws comes from ``theme.json`` through here."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from weakref import WeakKeyDictionary

import pyqtgraph as pg
from PySide6.QtCore import QEvent
from PySide6.QtGui import QColor, QFont, QIcon, QPalette, QPixmap
from PySide6.QtWidgets import QApplication, QWidget

from workbench.ui.theme.palette import DEFAULT_FONT_PT, theme_data

THEME_PROPERTY = "workbenchTheme"  # the name apply_theme last applied, kept on the app


def theme_color(group: str, name: str) -> QColor:
    """One colour of the theme file: ``group`` is its section ("signals", "banners", ...)."""
    return QColor(theme_data()[group][name])


def state_color(state: str) -> QColor:
    return theme_color("states", state)


def series_color(name: str) -> QColor:
    return theme_color("series", name)


def signal_color(name: str) -> QColor:
    """What a mark says: "ok", "warning", "error" or "quiet" (the same in every theme)."""
    return theme_color("signals", name)


def text_style(signal: str) -> str:
    """A style sheet for a label written in a signal's colour."""
    return f"color:{signal_color(signal).name()};"


def session_colors() -> tuple[QColor, ...]:
    """The sessions' colours, in order, where several share a chart (Okabe-Ito: distinct for
    colour-blind eyes, readable on white and dark)."""
    return tuple(QColor(c) for c in theme_data()["sessions"])


@dataclass(frozen=True)
class Theme:
    name: str
    colors: dict[str, str]

    def color(self, role: str) -> QColor:
        return QColor(self.colors[role])


def theme(name: str) -> Theme:
    return Theme(name, theme_data()["themes"][name])


def app_icon() -> QIcon:
    svg = resources.files("workbench.resources").joinpath("icon.svg").read_bytes()
    pixmap = QPixmap()
    pixmap.loadFromData(svg, "SVG")
    return QIcon(pixmap)


def apply_theme(app: QApplication, name: str = "dark", font_pt: float = DEFAULT_FONT_PT) -> Theme:
    """Fusion style with our palette, a readable base font, and matching plot colours for
    the plots made from now on (``restyle_plots`` brings existing ones along).

    On a running window (presentation mode) the font goes first and reaches the widgets at
    once (it travels as posted events); the style's re-polish then has every widget measure
    itself in it: a combo box kept its least width from the old font otherwise."""
    t = theme(name)
    app.setProperty(THEME_PROPERTY, name)
    font = QFont(app.font())
    font.setPointSizeF(font_pt)
    app.setFont(font)
    app.sendPostedEvents(None, QEvent.Type.ApplicationFontChange)
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
    palette.setColor(QPalette.ColorRole.HighlightedText, theme_color("text", "on_colour"))
    app.setPalette(palette)
    # Fusion outlines a check box in the window's colour darkened: black on the projector's
    # black ("Gantt lanes by slot" could not be seen), near-invisible on dark. Its own
    # palette's window colour (which it paints nothing else with) is the muted text's.
    indicators = QPalette(palette)
    indicators.setColor(QPalette.ColorRole.Window, t.color("muted"))
    for kind in ("QCheckBox", "QRadioButton"):
        app.setPalette(indicators, kind)
    pg.setConfigOptions(
        background=t.colors["plot_background"],
        foreground=t.colors["plot_foreground"],
        antialias=False,
    )
    return t


def theme_name(app: QApplication) -> str:
    """The theme ``apply_theme`` last gave the application."""
    return str(app.property(THEME_PROPERTY) or "dark")


def restyle_plots(root: QWidget, t: Theme, text_scale: float = 1.0) -> None:
    """Give the plots under ``root`` the theme's colours, and titles set in a size of their
    own ``text_scale`` times that size: pyqtgraph reads its colours when an item is made, so
    plots made before a theme change keep the old ones. Tick labels follow the application
    font by themselves."""
    foreground = t.color("plot_foreground")
    # An axis label keeps the font it was made in: scaled, it reads like the ticks beside it.
    label_style = {"color": foreground.name()}
    if text_scale != 1.0:
        label_style["font-size"] = f"{QApplication.font().pointSizeF()}pt"
    for widget in root.findChildren(pg.PlotWidget):
        widget.setBackground(t.color("plot_background"))
        plot = widget.getPlotItem()
        for name in ("left", "bottom", "right", "top"):
            axis = plot.getAxis(name)
            axis.setPen(foreground)
            axis.setTextPen(foreground)
            axis.setTickFont(None)  # re-measured in the application's font
            if axis.labelText or axis.labelUnits:
                axis.setLabel(axis.labelText, axis.labelUnits, axis.labelUnitPrefix, **label_style)
        _restyle_label(plot.titleLabel, foreground, text_scale)
        if plot.legend is not None:
            background = t.color("plot_background")
            background.setAlpha(200)
            plot.legend.setBrush(pg.mkBrush(background))
            plot.legend.setLabelTextColor(foreground)
            for _, label in plot.legend.items:  # scaled as the titles: the Gantt's "predicted"
                _restyle_label(label, foreground, text_scale)  # stayed 9 pt on a projector
            fit_legend(plot.legend)


def fit_legend(legend: pg.LegendItem) -> None:
    """A legend as large as its labels now are: pyqtgraph only ever grows one, so a legend
    scaled up for presenting kept its large box after."""
    legend.setGeometry(0, 0, 0, 0)  # lays the labels out at their own sizes again
    legend.layout.activate()
    legend.updateSize()


# Each label's own size ("9pt") before any scaling, so scaling back gives it exactly again.
_BASE_SIZES: WeakKeyDictionary[pg.LabelItem, str] = WeakKeyDictionary()


def _restyle_label(label: pg.LabelItem, color: QColor, factor: float) -> None:
    """The label in ``color``, its own size times ``factor`` (a label in the default font
    follows the application's)."""
    size = _BASE_SIZES.setdefault(label, label.opts.get("size") or "")
    if size and factor != 1.0:
        size = f"{float(size.removesuffix('pt')) * factor:.1f}pt"
    label.setText(label.text, color=color, **({"size": size} if size else {}))
