"""The slots strip fills each slot's bar as far as its request fills the slot's context."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QPointF

from workbench.engine.events import ExperimentStarted, SlotsSample
from workbench.engine.measure.sampler import normalise_slots
from workbench.ui.run_model import RunModel
from workbench.ui.theme.qt_theme import series_color
from workbench.ui.views.server_plots import BAR_HEIGHT, TITLE_BUSY, TITLE_CONTEXT, ServerPlots

S = 10**9


def sample(t: float, *held: int | None, n_ctx: int | None = 1000) -> SlotsSample:
    """/slots as the real server answers it: each slot holding ``n`` tokens of its
    ``n_ctx``, or idle (None)."""
    answer = [
        {"id": i, "n_ctx": n_ctx, "is_processing": n is not None}
        | ({} if n is None else {"n_prompt_tokens": n, "n_prompt_tokens_processed": 0})
        for i, n in enumerate(held)
    ]
    return SlotsSample(0, int(t * S), normalise_slots(answer))


def started() -> RunModel:
    model = RunModel()
    model.apply([ExperimentStarted("e", "s", 1, "managed", 0)])
    return model


def pixel(plots: ServerPlots, t: float, y: float) -> tuple[int, int, int]:
    """The colour the strip paints at time ``t`` and slot row position ``y``."""
    view = plots.slots.getPlotItem().getViewBox()
    point = plots.slots.mapFromScene(view.mapViewToScene(QPointF(t, y)))
    color = plots.slots.grab().toImage().pixelColor(point)
    return color.red(), color.green(), color.blue()


def near(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool:
    """The same colour, give or take a faint grid line drawn over it."""
    return all(abs(x - y) <= 12 for x, y in zip(a, b, strict=True))


def test_each_slot_fills_its_bar_as_far_as_its_context_is_used(qtbot):
    plots = ServerPlots()
    qtbot.addWidget(plots)
    plots.resize(800, 900)
    plots.show()
    model = started()
    model.apply(
        [sample(0.0, None, None)]
        + [sample(0.25 * i, 500, 200 + 20 * i) for i in range(1, 41)]
        + [sample(10.25, None, None)]
    )
    plots.sync(model)
    plots.slots.getPlotItem().setXRange(0, 10.25, padding=0)
    strip = plots.slots.getPlotItem()
    assert strip.titleLabel.text == TITLE_CONTEXT
    assert "a full bar is the slot's\nn_ctx" in plots.slots.toolTip()
    assert sorted(plots.context_curves) == [0, 1]
    # Within its row, a curve's bottom is the bar's bottom edge (nothing held) and a share
    # of 1 would reach the bar's top: the y axis points down, slot 0 on top.
    x, y = plots.context_curves[1].getData()
    assert list(x) == [0.0, *(0.25 * i for i in range(1, 41)), 10.25]
    shares = [0.0, *(0.2 + 0.02 * i for i in range(1, 41)), 0.0]
    assert np.allclose(y, 1 + BAR_HEIGHT / 2 - BAR_HEIGHT * np.array(shares))
    assert plots.context_curves[1].opts["fillLevel"] == 1 + BAR_HEIGHT / 2

    qtbot.waitExposed(plots)
    solid = series_color("busy_slots")
    solid_rgb = (solid.red(), solid.green(), solid.blue())
    # Points clear of the fills' edges. Slot 0 holds half its context from 0.25 s to 10 s:
    # solid in the bar's lower half, pale in its upper half.
    assert near(pixel(plots, 5.3, 0.2), solid_rgb)
    pale = pixel(plots, 5.3, -0.2)
    background = pixel(plots, 5.3, 0.5)  # between the two rows
    # Busy but not held: the bar's colour faded into the background, whichever theme.
    assert not near(pale, solid_rgb) and not near(pale, background)
    assert all(
        min(b, c) <= p <= max(b, c) for p, b, c in zip(pale, background, solid_rgb, strict=True)
    )
    # Slot 1 grows from 22 % to all of it: a point in the upper part of its bar is held
    # late in the run (94 %), not early on (25 %).
    assert near(pixel(plots, 9.3, 0.9), solid_rgb)
    assert near(pixel(plots, 0.7, 0.9), pale)


def test_a_series_that_did_not_move_is_not_drawn_again(qtbot):
    plots = ServerPlots()
    qtbot.addWidget(plots)
    model = started()
    model.apply([sample(1.0, 500)])
    plots.sync(model)
    curve = plots.context_curves[0]
    drawn = []
    curve.sigPlotChanged.connect(drawn.append)
    plots.sync(model)
    assert drawn == []
    model.apply([sample(1.25, 500)])  # a second equal share: a new point
    plots.sync(model)
    model.apply([sample(1.5, 500)])  # a third: the second moves, the count stays
    plots.sync(model)
    assert len(drawn) == 2 and list(curve.getData()[0]) == [1.0, 1.5]


def test_without_context_counts_the_strip_shows_busy_slots_as_before(qtbot):
    """Sessions recorded before the counts were kept, and builds that do not give them."""
    plots = ServerPlots()
    qtbot.addWidget(plots)
    model = started()
    model.apply([sample(1.0, 500, n_ctx=None)])
    plots.sync(model)
    strip = plots.slots.getPlotItem()
    assert plots.context_curves == {} and strip.titleLabel.text == TITLE_BUSY
    assert plots.slot_bars.opts["brush"] == series_color("busy_slots")
    model.apply([sample(1.25, 500)])
    plots.sync(model)
    assert strip.titleLabel.text == TITLE_CONTEXT
    assert plots.slot_bars.opts["brush"].alpha() < 255
    # A new run starts empty: its curves go with the old run.
    model.apply([ExperimentStarted("e2", "s2", 1, "managed", 10 * S)])
    plots.sync(model)
    assert plots.context_curves == {} and strip.titleLabel.text == TITLE_BUSY
    assert strip.listDataItems() == [plots.slot_bars]
