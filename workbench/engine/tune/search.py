"""The search a tune makes, within its time budget: the planner removes what does not fit in
memory; the scheduler model ranks what is left on a calibration (stored, or probed while the
budget allows); real short runs verify the best candidates, each one's records refitting its
calibration before the rest are ranked again (where the refit holds for what they ask);
a candidate the model puts within its error of the winner is measured too, and two measured
within a run's error of each other are a tie, which goes to more context per slot; and the
winner's highest Poisson request rate within the SLO is bracketed, a probe stopping early
once it over-saturates.

What measures is a ``Measure`` (the real server's is ``server_measure.ServerMeasure``), so
the search's decisions are tested with a fake one. A figure is never reported as measured
unless a run measured it: a candidate the model said meets the SLO and its run did not is
said so, and the next is tried.
"""

from __future__ import annotations

import math
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import psutil

from workbench.engine.analysis.planner import plan_settings, request_tokens
from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.base.records import RequestRecord
from workbench.engine.base.words import plural
from workbench.engine.config.experiment import RunConfig
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import show_value
from workbench.engine.config.workloads import (
    ConversationsWorkload,
    RequestsWorkload,
    TraceWorkload,
    kind_of,
)
from workbench.engine.interop.trace_file import TracePlan, trace_plans
from workbench.engine.measure.prompts import load_prompts
from workbench.engine.models.gguf_header import loadable_model
from workbench.engine.models.memory import MIB, read_model_facts
from workbench.engine.models.model_file import resolve_model
from workbench.engine.models.sliding_window import DEFAULT_BATCH, DEFAULT_UBATCH, micro_batch
from workbench.engine.predict.calibration import (
    Calibration,
    CalibrationError,
    Coverage,
    coverage,
    fit_costs,
    held_settings,
    kept_measures,
)
from workbench.engine.predict.describe import doubts
from workbench.engine.predict.probe import LIMIT_S, probe_batch
from workbench.engine.predict.sweep import predict_experiment
from workbench.engine.server.discovery import find_server_binary
from workbench.engine.server.llama_server import setting_flags
from workbench.engine.tune.records import (
    RateTried,
    Recommendation,
    SloTarget,
    TraceLoad,
    TriedConfig,
    TuneProgress,
    TuneRequest,
    rounded,
    significant,
)
from workbench.engine.tune.server_measure import (
    FIGURE_KEYS,
    Measured,
    Run,
    ServerMeasure,
    Tick,
    number,
    zipped_experiment,
)
from workbench.engine.tune.slo_targets import meets, misses, worst_ratio
from workbench.engine.tune.space import parse_space
from workbench.engine.tune.verdict import clock

START_S = 8.0  # a server's start and warm-up, until one was timed
ROUGH_STEP_MS = 30.0  # a generating step, before a calibration says
ROUGH_PROMPT_MS = 1.0  # a prompt token, before a calibration says
MIN_PROBE_S = 15.0  # a probe given less measures too little to rank by
PLANNED_RUNS = 2
"""Verification runs a budget is planned to hold at least: the probe leaves room for them,
and a trace window longer than a budget's share for one is refused."""
MAX_VERIFY = 8  # verification runs at most
MAX_HOPELESS = 2  # candidates the model says miss, verified when none is said to meet
RATE_PROBE_S = 15.0  # of arrivals: the over-saturation test needs 12 s of them
MAX_RATE_REQUESTS = 400
MAX_RATE_PROBES = 6
RATE_CLOSE = 1.25  # the rate bracket is narrow enough when its ends are within this ratio
PROGRESS_EVERY_S = 1.0
SHOWN_RUNNERS_UP = 5
RUN_ERROR = 0.10
"""Two verification runs' throughputs closer than this (relative) are a tie: the aggregate
tok/s error the model is held to on a quiet machine (docs/guides/predict.md), chosen rather
than measured as a run's noise; on a loaded machine two runs of one configuration minutes
apart differed far more (5.0 and 13.1 tok/s, np=4 for 4 users on the 2-core test machine)."""
MAX_MODEL_ERROR = 0.5  # beyond this the model ranks nothing: every candidate is worth a run


class TuneError(WorkbenchError):
    """A tune that cannot start: nothing fits, a budget too short, a traffic it cannot send."""


class Measure(Protocol):
    """What the search asks of a server (``ServerMeasure``; a fake one in the tests)."""

    @property
    def session_path(self) -> Path | None: ...

    @property
    def rate_session_path(self) -> Path | None: ...

    def stored(self, settings: ServerSettings) -> Calibration | None: ...

    def probe(
        self, settings: ServerSettings, limit_s: float, tick: Tick
    ) -> tuple[Calibration, list[RequestRecord]]: ...

    def verify(self, run: Run, deadline: float, tick: Tick) -> Measured: ...

    def rate_probe(self, run: Run, deadline: float, tick: Tick) -> Measured: ...


