"""An experiment's configurations predicted: the requests each would send, run through the
scheduler model on a calibrated machine's costs, and summarised by the same path as a
measured run, so a prediction has every figure and column a measured run has.

Nothing here measures: the costs come from a calibration, the requests from the experiment,
and every number from the model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.base.records import RequestRecord, StartupFacts
from workbench.engine.config.experiment import Experiment, RunConfig, WorkloadSettings
from workbench.engine.config.workloads import ConversationsWorkload, RequestsWorkload
from workbench.engine.figures.metrics import figure
from workbench.engine.figures.per_request import server_ms
from workbench.engine.figures.summaries import ConfigSummary, summarize
from workbench.engine.figures.wording import machine_mark
from workbench.engine.measure.prompts import PromptSource
from workbench.engine.measure.sized_prompts import input_lengths
from workbench.engine.measure.workload import arrival_offsets
from workbench.engine.models.gguf_tokenizer import estimator_for
from workbench.engine.models.memory import read_model_facts
from workbench.engine.models.model_file import resolve_model
from workbench.engine.models.sliding_window import DEFAULT_BATCH, micro_batch
from workbench.engine.predict.calibration import ChatTokens
from workbench.engine.predict.costs import StepCosts
from workbench.engine.predict.scheduler_model import (
    Request,
    ServerShape,
    predict,
    predicted_records,
)
from workbench.engine.predict.traffic import Traffic, config_traffic

SHARED_PREFIX = "shared prefix"
COMPARED = ("ttft_p50_s", "ttft_p90_s", "e2e_p50_s", "decode_tok_s", "agg_tok_s")
"""The figures a prediction is judged on against a measured run."""
RACE_S = 1e-6
"""How far behind the first a request due at the same instant reaches the server's loop in
the staggered reading of a race (``staggered``)."""
RACE_DIFFERS = 0.25
"""A figure that moves by more than this share between the race's two readings is said."""


def prediction_error(predicted: ConfigSummary, measured: ConfigSummary, key: str) -> float | None:
    """(predicted - measured) / measured of one figure; None where either has none."""
    guess, seen = predicted.value(key), measured.value(key)
    if not isinstance(guess, int | float) or not isinstance(seen, int | float) or not seen:
        return None
    return (guess - seen) / seen


def against_header() -> list[str]:
    """The columns of a prediction against what was measured: the configuration, then each
    compared figure (``against_rows``)."""
    return ["config", *(figure(key).header for key in COMPARED)]


def against_rows(predicted: list[ConfigSummary], measured: list[ConfigSummary]) -> list[list[str]]:
    """Each configuration both have (by its place in the sweep): its label, then each
    compared figure as ``predicted / measured (error)``, the terminal's and the report's."""
    figures = [figure(key) for key in COMPARED]
    seen = {s.index: s for s in measured}
    rows = []
    for p in predicted:
        m = seen.get(p.index)
        if m is None:
            continue
        cells = []
        for f in figures:
            error = prediction_error(p, m, f.key)
            shown = f"{f.cell(p)} / {f.cell(m)}"
            cells.append(shown if error is None else f"{shown} ({error:+.0%})")
        mark = machine_mark(m)  # a busy machine, not the model, may explain the error
        rows.append([p.label + (f" ({mark} when measured)" if mark else ""), *cells])
    return rows


@dataclass(frozen=True)
class PredictedConfig:
    """One configuration as the model sees it: its summary (every figure a measured run's
    summary has), its predicted records, and how long its requests would take, repeats and
    warm-ups together (the server's start not counted)."""

    config: RunConfig
    summary: ConfigSummary
    records: list[RequestRecord]
    requests_s: float
    # were the requests due together to reach the server one after another (``staggered``);
    # None where no two are due together
    staggered: ConfigSummary | None = None


def _not_modelled(config: RunConfig) -> str | None:
    if isinstance(config.workload, ConversationsWorkload) and config.server.cache_ram_mib != 0:
        return "conversations beside the RAM prompt cache (cache_ram_mib other than 0)"
    if config.server.draft_model:
        return "speculative decoding (a draft_model)"
    return None


