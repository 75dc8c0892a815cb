"""What the queue Gantt draws, in plain Python (no Qt): each request's spans, the slot lanes,
the arrival ticks, a conversations run's colours and lost turns, and the tooltip text. The
window's Gantt and the exported interactive HTML both read them, so the two show the same
bars."""

from __future__ import annotations

from functools import cache

from workbench.engine.base.states import RequestState
from workbench.engine.figures.client_limits import DISPATCH_LIMIT_MS
from workbench.engine.figures.predicted import PredictedRequest
from workbench.ui.run_model import RequestView, RunModel, StallView
from workbench.ui.theme.palette import theme_data

# The states a bar is drawn in.
SEGMENTS = (
    RequestState.QUEUED,
    RequestState.PREFILL,
    RequestState.DECODING,
    RequestState.FAILED,
    RequestState.CANCELLED,
)
STEADY_OPACITY = 0.14  # of the theme's steady colour: a shade behind the bars, not over them
REPREFILLED = "history re-prefilled"  # a lost turn's mark, as its legend names it
LATE_S = DISPATCH_LIMIT_MS / 1000  # sent this much after it was due: its tick says it was late
DUE = "due"  # an arrival tick, as its legend names it
SENT_LATE = f"sent > {DISPATCH_LIMIT_MS:g} ms late"
GHOST = "predicted"  # the prediction's bars behind the measured ones, as the legend names them
STALLED = "stalled"  # a stream's stretch with no token, as the legend names it
STALL_HEIGHT = 0.4  # of a row: the stall's mark inside its decode bar, which shows around it


@cache
def conversation_palette() -> tuple[str, ...]:
    """The conversations' colours: distinct from each other and from the queued, prefill
    and failed states, which a conversation's bar keeps."""
    return tuple(theme_data()["conversations"])


def conversation_colour(model: RunModel, view: RequestView) -> int | None:
    """Which palette colour a conversations run's request decodes in: its user's (the
    palette repeats past its end); None for an independent request, drawn by its state."""
    if view.user is None:
        return None
    return model.users[view.user] % len(conversation_palette())


def conversation_legend(model: RunModel) -> tuple[list[tuple[str, int]], int]:
    """The users the legend names with their palette colours (one palette's worth, in
    order), and how many users the run has: past the palette's end, colours repeat."""
    palette = len(conversation_palette())
    users = sorted(model.users.items(), key=lambda item: item[1])
    return [(user, n % palette) for user, n in users[:palette]], len(users)


def arrival_ticks(views: list[RequestView]) -> tuple[list[float], list[float]]:
    """When each sent request was due by its arrival schedule: those sent on time, and those
    sent late (``late_span``). A burst's requests have no schedule, so no ticks."""
    on_time: list[float] = []
    late: list[float] = []
    for view in views:
        if view.t_intended is not None and view.t_submit is not None:
            (late if late_span(view) else on_time).append(view.t_intended)
    return on_time, late


def late_span(view: RequestView) -> tuple[float, float] | None:
    """From when a request was due to when it went out, if that was over ``LATE_S`` (it
    waited for a place under the client's concurrency limit, or the client fell behind):
    its row shows the wait before its bar."""
    if view.t_intended is None or view.t_submit is None:
        return None
    return (view.t_intended, view.t_submit) if view.t_submit - view.t_intended > LATE_S else None


def lost_span(view: RequestView, now: float) -> tuple[float, float] | None:
    """Where a turn that re-prefilled its history is marked: the time a slot worked on it
    (its prefill and decoding, not its wait), once the server's counts say it lost it."""
    if view.cache is None or not view.cache.lost:
        return None
    served = [(x0, x1) for name, x0, x1 in segments(view, now) if name is not RequestState.QUEUED]
    return (served[0][0], served[-1][1]) if served else None