@dataclass
class Candidate:
    """One combination of the space as the search knows it so far."""

    label: str
    settings: dict[str, Any]  # the space's settings, by schema name
    config: RunConfig  # its verification run
    run: Run
    predicted: dict[str, float | None] = field(default_factory=dict)
    predicted_s: float | None = None  # its requests' time, as predicted
    measured: Measured | None = None
    why_lost: str | None = None
    fits: bool = True
    asked: Coverage | None = None  # what its predicted requests ask of the calibration
    predicted_at_once: int | None = None  # a trace's: its requests in flight at peak, predicted

    @property
    def group(self) -> tuple[tuple[str, Any], ...]:
        """Its held settings: the calibration it is predicted with."""
        return tuple(sorted(held_settings(self.config.server).items()))


def server_args(settings: ServerSettings, model: Path) -> list[str]:
    """The llama-server arguments that give these settings, to serve with (host, port and
    the workbench's own logging left to the user); a draft model named as a run names it
    (``default``, or beside the experiment) is given as its file."""
    if settings.draft_model:
        settings = replace(settings, draft_model=str(resolve_model(settings.draft_model)))
    return ["-m", str(model), *setting_flags(settings), *settings.extra_args]


def verification_workload(request: TuneRequest) -> dict[str, Any]:
    """The traffic at ``users`` at once: their requests in flight together, twice over (a
    conversations run holds ``users`` conversations; a trace keeps its own times, and its
    window is the load). Traffic other than a trace without ``users`` is a ``TuneError``."""
    workload = dict(request.traffic)
    kind = kind_of(workload)
    if kind is TraceWorkload:
        return workload
    if request.users is None:
        raise TuneError(
            "a tune needs the users at once (--users or --registered): only a trace (--trace) "
            "is a load of its own"
        )
    if kind is ConversationsWorkload:
        workload["users"] = request.users
    else:
        workload.setdefault("requests", max(8, 2 * request.users))
        workload["concurrency"] = request.users
    return workload


def peak_at_once(spans: Iterable[tuple[float, float]]) -> int:
    """The most spans open at one moment; one that ends as another begins is not counted
    with it."""
    edges = sorted(edge for start, end in spans for edge in ((start, 1), (end, -1)))
    running = peak = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    return peak


def requests_at_once(records: Sequence[RequestRecord]) -> int:
    """The most requests in flight at one moment of a repeat, sent and not yet done (a
    request waiting in the server's queue is in flight), over the repeats; warm-ups left
    out. Measured records or the model's predicted ones, which hold the same stamps."""
    by_repeat: dict[int, list[tuple[float, float]]] = {}
    for r in records:
        if not r.warmup and r.t_submit_ns is not None and r.t_done_ns is not None:
            by_repeat.setdefault(r.repeat, []).append((r.t_submit_ns, r.t_done_ns))
    return max((peak_at_once(spans) for spans in by_repeat.values()), default=0)


def rough_request_s(prompt_tokens: int, answer_tokens: int) -> float:
    """One request alone on the server, before a calibration says (a rough guess)."""
    prompt = request_tokens(prompt_tokens, 0) * ROUGH_PROMPT_MS
    return (prompt + answer_tokens * ROUGH_STEP_MS) / 1000


def rough_at_once(plan: TracePlan) -> int:
    """A trace window's requests in flight at peak if each were served alone at the rough
    speed, from its rows' times (a later turn's after the turn before it) and lengths: the
    estimate where no calibration predicts the window."""
    ends: list[float] = []
    spans = []
    for k, follows in enumerate(plan.follows):
        start = plan.offsets[k] if follows is None else ends[follows[0]] + follows[1]
        ends.append(start + rough_request_s(plan.input_tokens[k], plan.output_tokens[k]))
        spans.append((start, ends[-1]))
    return peak_at_once(spans)