def prompt_lengths(
    workload: WorkloadSettings,
    first_index: int,
    count: int,
    prompts: PromptSource,
    count_tokens: Callable[[str], int] | None,
    template_tokens: int,
) -> list[int]:
    """Each request's prompt length: ``input_tokens`` as the run would size it (exact, the
    chat template included), or the prompt as written counted with the model's own
    vocabulary plus the chat template's tokens (an estimate: the server's tokenizer counts
    the run's)."""
    if isinstance(workload, RequestsWorkload) and workload.input_tokens:
        return input_lengths(workload, count)
    assert count_tokens is not None, "prompts as written are counted with a vocabulary"
    template = template_tokens if workload.endpoint == "chat" else 0
    return [count_tokens(prompts.get(first_index + k)) + template for k in range(count)]


def _requests(
    workload: WorkloadSettings, lengths: list[int], offsets: list[float]
) -> list[Request]:
    shared = workload.shared_prefix_tokens if isinstance(workload, RequestsWorkload) else 0
    return [
        Request(
            due_s=due,
            prompt_tokens=length,
            max_tokens=workload.max_tokens,
            prefix=SHARED_PREFIX if shared else None,
            shared_tokens=min(shared, length),
            cache_prompt=workload.cache_prompt,
        )
        for due, length in zip(offsets, lengths, strict=True)
    ]


def predict_config(
    config: RunConfig,
    costs: StepCosts,
    lengths: list[int],
    traffic: list[Traffic] | None = None,
    train_ctx: int = 0,
) -> PredictedConfig:
    """``config``'s warm-ups (one at a time, as a run sends them) and each repeat, with
    ``lengths`` the prompt lengths of its warm-ups then its repeats' requests, in the order
    a run numbers them, or each repeat's ``traffic`` (a trace's, conversations'). Each
    repeat starts on the server the warm-ups (and the repeats before it) left: with
    ``cache_prompt``, its slots still hold their last prompts. ``train_ctx``: the model's
    training context, where the server caps a slot (0: not known)."""
    workload = config.workload
    shape = ServerShape.of(config.server, train_ctx)
    warm = workload.warmup
    per_repeat = workload.per_repeat
    plan: list[tuple[int, Traffic]] = []
    if warm:
        sequential = workload.one_at_a_time()
        plan.append((-1, Traffic(_requests(sequential, lengths[:warm], [0.0] * warm), 1)))
    for repeat in range(workload.repeats):
        if traffic is not None:
            plan.append((repeat, traffic[repeat]))
            continue
        start = warm + repeat * per_repeat
        offsets = arrival_offsets(workload, per_repeat, workload.seed + repeat)
        requests = _requests(workload, lengths[start : start + per_repeat], offsets)
        plan.append((repeat, Traffic(requests, workload.effective_concurrency)))
    summary, records, requests_s = _predicted(config, shape, costs, plan)
    raced = [
        (repeat, t if t.concurrency == 1 else replace(t, requests=staggered(t.requests)))
        for repeat, t in plan
    ]
    apart = None
    if any(a.requests != b.requests for (_, a), (_, b) in zip(plan, raced, strict=True)):
        apart = _predicted(config, shape, costs, raced)[0]
    return PredictedConfig(config, summary, records, requests_s, apart)


def _predicted(
    config: RunConfig, shape: ServerShape, costs: StepCosts, plan: list[tuple[int, Traffic]]
) -> tuple[ConfigSummary, list[RequestRecord], float]:
    """Each repeat's traffic (-1: the warm-ups) through the model, summarised."""
    records: list[RequestRecord] = []
    requests_s = 0.0
    for repeat, sent in plan:
        predicted = predict(sent.requests, shape, costs, sent.concurrency, sent.users)
        made = predicted_records(predicted, config.index, repeat)
        sent.mark(made)
        for record in made:
            record.warmup = repeat < 0
        records += made
        requests_s += max((p.done_s for p in predicted), default=0.0)
    facts = StartupFacts(
        n_slots=shape.slots, n_ctx_slot=shape.ctx_per_slot, n_ctx=config.server.ctx
    )
    summary = summarize(
        config.index, config.label, config.server, config.workload, facts, records,
        slots=shape.slots,
    )  # fmt: skip
    return summary, records, requests_s