def segments(view: RequestView, now: float) -> list[tuple[RequestState, float, float]]:
    """(state, start, end) spans of one request's bar at time ``now``."""
    if view.t_submit is None:
        return []
    start = view.t_submit
    if view.state.cut:
        # Grey while it waited, its state's colour from when a slot had it (a mark at its
        # end when none did): a request that timed out in the queue never held a slot, and
        # in a slot's lane it must not cover the work the slot did meanwhile.
        end = view.t_done or now
        served = next((t for t in (view.t_prefill, view.t_first) if t is not None), end)
        waited = [(RequestState.QUEUED, start, served)] if served > start else []
        return [*waited, (view.state, served, end)]
    if view.state is RequestState.DONE and view.t_first is None:  # no token generated
        return [(RequestState.QUEUED, start, view.t_done or start)]
    if view.state is RequestState.DONE and view.t_first is not None:
        # Queue, then prefill for as long as the server's timings say, then decoding. A
        # whole answer (not streamed) arrives at its end: the server's timings split the
        # wait into queue, prefill and the decoding the client could not watch.
        split = start + view.queue_s if view.queue_s is not None else view.t_first
        decode_from = split + view.prefill_s if view.prefill_s is not None else view.t_first
        decode_from = min(decode_from, view.t_first)
        spans = [
            (RequestState.QUEUED, start, split),
            (RequestState.PREFILL, split, decode_from),
            (RequestState.DECODING, decode_from, view.t_last or view.t_first),
        ]
        return [s for s in spans if s[2] > s[1]]
    # Live: queued until a slot was seen prefilling it (when it was), then decoding.
    first = view.t_first if view.t_first is not None else now
    prefill_from = view.t_prefill if view.t_prefill is not None else first
    spans = [
        (RequestState.QUEUED, start, prefill_from),
        (RequestState.PREFILL, prefill_from, first),
        (RequestState.DECODING, first, now),
    ]
    # A bar from its submit on.
    return [s for s in spans if s[2] > s[1] or s[0] is RequestState.QUEUED]


def lane_rows(
    model: RunModel, ghosts: bool = False
) -> tuple[dict[tuple[int, int | None], int], list[str]]:
    """Row of each (configuration, slot) lane, and the lanes' names, in run order; requests
    no /slots sample caught get an "unmatched" lane of their configuration. With ``ghosts``,
    a configuration that has begun also has a lane for each slot its prediction used."""
    labels = dict(enumerate(label for _, label in model.config_marks))
    slots: dict[int, set[int | None]] = {}
    for view in model.requests.values():
        slots.setdefault(view.config_index, set()).add(view.slot)
    if ghosts and model.prediction is not None:
        for config in model.prediction.configs:
            if config.config_index in slots:
                slots[config.config_index] |= {
                    r.slot for r in config.requests if r.slot is not None
                }
    rows: dict[tuple[int, int | None], int] = {}
    names: list[str] = []
    for config in sorted(slots):
        ids = sorted(s for s in slots[config] if s is not None)
        for slot in [*ids, *([None] if None in slots[config] else [])]:
            rows[(config, slot)] = len(names)
            label = labels.get(config, f"config {config + 1}")
            names.append(f"{label} · slot {slot}" if slot is not None else f"{label} · unmatched")
    return rows, names


