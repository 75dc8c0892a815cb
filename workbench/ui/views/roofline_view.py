"""Per-request decode speed against the memory-bandwidth bound (the CLI's ``roofline``)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from workbench.engine.analysis.compare import ChartData, Series
from workbench.engine.analysis.roofline import RooflineReport
from workbench.ui.views.charts import MetricChart
from workbench.ui.widgets.shown_late import DrawnWhenShown

BOUND = {0}  # the places of the series drawn as a model's figure (dashed, hollow points)
PLACEHOLDER = "The roofline appears when a run has finished (managed servers only)."


def roofline_chart(report: RooflineReport) -> ChartData:
    """Bound and measured decode tok/s against slots, or side by side by name when the
    configurations share a slot count (a context or batching sweep). The bound is a model's
    figure: in a colour of its own (the second session's), drawn dashed with hollow points
    (``BOUND``), so it never reads as the measurement beside it."""
    slots = [r.slots for r in report.rows]
    numeric = len(set(slots)) == len(slots)
    rows = sorted(report.rows, key=lambda r: r.slots) if numeric else report.rows
    slots = [r.slots for r in rows]
    x = [float(s) for s in slots] if numeric else [float(i) for i in range(len(rows))]
    measured = [(xi, r.decode_tok_s) for xi, r in zip(x, rows, strict=True) if r.decode_tok_s]
    return ChartData(
        "roofline",
        "Per-request decode vs the memory-bandwidth bound",
        "tok/s",
        "slots" if numeric else "configuration",
        [
            Series(
                "bound: bandwidth / bytes per step", x, [r.bound_tok_s for r in rows], session=1
            ),
            Series("measured", [p[0] for p in measured], [p[1] for p in measured]),
        ],
        None if numeric else [(xi, r.label) for xi, r in zip(x, rows, strict=True)],
    )


def roofline_summary(report: RooflineReport) -> str:
    parts = [f"Memory bandwidth {report.bandwidth / 1e9:.1f} GB/s ({report.how})."]
    shares = [(r.share, r.label) for r in report.rows if r.share is not None]
    if shares:
        best, label = max(shares)
        parts.append(f"Closest to its bound: {label}, at {best:.0%}.")
    if report.recorded_on:
        parts.append(
            f"Recorded on {report.recorded_on}: the bound uses this machine's bandwidth "
            "(workbench roofline --bandwidth-gbs for that machine's)."
        )
    return " ".join(parts)


class RooflineView(DrawnWhenShown, QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.summary = QLabel(PLACEHOLDER)
        self.summary.setWordWrap(True)
        # Made, and drawn, while the tab shows: a plot costs about 20 ms to build, and the
        # report comes in as a run ends, when the tab is rarely the one shown.
        self.chart: MetricChart | None = None
        self.report: RooflineReport | None = None
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(4, 4, 4, 4)
        self._layout.addWidget(self.summary)
        self._layout.addStretch(1)

    def show_report(self, report: RooflineReport | None) -> None:
        self.report = report if report is not None and report.rows else None
        self.summary.setText(PLACEHOLDER if self.report is None else roofline_summary(self.report))
        self.content_changed()

    def draw_content(self) -> None:
        if self.report is not None:
            self._make_chart().show_data(roofline_chart(self.report), dashed=BOUND)
        elif self.chart is not None:
            self.chart.show_data(ChartData("roofline", "", "tok/s", "slots", []))

    def _make_chart(self) -> MetricChart:
        if self.chart is None:
            self.chart = MetricChart()
            self.chart.setToolTip(
                "A decode step reads every weight once (shared by the batch) plus each "
                "sequence's KV cache:\nno request can decode faster than bandwidth / "
                "(weights + batch x KV in use)."
            )
            self._layout.takeAt(self._layout.count() - 1)  # the stretch holding its place
            self._layout.addWidget(self.chart, 1)
        return self.chart