class Search:
    """One tune from plan to recommendation (``run``); every decision is the search's, every
    measurement ``measure``'s."""

    def __init__(
        self,
        request: TuneRequest,
        model: Path,
        binary: str,
        measure: Measure,
        progress: Callable[[TuneProgress], None],
        cancel: threading.Event,
        available_bytes: int | None = None,
    ) -> None:
        self.request = request
        self.slos: tuple[SloTarget, ...] = request.slos
        self.model = model
        self.binary = binary
        self.measure = measure
        self.progress = progress
        self.cancel = cancel
        self.available_bytes = (
            psutil.virtual_memory().available if available_bytes is None else available_bytes
        )
        self.started = time.monotonic()
        self.deadline = self.started + request.budget_s
        self.candidates: list[Candidate] = []
        # a trace's load is its window: its requests at once once estimated, not the users
        traced = kind_of(request.traffic) is TraceWorkload
        self.users = None if traced else request.users
        self.window: TraceWorkload | None = None  # a trace's settings, its window's among them
        self.plan: TracePlan | None = None  # that window, as each run sends it
        self.load: TraceLoad | None = None
        self.calibrations: dict[tuple[tuple[str, Any], ...], Calibration] = {}
        self.fitted: dict[tuple[tuple[str, Any], ...], list[RequestRecord]] = {}
        self.run_times: list[float] = []
        self.hopeless_tried = 0
        self.rates: list[RateTried] = []
        self.train_ctx = 0  # the model's own context, where a candidate sets none
        self._phase, self._text = "plan", "reading the space"
        self._step_ends = self.started
        self._after_step_s = 0.0
        self._last_said = 0.0

    # -- progress -----------------------------------------------------------------------------
    def _left(self) -> float:
        return self.deadline - time.monotonic()

    def _say(self, phase: str, text: str, step_s: float = 0.0, after_s: float = 0.0) -> None:
        """A new step: what it is, how long it should take and what is planned after it."""
        self._phase, self._text = phase, text
        self._step_ends = time.monotonic() + step_s
        self._after_step_s = after_s
        self._tick(force=True)

    def _tick(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_said < PROGRESS_EVERY_S:
            return
        self._last_said = now
        eta = max(0.0, self._step_ends - now) + self._after_step_s
        self.progress(
            TuneProgress(
                self._phase,
                now - self.started,
                self.request.budget_s,
                max(0.0, min(eta, self.deadline - now)),
                self._text,
                tuple(self._tried()),
            )
        )

    # -- the steps ------------------------------------------------------------------------------
    def run(self) -> Recommendation:
        self._say("plan", "the space, and what of it fits in memory")
        self.candidates = self._candidates()
        self._window()
        fitting = self._memory()
        self._check_budget(fitting)
        self._calibrate(fitting)
        self._predict(fitting)
        if self.window is not None and self.plan is not None:
            self._estimate_load(self.window, self.plan, fitting)
        winner = self._verify(fitting)
        rate = self._rate(winner) if winner is not None and not self.cancel.is_set() else None
        return self._recommend(winner, rate)

    def _candidates(self) -> list[Candidate]:
        stalls = any(s.metric == "stall" for s in self.request.slos)
        space = parse_space(self.request.space, self.request.draft_model, stalls)
        workload = verification_workload(self.request)
        chosen = space.candidates()
        named = tuple(f"server.{name}" for name in space.axes)
        runs = [Run({"model": str(self.model), **s}, workload, named) for s in chosen]
        try:
            configs = zipped_experiment("tune", runs).configs()
        except ExperimentError as exc:
            raise TuneError(f"tune: {exc}") from None
        return [Candidate(c.label, s, c, r) for s, c, r in zip(chosen, configs, runs, strict=True)]

    def _window(self) -> None:
        """A trace's window as each run sends it (the space holds server settings only, so
        every candidate sends the same), read and planned before anything starts: a file
        that is not a trace, or a window with no rows, is one line."""
        config = self.candidates[0].config
        if not isinstance(config.workload, TraceWorkload):
            return
        try:
            self.plan = trace_plans([config], None)[config.index]
        except ExperimentError as exc:
            raise TuneError(f"tune: {exc}") from None
        self.window = config.workload

    def _memory(self) -> list[Candidate]:
        """The candidates that fit in memory and whose slots hold a request; the rest say
        why not. Nothing left is a ``TuneError``."""
        facts = read_model_facts(self.model)
        self.train_ctx = facts.train_ctx
        free_mib = self.available_bytes / MIB
        for c in self.candidates:
            s, w = c.config.server, c.config.workload
            need = (
                request_tokens(w.longest_prompt_tokens, w.max_tokens)
                if self.plan is None
                else self.plan.longest_request
            )
            row = plan_settings(facts, s, self.available_bytes, need)
            if row.fit == "does not fit":
                c.fits = False
                c.why_lost = (
                    f"does not fit in memory: {row.total_mib:,.0f} MiB of the "
                    f"{free_mib:,.0f} MiB free"
                )
            elif row.warning.startswith("each request gets"):
                c.fits = False
                c.why_lost = row.warning
        fitting = [c for c in self.candidates if c.fits]
        if not fitting:
            first = self.candidates[0]
            raise TuneError(
                f"nothing in the space fits: {plural(len(self.candidates), 'combination')}, the "
                f"first ({first.label}) {first.why_lost}"
            )
        self._say("plan", f"{len(fitting)} of {len(self.candidates)} fit in memory")
        return fitting

    def _rough_s(self, c: Candidate) -> float:
        """One verification's time before a calibration says: its server's start, then each
        wave of requests the slots serve at once, prompt and answer (a rough guess); a trace
        window's waves take at least as long as its rows take to send."""
        w, slots = c.config.workload, max(1, c.config.server.slots)
        if self.plan is not None:
            plan = self.plan
            one = max(map(rough_request_s, plan.input_tokens, plan.output_tokens))
            waves = math.ceil(len(plan.rows) / slots)
            return START_S + w.warmup * one + w.repeats * max(plan.span_s + one, waves * one)
        assert self.users is not None  # generated traffic has its users (verification_workload)
        waves = math.ceil(w.per_repeat / min(self.users, slots))
        one = rough_request_s(w.longest_prompt_tokens, w.max_tokens)
        return START_S + (waves * w.repeats + w.warmup) * one

    def _run_s(self, c: Candidate) -> float:
        """One verification's time as known best: the runs timed so far, the model's, or
        the rough guess."""
        start = (sum(self.run_times) / len(self.run_times)) if self.run_times else START_S
        if c.predicted_s is not None:
            return max(start, START_S + c.predicted_s)
        return max(start, self._rough_s(c))

    def _check_budget(self, fitting: list[Candidate]) -> None:
        if self.window is not None and self.plan is not None:
            self._check_window(self.window, self.plan)
        least = min(self._rough_s(c) for c in fitting)
        if self.request.budget_s < least:
            raise TuneError(
                f"a budget of {self.request.budget_s:g} s cannot verify one candidate: at least "
                f"~{math.ceil(least)} s (a server's start and one run of the traffic)"
            )

    def _check_window(self, workload: TraceWorkload, plan: TracePlan) -> None:
        """A trace window whose rows take longer to send than a verification run's share of
        the budget (``PLANNED_RUNS`` of them, a server's start each) is refused, saying the
        window or the time scale that would fit."""
        budget = self.request.budget_s
        share = budget / PLANNED_RUNS
        sending = plan.span_s * workload.repeats
        if START_S + sending <= share:
            return
        room = (share - START_S) / workload.repeats  # a repeat's sending, at most
        recorded = plan.span_s * workload.time_scale  # the window's span as recorded
        fits = (
            f"--trace-duration {math.floor(room * workload.time_scale)}s or less, "
            f"--time-scale {_at_least(recorded / room):g} or more, or "
            if room >= 1
            else ""
        )
        raise TuneError(
            f"the trace window's rows take {clock(sending)} to send at time scale "
            f"{workload.time_scale:g}, more than a verification run's share of the "
            f"{clock(budget)} budget ({clock(share)}, less {START_S:g} s for its server's start: "
            f"a tune plans {PLANNED_RUNS} runs at least): give {fits}a larger --budget"
        )

    def _calibrate(self, fitting: list[Candidate]) -> None:
        """A stored calibration for each held-settings group; the largest group probed when
        it has none and the budget leaves room for the probe and two runs after it (stored
        for the next tune, as ``workbench calibrate`` stores one)."""
        groups: dict[tuple[tuple[str, Any], ...], list[Candidate]] = {}
        for c in fitting:
            groups.setdefault(c.group, []).append(c)
        for key, members in groups.items():
            stored = self.measure.stored(members[0].config.server)
            if stored is not None:
                self.calibrations[key] = stored
        main = max(groups, key=lambda k: len(groups[k]))
        if main in self.calibrations or self.cancel.is_set():
            return
        # The probe only ranks: it gets at most half of what the planned runs leave.
        reserve = PLANNED_RUNS * min(self._rough_s(c) for c in fitting)
        limit = min(LIMIT_S, (self._left() - reserve) / 2 - START_S)
        held = ", ".join(f"{k}={show_value(v)}" for k, v in main if v is not None) or "defaults"
        if limit < MIN_PROBE_S:
            self._say("calibrate", "no time to calibrate: candidates ranked by measurement only")
            return
        self._say(
            "calibrate",
            f"calibrating ({held}): at most {limit:.0f} s of the real server",
            limit + START_S,
            reserve,
        )
        try:
            calibration, records = self.measure.probe(
                groups[main][0].config.server, limit, self._tick
            )
        except WorkbenchError as exc:
            if self.cancel.is_set():
                return
            self._say("calibrate", f"the probe failed ({exc}): ranked by measurement only")
            return
        self.calibrations[main] = calibration
        self.fitted[main] = list(records)

    def _predict(self, members: list[Candidate]) -> None:
        """Each member of a calibrated group through the scheduler model."""
        by_group: dict[tuple[tuple[str, Any], ...], list[Candidate]] = {}
        for c in members:
            calibration = self.calibrations.get(c.group)
            # a calibration that did not measure the micro-batch holds at its own -ub alone
            ubatch = c.config.server.ubatch_size or DEFAULT_UBATCH
            if calibration and calibration.costs.holds_at(ubatch) and c.measured is None:
                by_group.setdefault(c.group, []).append(c)
        for key, group in by_group.items():
            calibration = self.calibrations[key]
            experiment = zipped_experiment("tune", [c.run for c in group])
            prompts = load_prompts(group[0].config.workload.prompts)
            try:
                predicted = predict_experiment(
                    experiment,
                    calibration.costs,
                    prompts,
                    calibration.template_tokens or 0,
                    chat=calibration.chat,
                )
            except WorkbenchError as exc:  # what the model does not predict: measured only
                self._say("rank", f"not predicted ({exc}): ranked by measurement only")
                continue
            for c, p in zip(group, predicted, strict=True):
                # requests sent together may start in one step or apart (a race of the
                # server's first milliseconds): the reading nearer to missing the SLO
                readings = [p.summary] + ([p.staggered] if p.staggered is not None else [])
                c.predicted = max(
                    ({k: number(s.value(k)) for k in FIGURE_KEYS} for s in readings),
                    key=lambda figures: worst_ratio(self.slos, figures),
                )
                c.predicted_s = p.requests_s
                c.asked = coverage(p.records)
                if self.plan is not None:
                    c.predicted_at_once = requests_at_once(p.records)
        ranked = sum(1 for c in members if c.predicted and c.measured is None)
        if ranked:
            self._say("rank", f"{plural(ranked, 'candidate')} ranked by the scheduler model")

    def _estimate_load(
        self, workload: TraceWorkload, plan: TracePlan, fitting: list[Candidate]
    ) -> None:
        """A trace window's requests at once at peak, before any run: as the scheduler model
        predicts the window at the most slots it predicted (the fewest kept waiting for
        one), else at the rough speed, each request alone. The search centres the slots of
        candidates it cannot predict on it."""
        predicted = [c for c in fitting if c.predicted_at_once is not None]
        if predicted:
            most = max(predicted, key=lambda c: c.config.server.slots)
            assert most.predicted_at_once is not None
            estimated = most.predicted_at_once
            source = (
                f"its arrivals and lengths by the scheduler model at {most.label}, the most "
                "slots it predicted"
            )
        else:
            estimated = rough_at_once(plan)
            source = (
                f"its arrivals and lengths, each request alone at a rough {ROUGH_PROMPT_MS:g} ms "
                f"a prompt token and {ROUGH_STEP_MS:g} ms a generated one: no calibration "
                "predicts it"
            )
        self.users = max(1, estimated)
        self.load = TraceLoad(
            plan.name,
            len(plan.rows),
            workload.trace_start_s,
            workload.trace_duration_s,
            workload.time_scale,
            plan.span_s,
            estimated,
            source,
        )
        self._say("rank", self.load.peak_said())

    def _queue(self, fitting: list[Candidate], best: Candidate | None) -> list[Candidate]:
        """What to verify next, best first: those the model says meet the SLO by their
        predicted throughput, one of each held-settings group the model cannot predict
        (those are ranked by measurement), the rest not predicted, and, when nothing is
        said to meet, the few that come closest."""
        left = [c for c in fitting if c.measured is None]
        said_meet = sorted(
            (c for c in left if c.predicted and meets(self.slos, c.predicted)),
            key=lambda c: -(c.predicted.get("agg_tok_s") or 0),
        )
        users = self.users or 1  # a trace's is its window's estimate, made before any run
        unpredicted = sorted(
            (c for c in left if not c.predicted),
            key=lambda c: abs(math.log(max(1, c.config.server.slots) / users)),
        )
        seen: set[tuple[tuple[str, Any], ...]] = set()
        firsts = []
        for c in unpredicted:
            if c.group not in seen:
                seen.add(c.group)
                firsts.append(c)
        rest = [c for c in unpredicted if c not in firsts]
        said_miss = sorted(
            (c for c in left if c.predicted and not meets(self.slos, c.predicted)),
            key=lambda c: worst_ratio(self.slos, c.predicted),
        )
        hopeless = said_miss[: max(0, MAX_HOPELESS - self.hopeless_tried)] if not said_meet else []
        queue = [*said_meet[:1], *firsts, *said_meet[1:], *rest, *hopeless]
        if best is None or best.measured is None:
            return queue
        # With a winner measured, what might beat or tie it is worth a run: a prediction
        # within the model's error of the winner's measured figure cannot be told from it.
        bar = _agg(best.measured.figures) * (1 - self.model_error())
        return [c for c in queue if not c.predicted or _agg(c.predicted) > bar]

    def model_error(self) -> float:
        """How far a predicted throughput may be from what a run measures: the larger of a
        run's own error (``RUN_ERROR``), the calibrations' held-back error and what this
        tune's runs showed of the model's predictions, at most ``MAX_MODEL_ERROR``."""
        found = [RUN_ERROR]
        found += [
            q.held_back_decode_median_error
            for q in (c.quality for c in self.calibrations.values())
            if q.held_back_decode_median_error is not None
        ]
        for c in self.candidates:
            if c.measured is not None and not c.measured.failed and c.predicted:
                measured, predicted = _agg(c.measured.figures), _agg(c.predicted)
                if measured > 0:
                    found.append(abs(predicted - measured) / measured)
        return min(MAX_MODEL_ERROR, max(found))

    def context_per_slot(self, c: Candidate) -> int:
        """The context one request can use: the whole pool with ``-kvu`` (at most
        ``kv_unified_per_slot`` of it where that is set), else its share."""
        server = c.config.server
        if server.kv_unified_per_slot is not None:
            return server.kv_unified_per_slot
        ctx = server.ctx or self.train_ctx
        return ctx if server.kv_unified else ctx // max(1, server.slots)

    def _pick(self, met: list[Candidate]) -> Candidate:
        """Of the measured candidates that met the SLO, those within a run's error
        (``RUN_ERROR``) of the highest throughput tie; a tie goes to more context per slot
        (fewer slots, unless the KV pool is unified), then to the higher throughput."""
        top = max(_agg(c.measured.figures) for c in met if c.measured is not None)
        tied = [c for c in met if c.measured and _agg(c.measured.figures) >= top * (1 - RUN_ERROR)]
        return max(tied, key=lambda c: (self.context_per_slot(c), _agg(c.measured.figures)))  # type: ignore[union-attr]

    def _verify(self, fitting: list[Candidate]) -> Candidate | None:
        runs = 0
        best: Candidate | None = None
        met: list[Candidate] = []
        while runs < MAX_VERIFY and not self.cancel.is_set():
            queue = self._queue(fitting, best)
            if not queue:
                break
            c = queue[0]
            need = self._run_s(c)
            # A first run goes whatever its estimate: the budget has nothing better to do.
            if need > self._left() and (runs or self._left() < START_S):
                self._say("verify", f"the budget has no room for another run (~{need:.0f} s)")
                break
            runs += 1
            if c.predicted and not meets(self.slos, c.predicted):
                self.hopeless_tried += 1
            said = (
                "predicted to meet the SLO"
                if c.predicted and meets(self.slos, c.predicted)
                else ("predicted to miss" if c.predicted else "not predicted")
            )
            self._say("verify", f"verifying {c.label} ({said})", need, need * (len(queue) - 1))
            c.measured = self.measure.verify(c.run, self.deadline, self._tick)
            self.run_times.append(c.measured.seconds)
            c.why_lost = self._judged(c)
            if c.why_lost is None:
                met.append(c)
                best = self._pick(met)
            self._refit(c, fitting)
        return best

    def _judged(self, c: Candidate) -> str | None:
        """Why a measured candidate cannot be the winner, or None if it met every SLO."""
        assert c.measured is not None
        if c.measured.failed:
            return c.measured.failed
        missed = misses(self.slos, c.measured.figures)
        if not missed and not c.measured.figures.get("failed"):
            self._say("verify", f"{c.label}: measured, meets the SLO")
            return None
        why = "measured " + "; ".join(
            missed or [f"{c.measured.figures['failed']:.0f} requests failed"]
        )
        if c.predicted and meets(self.slos, c.predicted):
            why += " (the model predicted it would meet)"
            self._say("verify", f"{c.label}: the model said it meets the SLO, but {why}: next")
        return why

    def _refit(self, c: Candidate, fitting: list[Candidate]) -> None:
        """The run's records added to its group's calibration, refitted, and the group's
        candidates not yet measured predicted again. A run at another ``-b`` or ``-ub``
        than the probe's is not: its steps took other chunks or micro-batches."""
        if c.group not in self.calibrations or c.measured is None or not c.measured.records:
            return
        server, probed = c.config.server, self.calibrations[c.group].costs
        batch = probe_batch(server)
        if (server.batch_size or DEFAULT_BATCH) != batch or (
            micro_batch(server.batch_size, server.ubatch_size) != probed.ubatch_size
        ):
            return
        records = self.fitted.setdefault(c.group, [])
        records += c.measured.records
        try:
            fit = fit_costs(records, batch, probed.ubatch_size)
        except CalibrationError:
            return
        refitted = replace(
            self.calibrations[c.group],
            costs=kept_measures(fit.costs, probed),
            quality=fit.quality,
            coverage=fit.coverage,
            source="refitted by the tune",
        )
        rest = [m for m in fitting if m.group == c.group and m.measured is None]
        asked = [m.asked for m in rest if m.asked is not None]
        wanted = (
            Coverage(*(max(getattr(a, f) for a in asked) for f in Coverage.__dataclass_fields__))
            if asked
            else None
        )
        doubted = doubts(refitted, wanted)
        if doubted:  # a few runs of one shape must not replace a calibration that spans more
            self._say("rank", f"not refitted: {doubted[0].why}")
            return
        self.calibrations[c.group] = refitted
        self._predict(rest)

    def _own_times(self) -> bool:
        """Whether the traffic keeps its own times and order (a trace, conversations)."""
        return kind_of(verification_workload(self.request)) is not RequestsWorkload

    def _rate(self, winner: Candidate) -> float | None:
        """The highest Poisson rate the winner holds within the SLO, bracketed: doubled from
        the rate it served at ``users`` until a probe misses, halved until one meets, then
        halved between while the budget allows. A trace's rows and a conversations file's
        turns keep their own times and order: no Poisson rate is searched for them."""
        assert winner.measured is not None
        if self._own_times():
            self._say("rate", "no rate search: a trace or conversations keep their own times")
            return None
        figures = winner.measured.figures
        served, span = figures.get("requests"), figures.get("makespan_s")
        if not served or not span:
            return None
        rate = served / span
        low: float | None = None
        high: float | None = None
        for _ in range(MAX_RATE_PROBES):
            if self.cancel.is_set():
                break
            rate = significant(rate)  # a rate to 3 significant figures, as it is said
            requests = min(
                MAX_RATE_REQUESTS, max(8, self.users or 1, math.ceil(rate * RATE_PROBE_S))
            )
            need = START_S + requests / rate + (self.run_times[-1] if self.run_times else 0)
            if need > self._left():
                said = f"no room in the budget for a rate probe at {rounded(rate)} req/s"
                self._say("rate", said)
                break
            left = MAX_RATE_PROBES - len(self.rates) - 1
            said = f"{winner.label} at {rounded(rate)} req/s (Poisson)"
            self._say("rate", said, need, need * left)
            workload = {
                **winner.run.workload,
                "arrival": "poisson",
                "rate": significant(rate),
                "requests": requests,
                "concurrency": 0,
                "stop_when_saturated": True,
            }
            measured = self.measure.rate_probe(
                Run(winner.run.server, workload, ("workload.rate",)), self.deadline, self._tick
            )
            why = measured.failed or measured.saturated
            if why is None:
                missed = misses(self.slos, measured.figures)
                why = "; ".join(missed) if missed else None
            self.rates.append(RateTried(significant(rate), why is None, why))
            if why is None:
                low = rate
            else:
                high = rate
            if high is None:
                rate *= 2
            elif low is None:
                rate /= 2
            elif high / low <= RATE_CLOSE:
                break
            else:
                rate = math.sqrt(low * high)
        return None if low is None else significant(low)

    # -- the answer --------------------------------------------------------------------------
    def _tried_config(self, c: Candidate) -> TriedConfig:
        measured = None if c.measured is None or c.measured.failed else dict(c.measured.figures)
        known = measured if measured is not None else c.predicted
        return TriedConfig(
            c.label,
            dict(c.settings),
            tuple(server_args(c.config.server, self.model)),
            dict(c.predicted),
            measured,
            bool(known) and meets(self.slos, known),
            c.why_lost,
            c.fits,
        )

    def _tried(self) -> list[TriedConfig]:
        return [
            self._tried_config(c) for c in self.candidates if c.fits and (c.predicted or c.measured)
        ]

    def _recommend(self, winner: Candidate | None, rate: float | None) -> Recommendation:
        for c in self.candidates:
            if c is not winner and c.why_lost is None:
                c.why_lost = self._why_not_run(c, winner)
        tried = [self._tried_config(c) for c in self.candidates]
        chosen = None if winner is None else tried[self.candidates.index(winner)]
        others = [
            t for t, c in zip(tried, self.candidates, strict=True) if c is not winner and c.fits
        ]
        others.sort(
            key=lambda t: (t.source != "measured", not t.meets_slo, -(t.figure("agg_tok_s") or 0))
        )
        reason = self._reason(winner)
        command = None if chosen is None else shlex.join([self.binary, *chosen.llama_server_args])
        self._say("done", reason or f"{chosen.label if chosen else ''}: verified")
        load, users = self.load, self.users
        if load is not None:  # a trace's users: its winner's requests at once, as measured
            users = None
            if winner is not None and winner.measured is not None:
                users = requests_at_once(winner.measured.records)
                load = replace(load, measured=users)
        return Recommendation(
            self.slos,
            chosen,
            winner is not None,
            users if winner is not None else None,
            rate,
            tuple(others[:SHOWN_RUNNERS_UP]),
            tuple(tried),
            command,
            self.measure.session_path,
            reason,
            time.monotonic() - self.started,
            tuple(self.rates),
            self.measure.rate_session_path,
            self._own_times(),
            load,
        )

    def _why_not_run(self, c: Candidate, winner: Candidate | None) -> str:
        """Why ``c`` is not the recommendation, a measured figure set against a measured
        one, and a predicted one against a measured one only with the model's error said."""
        won = None if winner is None or winner.measured is None else winner.measured.figures
        win_agg = None if won is None else _agg(won)
        if c.measured is not None:
            agg = _agg(c.measured.figures)
            if winner is not None and win_agg is not None and agg >= win_agg * (1 - RUN_ERROR):
                return (
                    f"measured {rounded(agg)} tok/s, within the {RUN_ERROR:.0%} a run can tell "
                    f"of the winner's measured {rounded(win_agg)}: a tie, which goes to more "
                    f"context per slot ({self.context_per_slot(winner):,} tokens against "
                    f"{self.context_per_slot(c):,})"
                )
            below = rounded(win_agg or 0)
            return f"measured {rounded(agg)} tok/s, below the winner's measured {below}"
        if c.predicted:
            agg = _agg(c.predicted)
            if not meets(self.slos, c.predicted):
                return "predicted to miss: " + "; ".join(misses(self.slos, c.predicted))
            if win_agg is None:
                return "predicted to meet the SLO, not verified within the budget"
            error = self.model_error()
            said = (
                f"predicted {rounded(agg)} tok/s by the model (its error here ±{error:.0%}) "
                f"against the winner's measured {rounded(win_agg)}"
            )
            if agg <= win_agg * (1 - error):
                return f"{said}: below it by more than that error, not run"
            return f"{said}: it might beat or tie the winner, not verified within the budget"
        return "not predicted (no calibration for its settings) and not verified within the budget"

    def _reason(self, winner: Candidate | None) -> str | None:
        if winner is not None:
            return None
        measured = [c for c in self.candidates if c.measured is not None and not c.measured.failed]
        if self.cancel.is_set():
            return f"cancelled after {plural(len(measured), 'verification run')}"
        if not measured:
            failed = [
                c.measured.failed for c in self.candidates if c.measured and c.measured.failed
            ]
            if failed:
                return f"no candidate was measured: {failed[0]}"
            return (
                f"the budget of {self.request.budget_s:g} s ran out before a candidate was verified"
            )
        closest = min(measured, key=lambda c: worst_ratio(self.slos, c.measured.figures))  # type: ignore[union-attr]
        assert closest.measured is not None
        missed = "; ".join(misses(self.slos, closest.measured.figures)) or "requests failed"
        return f"no candidate met the SLO: the closest, {closest.label}, measured {missed}"


def tune(
    request: TuneRequest, progress: Callable[[TuneProgress], None], cancel: threading.Event
) -> Recommendation:
    """The tune ``request`` asks for, on the real server: blocking (run it off a window's
    thread), ``progress`` told at least every second, back soon after ``cancel`` is set
    with every server it started stopped. A ``WorkbenchError`` says why it cannot start."""
    model = loadable_model(request.model or "default")
    if request.draft_model:
        try:
            draft = loadable_model(request.draft_model)
        except WorkbenchError as exc:
            raise TuneError(f"--draft-model: {exc}") from None
        request = replace(request, draft_model=str(draft))
    binary = find_server_binary(request.server_bin).path
    measure = ServerMeasure(binary, model, request.out_dir, request.server_bin, cancel)
    return Search(request, model, binary, measure, progress, cancel).run()


def _at_least(value: float, digits: int = 2) -> float:
    """``value`` rounded up to ``digits`` significant figures (1.54 is 1.6): a time scale
    said to be enough is."""
    shift = digits - 1 - math.floor(math.log10(value))
    return math.ceil(value * 10**shift) / 10**shift


def _agg(figures: dict[str, float | None]) -> float:
    """A candidate's aggregate tok/s, 0 where it has none."""
    return figures.get("agg_tok_s") or 0.0