def request_tooltip(view: RequestView) -> str:
    def fmt(value: float | None, unit: str, digits: int = 3) -> str:
        return "-" if value is None else f"{value:.{digits}f} {unit}"

    lines = [
        f"request #{view.number} (config {view.config_index + 1}, repeat {view.repeat + 1})",
        f"state: {view.state.label}" + (f"   slot: {view.slot}" if view.slot is not None else ""),
        f"TTFT: {fmt(view.ttft_s, 's')}",
        f"queue wait: {fmt(view.queue_s, 's')}   prefill: {fmt(view.prefill_s, 's')}",
        f"tokens: {view.output_tokens if view.output_tokens is not None else view.chunks}",
        f"decode: {fmt(view.decode_tok_s, 'tok/s', 1)}",
    ]
    if view.t_intended is not None and view.t_submit is not None:
        late_ms = (view.t_submit - view.t_intended) * 1000
        lines.append(f"due at {view.t_intended:.3f} s, sent {late_ms:.1f} ms after")
    if view.conversation_id is not None:
        lines.append(f"conversation {view.conversation_id}, turn {view.turn}")
    if view.cache is not None:
        history = f"history: {view.cache.reprefilled} of {view.cache.seen} tokens re-prefilled"
        lines.append(history + (" (cache lost)" if view.cache.lost else ""))
    if (longest := view.longest_stall) is not None:
        lines.append(f"stalls: {len(view.stalls)}, the longest {longest.words()}")
    if view.error:
        lines.append(f"error: {view.error}")
    return "\n".join(lines)


def steady_spans(model: RunModel) -> list[tuple[float, float]]:
    """Each finished repeat's steady state (the engine's ``steady_state``), in seconds from
    the run's start: the Gantt shades them, so the ramp-up and the drain show outside. A
    burst has none."""
    return [
        (model.seconds(run.steady.steady_start_ns), model.seconds(run.steady.steady_end_ns))
        for summary in model.summaries
        for run in summary.runs
        if run.steady.steady_start_ns is not None and run.steady.steady_end_ns is not None
    ]


Bars = tuple[list[float], list[float], list[int]]  # starts, widths and rows of a bar item


def ghost_bars(model: RunModel, lanes: dict[tuple[int, int | None], int] | None) -> Bars:
    """The prediction's requests as bars behind the measured ones: each repeat's predicted
    times (seconds after its first request was due) from when that measured repeat sent its
    first request, so the two start together and their ends tell the error. In rows per
    request, the k-th predicted request of a repeat in the row of its k-th measured one (in
    the order they were numbered), from sent to done; in ``lanes`` (``lane_rows``' rows), in
    its predicted slot's lane from its first token (a slot's lane shows what the slot did;
    the model does not say when the slot began its prompt). A repeat not begun has none."""
    bars: Bars = ([], [], [])
    if model.prediction is None:
        return bars
    measured: dict[tuple[int, int], list[RequestView]] = {}
    for view in model.requests.values():
        if view.t_submit is not None:
            measured.setdefault((view.config_index, view.repeat), []).append(view)
    for config in model.prediction.configs:
        repeats: dict[int, list[PredictedRequest]] = {}
        for request in config.requests:
            repeats.setdefault(request.repeat, []).append(request)
        for repeat, predicted in repeats.items():
            views = sorted(measured.get((config.config_index, repeat), []), key=lambda v: v.index)
            if not views:
                continue
            sent = min(v.t_submit for v in views if v.t_submit is not None)
            for k, request in enumerate(sorted(predicted, key=lambda r: r.index)):
                if lanes is None:
                    row = views[k].row if k < len(views) else None
                    start = request.sent_s
                else:
                    row = lanes.get((config.config_index, request.slot))
                    start = (
                        request.sent_s if request.first_token_s is None else request.first_token_s
                    )
                if row is None:
                    continue
                bars[0].append(sent + start)
                bars[1].append(max(request.end_s - start, 0.0))
                bars[2].append(row)
    return bars


def stall_bars(views: list[RequestView], rows: dict[int, int]) -> Bars:
    """Each stall's stretch on its stream's row (``rows``: by the view's id)."""
    bars: Bars = ([], [], [])
    for view in views:
        for stall in view.stalls:
            bars[0].append(stall.start)
            bars[1].append(stall.end - stall.start)
            bars[2].append(rows[id(view)])
    return bars


def stall_at(view: RequestView, t: float) -> StallView | None:
    """The stall of ``view``'s stream at time ``t``, if it stood still then."""
    return next((s for s in view.stalls if s.start <= t <= s.end), None)
