"""The queue Gantt as one self-contained, interactive HTML page: the same bars as the window
(``gantt_rows``), drawn as SVG by a few lines of inline script, so it opens in any browser with
no network and no server. Hover a bar for the request's figures, drag or use the wheel to pan
and zoom time, double-click to see it all, and switch between rows per request and lanes per
server slot.

Everything from the session (names, labels, errors) reaches the page as JSON inside a script
element and is set as text, never as markup.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any

from workbench.ui.run_model import RunModel
from workbench.ui.theme.palette import theme_data
from workbench.ui.views.gantt_rows import (
    DUE,
    REPREFILLED,
    SEGMENTS,
    SENT_LATE,
    STALL_HEIGHT,
    STALLED,
    STEADY_OPACITY,
    arrival_ticks,
    conversation_colour,
    conversation_legend,
    conversation_palette,
    lane_rows,
    late_span,
    lost_span,
    request_tooltip,
    segments,
    steady_spans,
)


def _resource(name: str) -> str:
    return resources.files("workbench.resources").joinpath(name).read_text(encoding="utf-8")


def state_colors() -> dict[str, str]:
    """The request states' colours, from the theme file the window reads."""
    return {state: theme_data()["states"][state] for state in SEGMENTS}


def gantt_document(model: RunModel, title: str, subtitle: str = "") -> dict[str, Any]:
    """What the page draws: each request's spans (seconds from the run's start), its row
    and its slot lane, its tooltip, a conversations run's colour and lost turns, the
    configurations' start marks, each repeat's steady state, shaded, and the arrival ticks
    (when each request was due, on time and late, and a late one's wait before its bar), and
    each stream's stalls with the number of the request whose prompt caused each."""
    now = model.last_t
    lanes, lane_names = lane_rows(model)
    requests = [
        {
            "row": view.row,
            "lane": lanes[(view.config_index, view.slot)],
            "spans": [[name, round(x0, 4), round(x1, 4)] for name, x0, x1 in segments(view, now)],
            "tip": request_tooltip(view),
            "colour": conversation_colour(model, view),
            "lost": [round(t, 4) for t in lost] if (lost := lost_span(view, now)) else None,
            "wait": [round(t, 4) for t in wait] if (wait := late_span(view)) else None,
            "number": view.number,
            "stalls": [
                [round(stall.start, 4), round(stall.end, 4), stall.cause, stall.words()]
                for stall in view.stalls
            ],
        }
        for view in model.ordered()
    ]
    users, count = conversation_legend(model)
    due, late = arrival_ticks(model.ordered())
    return {
        "title": title,
        "subtitle": subtitle,
        "end": round(now, 4),
        "rows": len(requests),
        "lanes": lane_names,
        "marks": [[round(t, 4), label] for t, label in model.config_marks],
        "steady": [[round(a, 4), round(b, 4)] for a, b in steady_spans(model)],
        "steadyColor": theme_data()["series"]["steady"],
        "steadyOpacity": STEADY_OPACITY,
        "requests": requests,
        "colors": state_colors(),
        "page": theme_data()["gantt_page"],
        "labels": {state: state.label for state in SEGMENTS},
        "arrivals": [
            [[round(t, 4) for t in times], theme_data()["series"][colour], label]
            for times, colour, label in ((due, "arrival", DUE), (late, "arrival_late", SENT_LATE))
            if times
        ],
        "waitColor": theme_data()["series"]["arrival_late"],
        "stall": {
            "color": theme_data()["series"]["stall"],
            "height": STALL_HEIGHT,
            "label": STALLED,
        },
        "conversations": {
            "colors": conversation_palette(),
            "users": users,
            "count": count,
            "lostColor": theme_data()["series"]["reprefilled"],
            "lostLabel": REPREFILLED,
        },
    }


def gantt_html(model: RunModel, title: str, subtitle: str = "") -> str:
    data = json.dumps(gantt_document(model, title, subtitle), separators=(",", ":"))
    data = data.replace("<", "\\u003c")  # nothing in the data can close the script element
    head, tail = _resource("gantt.html").split("{{data}}")  # each filled once, in its place
    return head.replace("{{title}}", html.escape(title)) + data + tail