def staggered(requests: list[Request]) -> list[Request]:
    """``requests`` with each one due at the same instant as an earlier one reaching the
    server a moment after it: after the loop began a step with the first, before that step
    ends. Whether the real server's first step takes requests sent together is a race of
    its first milliseconds (a burst of 768-token prompts at two slots: both in one step in
    some runs, the first alone in others, decode 35 or 8 tok/s)."""
    seen: set[float] = set()
    out = []
    for request in requests:
        late = request.due_s in seen and request.after is None
        seen.add(request.due_s)
        out.append(replace(request, due_s=request.due_s + RACE_S) if late else request)
    return out


def started_together(records: Sequence[RequestRecord]) -> bool | None:
    """Which reading of the race a measured run took: True where, in every repeat, the
    first two requests to answer of those due at its first instant answered in the same
    step (their first tokens closer than a tenth of the first one's ``prompt_ms``), False
    where in every repeat they did not; None where no two were due together, the server
    gave no timings, or the repeats differ."""
    readings = set()
    for repeat in {r.repeat for r in records if not r.warmup}:
        sent = [r for r in records if r.repeat == repeat and not r.warmup and r.ok]
        first_due = min(
            (r.t_intended_ns for r in sent if r.t_intended_ns is not None), default=None
        )
        tied = sorted(
            (r for r in sent if r.t_intended_ns == first_due and r.t_first_token_ns is not None),
            key=lambda r: r.t_first_token_ns or 0,
        )
        prompt_ms = server_ms((tied[0].timings or {}).get("prompt_ms")) if tied else None
        if len(tied) < 2 or prompt_ms is None:
            return None
        gap_ms = ((tied[1].t_first_token_ns or 0) - (tied[0].t_first_token_ns or 0)) / 1e6
        readings.add(gap_ms < prompt_ms / 10)
    return readings.pop() if len(readings) == 1 else None


def race_note(predicted: PredictedConfig, differ: float = RACE_DIFFERS) -> str | None:
    """What the race of requests sent together changes in ``predicted``'s figures, where
    one of COMPARED differs by more than ``differ`` between the two readings; else None."""
    apart = predicted.staggered
    if apart is None:
        return None
    moved = []
    for key in COMPARED:
        together, late = predicted.summary.value(key), apart.value(key)
        if together is None or late is None or max(abs(together), abs(late)) == 0:
            continue
        if abs(late - together) > differ * max(abs(together), abs(late)):
            said = figure(key)
            moved.append(f"{said.title} {said.text(together)} or {said.text(late)} {said.unit}")
    if not moved:
        return None
    return (
        f"{predicted.config.label}: requests sent at the same instant may start in one step "
        "or one after the other (a race the server decides in its first milliseconds), "
        "together or apart: " + "; ".join(moved)
    )


CHECKED_BATCH = 64
"""The smallest ``-b`` whose prediction, from a calibration the probe made at its own
``-b``, has been checked against the real server (``bench/predict_accuracy.py``'s mixed
rows)."""


def chunk_note(predicted: PredictedConfig) -> str | None:
    """Where ``predicted`` takes smaller chunks of a prompt a step than the model has been
    checked at (``CHECKED_BATCH``), that its stalls and prompt times may be short; else
    None."""
    batch = predicted.config.server.batch_size or DEFAULT_BATCH
    if batch >= CHECKED_BATCH:
        return None
    return (
        f"{predicted.config.label}: -b {batch} is below the smallest -b the model has been "
        f"checked at ({CHECKED_BATCH}): its steps of a few prompt tokens may cost otherwise "
        "than predicted, and its prompt times and stalls with them"
    )


CHECKED_UBATCH = (64, 512)
"""The ``-ub`` values between which a prediction priced from a calibration at another
``-ub`` (``StepCosts.chunk_ms``) has been checked against the real server
(``bench/predict_accuracy.py``'s mixed rows at ``-b`` 2048)."""


