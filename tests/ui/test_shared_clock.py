"""Runs shown side by side count from one origin: a run's start is moved there, on its own
clock (another machine's clock moved by its runner's measured offset), so requests sent at
the same moment sit at the same time on every machine's Gantt."""

from __future__ import annotations

from dataclasses import dataclass, field

from workbench.engine.config.experiment import parse_experiment
from workbench.engine.events import ConfigStarted, EventBus, ExperimentStarted, RequestSubmitted
from workbench.engine.run.lifecycle import RunLifecycle
from workbench.ui.controllers.render_controller import RenderController
from workbench.ui.controllers.run_controller import RunController
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.run_model import RunModel
from workbench.ui.views.gantt import GanttView
from workbench.ui.views.stream_grid import StreamGrid

S = 1_000_000_000


@dataclass
class Far:
    """A runner whose events carry another clock's times (``clock_offset_ns`` ahead)."""

    clock_offset_ns: int | None
    bus: EventBus = field(default_factory=EventBus)


def shown(qtbot, tmp_path, runner: Far, origin_ns: int | None, t0_ns: int, sent_ns: int):
    """The time a request sent at ``sent_ns`` (the runner's clock) is drawn at, for a run
    that started at ``t0_ns``."""
    grid, gantt = StreamGrid(), GanttView()
    for widget in (grid, gantt):
        qtbot.addWidget(widget)
    model = RunModel()
    controller = RunController(model, RenderController(model, grid, gantt, None, None, None),
                               Tasks(), tmp_path)  # fmt: skip
    controller.origin_ns = origin_ns
    controller.lifecycle = RunLifecycle(runner)  # as start() leaves it, without a run
    controller.subscription = runner.bus.subscribe()
    config = parse_experiment("[server]\nslots = 1\n").configs()[0]
    for event in (
        ExperimentStarted("e", "s", 1, "managed", t0_ns),
        ConfigStarted(config, 1),
        RequestSubmitted(0, 0, 0, False, sent_ns),
    ):
        runner.bus.publish(event)
    controller.drain()
    controller.lifecycle = None
    (view,) = model.requests.values()
    return view.t_submit


def test_a_request_sent_at_one_moment_is_drawn_at_one_time_on_each_machine(qtbot, tmp_path):
    origin = 100 * S  # this machine's clock when Run was pressed
    sent = origin + 3 * S  # the moment both machines sent a request
    here = shown(qtbot, tmp_path, Far(None), origin, origin + S, sent)
    # The far clock reads 7 s more; its run started 2 s after the origin.
    there = shown(qtbot, tmp_path, Far(7 * S), origin, origin + 9 * S, sent + 7 * S)
    assert here == there == 3.0


def test_a_run_alone_counts_from_its_own_start(qtbot, tmp_path):
    assert shown(qtbot, tmp_path, Far(7 * S), None, 9 * S, 12 * S) == 3.0
