"""The window says which kind of server it measures, and a server without /slots (vLLM,
SGLang) gets its KV-cache use plotted where the slots strip would be."""

from __future__ import annotations

import numpy as np

from tests.ui.test_slot_occupancy import sample
from workbench.engine.events import ExperimentStarted, MetricsSample
from workbench.ui.panels.server_panel import ServerPanel
from workbench.ui.run_model import RunModel
from workbench.ui.views.server_plots import MEMORY_NOTES, ServerPlots

S = 10**9


def vllm(t: float, running: float, kv: float) -> MetricsSample:
    labels = "{engine=0,model_name=m}"
    return MetricsSample(
        0,
        int(t * S),
        {
            f"vllm:num_requests_running{labels}": running,
            f"vllm:num_requests_waiting{labels}": 0.0,
            f"vllm:kv_cache_usage_perc{labels}": kv,
        },
    )


def started() -> RunModel:
    model = RunModel()
    model.apply([ExperimentStarted("e", "s", 1, "external", 0)])
    return model


def test_a_server_without_slots_shows_its_kv_cache_in_the_strips_place(qtbot):
    plots, panel = ServerPlots(), ServerPanel()
    qtbot.addWidget(plots)
    qtbot.addWidget(panel)
    plots.resize(600, 900)
    plots.show()
    assert "once it runs" in plots.notes["memory"].text()
    model = started()
    plots.sync(model)
    assert plots.kv.isHidden() and not plots.slots.isHidden()  # before any sample
    # No process to watch: the memory plot says why it stays empty.
    assert plots.notes["memory"].text() == MEMORY_NOTES["external"]
    model.apply([vllm(0.25 * i, min(i, 4), 0.1 * min(i, 8)) for i in range(10)])
    plots.sync(model)
    assert not plots.kv.isHidden() and plots.slots.isHidden()
    _, y = plots.kv_curve.getData()
    assert np.allclose(y, [10.0 * min(i, 8) for i in range(10)])  # in %
    assert list(plots.running.getData()[1]) == [min(i, 4) for i in range(10)]
    kv_axis = plots.kv.getPlotItem().getAxis("bottom")
    assert kv_axis.style["showValues"] and kv_axis.labelText == "time since start"
    panel.show_kind(model.server.kind_text)
    assert panel.kind.text() == (
        "vLLM detected: /metrics gives requests running, requests waiting, KV-cache use; "
        "no /slots (no slot lanes or per-slot context)"
    )


def test_a_server_with_slots_keeps_its_strip_under_the_kv_plot(qtbot):
    """An older llama.cpp gives both: its KV-cache share in /metrics and its slots."""
    plots = ServerPlots()
    qtbot.addWidget(plots)
    model = started()
    model.apply(
        [
            MetricsSample(0, S, {"llamacpp:kv_cache_usage_ratio": 0.4}),
            sample(1.0, 300, None),
        ]
    )
    plots.sync(model)
    assert not plots.kv.isHidden() and not plots.slots.isHidden()
    assert not plots.kv.getPlotItem().getAxis("bottom").style["showValues"]
    assert model.server.kind_text.startswith("llama.cpp detected: /metrics gives KV-cache use;")
