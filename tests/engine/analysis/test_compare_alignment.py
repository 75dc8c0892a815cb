"""Alignment by what a configuration is, relative figures per group, and chart series for
sweeps over more than one setting (no server needed)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from workbench.engine.analysis.compare import chart_data_from, compare_sessions
from workbench.engine.base.records import Hardware, StartupFacts
from workbench.engine.base.states import ConfigStatus
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.store import ConfigRow


def summary(label: str, slots: int, ctx: int, agg: float, cb: bool = True) -> ConfigSummary:
    mean = {
        "agg_tok_s": agg,
        "ttft_p50_s": 1.0,
        "decode_tok_s": 10.0,
        "makespan_s": 5.0,
        "ttft_max_s": 2.0,
    }
    return ConfigSummary(
        0,
        label,
        slots,
        ctx,
        ctx // slots,
        slots,
        False,
        cb,
        8,
        64,
        "ok",
        [],
        mean,
        {k: None for k in mean},
    )


@dataclass
class FakeSession:
    name: str
    rows: list[ConfigSummary]

    @property
    def meta(self):
        return {"name": self.name, "created_at": "2026-11-29T08:00:00"}

    @property
    def hardware(self):
        return Hardware(cpu_model="cpu")

    managed = True  # the workbench started its servers

    @property
    def configs(self):
        return [
            ConfigRow(
                index=i,
                label=s.label,
                server={"model": "default"},
                workload={"max_tokens": 64},
                status=ConfigStatus.OK,
                facts=StartupFacts(backend="CPU"),
            )
            for i, s in enumerate(self.rows)
        ]

    def summaries(self):
        return self.rows

    def import_source(self):
        return None  # measured by the workbench

    def remote_origin(self):
        return None  # measured on this machine


def test_the_same_configuration_aligns_whatever_its_label():
    slots = FakeSession("slots", [summary("np=1", 1, 8192, 10), summary("np=4", 4, 8192, 30)])
    ctxs = FakeSession("ctx", [summary("c=4096", 4, 4096, 28), summary("c=8192", 4, 8192, 31)])
    comparison = compare_sessions([slots, ctxs])
    assert comparison.labels == ["np=1", "np=4 / c=8192", "c=4096"]
    assert comparison.cells[("np=4 / c=8192", "agg_tok_s")] == [30, 31]
    assert comparison.cells[("c=4096", "agg_tok_s")] == [None, 28]


def test_relative_and_series_per_group_in_a_two_setting_sweep():
    rows = [
        summary(f"np={n} c={c}", n, c, agg)
        for c, base in ((4096, 10), (8192, 20))
        for n, agg in ((1, base), (2, base * 1.5), (4, base * 2))
    ]
    session = FakeSession("grid", rows)
    relative = compare_sessions([session], relative=True)
    assert relative.cells[("np=4 c=8192", "agg_tok_s")] == [pytest.approx(2.0)]
    assert relative.cells[("np=2 c=4096", "agg_tok_s")] == [pytest.approx(1.5)]
    (agg,) = [c for c in chart_data_from([("grid", rows)]) if c.key == "agg_tok_s"]
    assert [(s.name, s.x, s.y) for s in agg.series] == [
        ("grid · c=4096", [1.0, 2.0, 4.0], [10, 15, 20]),
        ("grid · c=8192", [1.0, 2.0, 4.0], [20, 30, 40]),
    ]
    (rel,) = [c for c in chart_data_from([("grid", rows)], relative=True) if c.key == "agg_tok_s"]
    assert rel.series[1].y == pytest.approx([1.0, 1.5, 2.0])


def test_on_off_sweeps_are_shown_by_name():
    rows = [summary("cb=on", 4, 8192, 30, cb=True), summary("cb=off", 4, 8192, 25, cb=False)]
    (agg,) = [c for c in chart_data_from([("cb", rows)]) if c.key == "agg_tok_s"]
    assert agg.x_label == "configuration"
    assert agg.x_ticks == [(1.0, "cb=on"), (2.0, "cb=off")]
    assert agg.series[0].x == [1.0, 2.0] and agg.series[0].y == [30, 25]
