"""A session's queue Gantt written to files, headless: PNG and SVG of the rows per request and
of the lanes per server slot (the same ``GanttView`` as the window), and one interactive HTML
page with both."""

from __future__ import annotations

import html
from collections.abc import Iterator
from pathlib import Path

from workbench.engine.analysis.compare import session_column, workload_caption
from workbench.engine.base.errors import OutputDirError
from workbench.engine.base.states import RequestState
from workbench.engine.run.replay import session_events
from workbench.engine.store import Session
from workbench.ui.exports.gantt_html import gantt_html
from workbench.ui.exports.report import ChartOptions, on_white
from workbench.ui.run_model import RunModel
from workbench.ui.views.charts import discard, export_widget
from workbench.ui.views.gantt import TITLES, GanttView
from workbench.ui.views.gantt_rows import (
    DUE,
    GHOST,
    REPREFILLED,
    SEGMENTS,
    SENT_LATE,
    STALLED,
    conversation_legend,
)

VIEWS = (("gantt", False), ("gantt-slots", True))  # file stem, lanes by slot


def session_model(session: Session) -> RunModel:
    """The session folded into the window's run model, as it stood when the run ended."""
    model = RunModel()
    model.apply([event for _, event in session_events(session)])
    return model


def drawn_views(model: RunModel, title: str) -> Iterator[tuple[str, GanttView]]:
    """Each of ``VIEWS`` drawn in turn, ready for its files: the file stem and the view (one
    view, drawn again for each), with a legend of the colours it shows; deleted after."""
    view = GanttView()
    # The plot's one legend, which the window keeps for the prediction's entry alone and
    # hides when there is none: here it names every colour, and always shows.
    legend = view.ghost_legend
    legend.anchor((1, 0), (1, 0), offset=(-10, 10))
    try:
        for stem, lanes in VIEWS:
            view.set_lanes(lanes)
            view.sync(model, model.last_t)
            legend.clear()
            users, count = conversation_legend(model)
            for name in SEGMENTS[1:] if lanes else SEGMENTS:  # a slot's lane never waits
                if users and name is RequestState.DECODING:  # a conversation's colour
                    continue
                if name is RequestState.CANCELLED and not len(view.bars[name].opts["width"]):
                    continue  # a stop's mark, named only where a stop cut something
                legend.addItem(view.bars[name], name.label)
            for user, colour in users:
                legend.addItem(view.conversation_bars[colour], user)
            if count > len(users):
                legend.addItem(view.conversation_bars[0], f"… {count} users: colours repeat")
            if users:
                legend.addItem(view.lost, REPREFILLED)
            if len(view.stalls.opts["width"]):
                legend.addItem(view.stalls, STALLED)
            if len(view.ghosts.opts["width"]):
                legend.addItem(view.ghosts, GHOST)
            for ticks, item, label in zip(
                view.tick_times(),
                (view.arrivals, view.late_arrivals),
                (DUE, SENT_LATE),
                strict=True,
            ):
                if ticks:
                    legend.addItem(item, label)
            legend.show()
            view.getPlotItem().setTitle(
                f"{TITLES[lanes]}<br><span style='font-size:9pt'>{html.escape(title)}</span>"
            )
            yield stem, view
    finally:
        discard(view)


def write_gantt(session: Session, out_dir: Path, options: ChartOptions) -> list[Path]:
    """gantt.* and gantt-slots.* in each of ``options.formats`` (PDF too), and gantt.html."""
    model = session_model(session)
    title = session_column(session)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    written = []
    with on_white():
        for stem, view in drawn_views(model, title):
            for fmt in options.formats:
                path = out_dir / f"{stem}.{fmt}"
                export_widget(view, path, options.width, options.height, options.dpi, settle=True)
                written.append(path)
    page = out_dir / "gantt.html"
    caption = workload_caption([session.summaries()])
    try:
        page.write_text(gantt_html(model, title, caption), encoding="utf-8")
    except OSError as exc:
        raise OutputDirError(f"cannot write {page}: {exc.strerror or exc}") from None
    return [*written, page]
