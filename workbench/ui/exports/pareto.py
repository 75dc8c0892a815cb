"""A tune's Pareto chart written to a file, headless: the Tune tab's own ``ParetoChart``, on
white, for ``workbench tune`` to write beside ``recommendation.json``."""

from __future__ import annotations

from pathlib import Path

from workbench.engine.tune.records import Recommendation
from workbench.ui.exports.report import ChartOptions, on_white
from workbench.ui.views.charts import discard, export_widget
from workbench.ui.views.pareto_chart import ParetoChart


def write_pareto_chart(
    recommendation: Recommendation, path: Path, options: ChartOptions | None = None
) -> None:
    """Every tried configuration, the SLO's region and the winner, in ``path``'s format
    (PNG, SVG or PDF; another suffix or a folder that cannot be made is an OutputDirError)."""
    options = options or ChartOptions()
    with on_white():
        chart = ParetoChart()
        try:
            chart.show_recommendation(recommendation)
            export_widget(chart, path, options.width, options.height, options.dpi)
        finally:
            discard(chart)
