"""The presentation caption: one line, in words an audience reads at a glance, saying what
the configuration on screen is doing now (no Qt: the wording is unit-tested alone)."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.engine.base.states import RequestState, RunStatus
from workbench.engine.base.words import plural
from workbench.engine.predict.run_prediction import NO_CALIBRATION as LACKS
from workbench.ui.run_model import RunModel


@dataclass(frozen=True)
class Phase:
    """How the requests of the configuration shown stand: the counts a caption is made of."""

    label: str = ""  # the configuration's label ("np=4"); "" before any
    slots: int | None = None  # as its server reported them (None: not known yet)
    queued: int = 0
    prefill: int = 0
    decoding: int = 0
    done: int = 0
    failed: int = 0
    cancelled: int = 0  # cut short or left unsent by a stop: the user's doing, not a failure
    span_s: float | None = None  # first request sent to last one over, once all are over
    status: RunStatus | None = None  # the run's (or the replayed session's): RunModel.status
    starting: bool = False  # its server is being started: its requests are not sent yet

    @property
    def requests(self) -> int:
        return self.queued + self.prefill + self.decoding + self.done + self.unanswered

    @property
    def unanswered(self) -> int:
        return self.failed + self.cancelled


def phase_of(model: RunModel) -> Phase:
    """The phase of the configuration the stream grid shows (the one running, or the last)."""
    views = model.current_requests()
    shown = views[0].config_index if views else -1
    server = model.server
    if server.config_index > shown:  # the next configuration started: no request sent yet
        return Phase(server.label, server.slots, status=model.status, starting=True)
    counts = {state.value: sum(v.state is state for v in views) for state in RequestState}
    span = None
    if views and all(v.state.finished for v in views):
        starts = [v.t_submit for v in views if v.t_submit is not None]
        ends = [v.t_done for v in views if v.t_done is not None]
        span = max(ends) - min(starts) if starts and ends else None
    slots = server.slots if server.config_index == shown else None
    return Phase(server.label, slots, span_s=span, status=model.status, **counts)


def caption(phase: Phase) -> str:
    """E.g. "8 requests, 1 slot: 1 decoding, 7 waiting", "4 slots: all 8 answered in 6.9 s"."""
    n = phase.requests
    if phase.starting:
        with_slots = f" with {plural(phase.slots, 'slot')}" if phase.slots else ""
        return f"{phase.label}: starting the server{with_slots}"
    if n == 0:
        return "Starting…" if phase.status == RunStatus.RUNNING else "Ready to run"
    who = plural(phase.slots, "slot") if phase.slots else phase.label
    unfinished = phase.queued + phase.prefill + phase.decoding
    if unfinished == 0:
        return f"{who}: {_outcome(phase)}" if who else _outcome(phase)
    if phase.status != RunStatus.RUNNING:  # stopped (or failed) with requests still out
        return f"Stopped: {phase.done} of {n} answered"
    parts = []
    if phase.decoding:
        together = " together" if phase.decoding > 1 else ""
        parts.append(f"{phase.decoding} decoding{together}")
    if phase.prefill:
        parts.append(f"{phase.prefill} in prefill")
    if phase.queued:
        parts.append(f"all {n} waiting" if phase.queued == n else f"{phase.queued} waiting")
    if phase.done:
        parts.append(f"{phase.done} answered")
    parts += _cut(phase)
    head = f"{plural(n, 'request')}, {who}" if phase.slots else plural(n, "request")
    return f"{head}: {', '.join(parts)}"


def _outcome(phase: Phase) -> str:
    """How a configuration whose requests are all over ended."""
    n, took = phase.requests, f" in {phase.span_s:.1f} s" if phase.span_s is not None else ""
    if phase.unanswered == 0:
        return f"the request answered{took}" if n == 1 else f"all {n} answered{took}"
    if phase.done == 0 and not (phase.failed and phase.cancelled):
        how = "failed" if phase.failed else "cancelled"
        return f"the request {how}" if n == 1 else f"all {n} {how}"
    return f"{phase.done} of {n} answered{took}, {', '.join(_cut(phase))}"


def _cut(phase: Phase) -> list[str]:
    """The requests that ended without an answer, failed apart from cancelled."""
    counts = ((phase.failed, "failed"), (phase.cancelled, "cancelled"))
    return [f"{count} {how}" for count, how in counts if count]


CALIBRATE = "(Calibrate, Server tab)"
NO_CALIBRATION = f"this machine has no calibration for these settings {CALIBRATE}"


def prediction_line(model: RunModel, live: bool = True) -> str:
    """What the line above the Gantt says of the run's prediction: ``Predicted: ...`` (its
    headline) once it came; while a ``live`` run goes without one, why there is none (the
    first configuration's reason, and how many more: a sweep's are often one reason each);
    else nothing (a session replayed, stored before predictions were)."""
    prediction = model.prediction
    if prediction is not None and prediction.configs:
        return f"Predicted: {prediction.headline()}"
    if model.status is not RunStatus.RUNNING or not live:
        return ""
    if prediction is not None and prediction.left_out:
        reasons = prediction.left_out
        more = (
            f" (and {plural(len(reasons) - 1, 'configuration')} more)" if len(reasons) > 1 else ""
        )
        lacking = any(LACKS in reason for reason in reasons)
        return f"No prediction: {reasons[0]}{more}" + (f" {CALIBRATE}" if lacking else "")
    if prediction is None and not model.config_marks:  # it comes before the first configuration
        return ""
    if model.mode == "external":
        return "No prediction: the server was started elsewhere, its costs not calibrated here"
    return f"No prediction: {NO_CALIBRATION}"