def ubatch_note(predicted: PredictedConfig, costs: StepCosts) -> str | None:
    """Where ``predicted`` runs at a ``-ub`` its costs were not measured at and outside
    ``CHECKED_UBATCH``, that its prompt times and stalls are priced beyond what has been
    checked; else None."""
    server = predicted.config.server
    ubatch = micro_batch(server.batch_size, server.ubatch_size)
    low, high = CHECKED_UBATCH
    if ubatch == costs.ubatch_size or low <= ubatch <= high:
        return None
    return (
        f"{predicted.config.label}: -ub {ubatch} is priced from the calibration's -ub "
        f"{costs.ubatch_size} by what a micro-batch costs, which has been checked against "
        f"the real server from -ub {low} to {high} only: its prompt times and stalls may "
        "differ"
    )


CostsOf = Callable[[RunConfig], tuple[StepCosts, int]]
"""A configuration's step costs and its chat template's tokens (the calibration that holds
for its settings); raises a ``WorkbenchError`` saying why where it has none."""


ChatOf = Callable[[RunConfig], ChatTokens | None]
"""A configuration's chat template tokens per message (its calibration's), for conversations."""


def predict_configs(
    configs: Sequence[RunConfig],
    costs_of: CostsOf,
    prompts: PromptSource,
    base_dir: Path | None = None,
    chat_of: ChatOf = lambda _: None,
) -> list[PredictedConfig | WorkbenchError]:
    """Each configuration predicted with its own costs, or the error that says why not, its
    prompts numbered across the sweep as a run numbers them (warm-ups first in each
    configuration; one left out still takes its numbers)."""
    results: list[PredictedConfig | WorkbenchError] = []
    next_index = 0
    counters: dict[str, Callable[[str], int]] = {}
    trained: dict[str, int] = {}
    for config in configs:
        workload = config.workload
        count = workload.warmup + workload.per_repeat * workload.repeats
        try:
            if (what := _not_modelled(config)) is not None:
                raise ExperimentError(
                    f"[{config.label}] the scheduler model does not predict {what} yet"
                )
            costs, template_tokens = costs_of(config)
            model = config.server.model
            # made-up conversations' messages are sized in tokens: nothing to count
            made_up = (
                isinstance(workload, ConversationsWorkload) and not workload.conversations_file
            )
            sized = isinstance(workload, RequestsWorkload) and workload.input_tokens
            if not sized and not made_up and model not in counters:
                path = resolve_model(model, base_dir)
                counters[model] = estimator_for(path)
            planned = config_traffic(
                config, next_index, template_tokens, chat_of(config), counters.get(model),
                base_dir,
            )  # fmt: skip
            if planned is not None:
                config, workload = planned.config, planned.config.workload
                count = workload.warmup + workload.per_repeat * workload.repeats
            if planned is not None and planned.warmup_lengths is not None:
                lengths = planned.warmup_lengths
            else:
                needed = workload.warmup if planned is not None else count
                lengths = prompt_lengths(
                    workload, next_index, needed, prompts, counters.get(model), template_tokens
                )
            repeats = planned.repeats if planned else None
            if model not in trained:
                trained[model] = _train_ctx(model, base_dir)
            results.append(predict_config(config, costs, lengths, repeats, trained[model]))
        except WorkbenchError as exc:
            results.append(exc)
        next_index += count
    return results


def _train_ctx(model: str, base_dir: Path | None) -> int:
    """The model's training context from its header; 0 where the file cannot be read (the
    run will say why; the prediction then does not cap a slot)."""
    try:
        return read_model_facts(resolve_model(model, base_dir)).train_ctx
    except WorkbenchError:
        return 0


def predict_experiment(
    experiment: Experiment,
    costs: StepCosts,
    prompts: PromptSource,
    template_tokens: int,
    base_dir: Path | None = None,
    chat: ChatTokens | None = None,
) -> list[PredictedConfig]:
    """Every configuration of ``experiment`` predicted with the same costs; the first one
    that cannot be raises why."""
    predicted = []
    for result in predict_configs(
        experiment.configs(), lambda _: (costs, template_tokens), prompts, base_dir,
        lambda _: chat,
    ):  # fmt: skip
        if isinstance(result, WorkbenchError):
            raise result
        predicted.append(result)
    return predicted
