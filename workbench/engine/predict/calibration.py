"""A machine's calibration: the step costs (``costs``) fitted to llama-server's own
``timings``, with what they hold for (the machine, the model, the server build and the
settings that change a step's cost), stored as a small JSON file and reused until one of
those changes.

What the fit relies on was measured on the real llama-server
(tests/engine/predict/test_calibration_server.py): ``prompt_n`` counts the prompt tokens
processed, the ones reused from the cache (``cache_n``) left out, and ``prompt_ms`` times
them; ``predicted_ms`` runs from the first generated token to the last, so it spans
``predicted_n - 1`` generating steps (the first token comes out of the prompt's step).

A calibration file is read by pydantic against the records themselves (``Calibration`` and
what it holds): each field's annotation says what the file may hold for it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from typing_extensions import TypedDict

from workbench.engine.base.errors import ImportFileError, WorkbenchError
from workbench.engine.base.records import Hardware, RequestRecord
from workbench.engine.base.spans import covered_ns
from workbench.engine.base.validation import validated
from workbench.engine.config.preferences import config_folder
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.interop.files import read_json
from workbench.engine.models.sliding_window import DEFAULT_BATCH, DEFAULT_UBATCH
from workbench.engine.predict.costs import (
    MAX_MS,
    Count,
    DecodeCost,
    MicroBatchCost,
    PrefillCost,
    StepCosts,
)

VERSION = 1
MAX_BYTES = 64 * 1024  # a calibration is a few hundred bytes
MAX_TEXT = 4096  # a name, a path or a note
FOLDER = "calibrations"

# What a calibration file may hold in a field, each value strictly of its kind (no text as
# a number, no 1.0 as a count): the records' annotations are made of these.
_Error = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0, le=MAX_MS)]
_Text = Annotated[str, Field(strict=True, max_length=MAX_TEXT)]
_Whole = Annotated[int, Field(strict=True)]
_Switch = Annotated[bool, Field(strict=True)]


class HeldSettings(TypedDict, total=False):
    """The server settings a step's cost depends on, each of its type in ``ServerSettings``
    (None: not set): another value of any needs its own calibration. The slots and the
    context do not change a step's cost (what is decoding does), nor does ``-b``: it is how
    many prompt tokens a step takes, a rule of the scheduler model, which adds up their
    cost (``sweep.chunk_note`` says how far that has been checked). Nor does ``-ub`` where
    the calibration measured what a micro-batch costs (``StepCosts.holds_at``)."""

    threads: _Whole | None
    gpu_layers: _Whole | None
    flash_attn: _Text | None
    cache_type_k: _Text | None
    cache_type_v: _Text | None
    kv_unified: _Switch | None
    cont_batching: _Switch | None
    draft_model: _Text | None
    draft_max: _Whole | None
    draft_min: _Whole | None


HELD_SETTINGS = tuple(HeldSettings.__annotations__)  # their names, in order
HELD_WHEN_SET = ("draft_model", "draft_max", "draft_min")
"""Held settings that came after calibrations were first stored: left out while unset, so a
calibration stored before them is still found for the settings it was made with."""


class CalibrationError(WorkbenchError):
    """Nothing to calibrate from: no request with the server's timings."""


@dataclass(frozen=True)
class FitQuality:
    """How well the fitted costs reproduce the timings they were fitted to: relative errors
    per request of ``prompt_ms`` and ``predicted_ms`` (0.04: 4 %), the median and the worst;
    and the same of each request when held back (``held_back_*``: the costs fitted to the
    other requests, ``HELD_BACK_FOLDS`` ways): what the fit says of requests it has not
    seen. A fit reproduces its own requests by construction; held back, too few or too
    alike requests show (None: too few to hold any back, or a file from before)."""

    prefill_requests: Count
    prefill_median_error: _Error
    prefill_worst_error: _Error
    decode_requests: Count
    decode_median_error: _Error
    decode_worst_error: _Error
    held_back_prefill_median_error: _Error | None = None
    held_back_prefill_worst_error: _Error | None = None
    held_back_decode_median_error: _Error | None = None
    held_back_decode_worst_error: _Error | None = None


@dataclass(frozen=True)
class Coverage:
    """What a set of requests spans, as the costs depend on it: the longest prompt
    processed, the most sequences generating at once and the longest context one reached
    (prompt, cached tokens and answer). A fit says little beyond its data's span."""

    prompt_tokens: Count
    sequences: Count
    context_tokens: Count


@dataclass(frozen=True)
class Fit:
    costs: StepCosts
    quality: FitQuality
    coverage: Coverage | None = None


@dataclass(frozen=True)
class ChatTokens:
    """What the chat template adds around a conversation's messages besides their text, by
    the server's count: around one user message (``prompt``) or a system message and one
    user message (``system_prompt``), for each earlier question and answer
    (``exchange``), and before the first user message's text (``opening``, or
    ``system_opening`` besides the system message's text): what every conversation's
    prompts share."""

    prompt: Count
    system_prompt: Count
    exchange: Count
    opening: Count
    system_opening: Count

    def first_prompt(self, system_tokens: int) -> int:
        """A first turn's prompt besides its message: the template and the system prompt."""
        return self.system_prompt + system_tokens if system_tokens else self.prompt

    def shared(self, system_tokens: int) -> int:
        """What of a first turn precedes its message: the opening and the system prompt."""
        return self.system_opening + system_tokens if system_tokens else self.opening


@dataclass(frozen=True)
class Calibration:
    """Step costs and what they hold for. ``machine``, ``model`` and ``build`` are
    identities (``machine_identity``, ``model_identity``); ``settings`` the
    ``HELD_SETTINGS`` as the server ran with them; ``source`` "probe" or the session's
    name (a ``PROBE`` is stored under its own file name, a session's fit under another:
    ``file_name``); ``coverage`` what its requests spanned; ``note`` what the maker said (a
    probe stopped early); ``template_tokens`` what the
    chat template adds around a message, by the server's count (None: not measured, as from
    a session), so that prompts as written can be sized without a server; ``chat`` the same
    for each message of a conversation (None: not measured, by an older probe or a
    session)."""

    costs: StepCosts
    quality: FitQuality
    machine: _Text
    model: _Text
    build: _Text | None
    settings: Annotated[HeldSettings, AfterValidator(held_settings)]
    made_at: _Text
    source: _Text
    note: _Text = ""
    template_tokens: Count | None = None
    chat: ChatTokens | None = None
    coverage: Coverage | None = None  # None: a file from before it was stored

    def fits(self, machine: str, model: str, build: str | None, settings: dict[str, Any]) -> bool:
        """Whether these costs hold for that machine, model, build and settings."""
        return (
            self.machine == machine
            and self.model == model
            and self.build == build
            and self.settings == held_settings(settings)
            and self.costs.holds_at(settings.get("ubatch_size") or DEFAULT_UBATCH)
        )


def machine_identity(hardware: Hardware) -> str:
    """The machine as a calibration names it: what changes a step's cost (its processor,
    memory and GPUs) and its name, but not its OS or Python."""
    gpus = ", ".join(g.name or "?" for g in hardware.gpus)
    ram = f"{hardware.ram_bytes / 2**30:.0f} GiB" if hardware.ram_bytes else "? GiB"
    return (
        f"{hardware.machine_name} ({hardware.cpu_logical_cores or '?'} threads, {ram}"
        + (f", {gpus}" if gpus else "")
        + f") on {hardware.hostname or '?'}"
    )


def model_identity(path: Path) -> str:
    """A model file by its name and size: a changed or another file is another model."""
    return f"{path.name} ({path.stat().st_size} bytes)"


def held_settings(settings: dict[str, Any] | ServerSettings) -> dict[str, Any]:
    """Of a configuration's server settings, those that change a step's cost."""
    found = asdict(settings) if isinstance(settings, ServerSettings) else settings
    held = {name: found.get(name) for name in HELD_SETTINGS}
    return {k: v for k, v in held.items() if v is not None or k not in HELD_WHEN_SET}


def default_folder() -> Path:
    return config_folder() / FOLDER


PROBE = "probe"  # the source of a calibration the probe measured
SESSION_FIT = "-from-session"  # what a session's fit adds to the probe's file name


def file_name(
    machine: str, model: str, build: str | None, settings: dict[str, Any], source: str = PROBE
) -> str:
    """One file per machine, model, build and settings for the probe, and one beside it
    for a fit from a session: a session's fit never takes the probe's place. A new one of
    the same replaces the old (``workbench calibrate`` says so)."""
    key = json.dumps([machine, model, build, held_settings(settings)], sort_keys=True)
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", model.split(" (")[0].removesuffix(".gguf"))[:80]
    made = "" if source == PROBE else SESSION_FIT
    return f"{stem}-{hashlib.sha256(key.encode()).hexdigest()[:12]}{made}.json"


def path_of(calibration: Calibration, folder: Path | None = None) -> Path:
    """Where ``save`` stores ``calibration``."""
    c = calibration
    return (folder or default_folder()) / file_name(
        c.machine, c.model, c.build, c.settings, c.source
    )


# --- the fit -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Timed:
    """One request's server timings, checked, and when the client saw it decode."""

    prompt_n: int
    cache_n: int
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    first_ns: int | None
    last_ns: int | None
    ttft_ms: float | None

    @property
    def steps(self) -> int:
        return self.predicted_n - 1

    @property
    def mean_context(self) -> float:
        """Its context while it decoded, on average: the prompt and half the answer."""
        return self.prompt_n + self.cache_n + self.predicted_n / 2


def _whole(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 10**9:
        return None
    return value


def _ms(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= MAX_MS else None


def _timed(record: RequestRecord) -> _Timed | None:
    timings = record.timings or {}
    prompt_n, predicted_n = _whole(timings.get("prompt_n")), _whole(timings.get("predicted_n"))
    prompt_ms, predicted_ms = _ms(timings.get("prompt_ms")), _ms(timings.get("predicted_ms"))
    if None in (prompt_n, predicted_n, prompt_ms, predicted_ms):
        return None
    assert prompt_n is not None and predicted_n is not None
    assert prompt_ms is not None and predicted_ms is not None
    ttft = None
    if record.t_first_token_ns is not None and record.t_submit_ns is not None:
        ttft = (record.t_first_token_ns - record.t_submit_ns) / 1e6
    decoding = record.streamed and record.t_first_token_ns is not None
    return _Timed(
        prompt_n,
        _whole(timings.get("cache_n")) or 0,
        prompt_ms,
        predicted_n,
        predicted_ms,
        record.t_first_token_ns if decoding else None,
        record.t_last_token_ns if decoding else None,
        ttft,
    )


def usable(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """The records a fit may use: measured (not warm-ups), successful, with timings."""
    return [r for r in records if r.ok and not r.warmup and _timed(r) is not None]


def _beside(
    one: _Timed,
    everyone: Sequence[_Timed],
    span: Callable[[_Timed], tuple[int, int] | None],
    their_span: Callable[[_Timed], tuple[int, int] | None] | None = None,
) -> list[tuple[_Timed, float]]:
    """Every request whose ``span`` (or ``their_span``) overlapped ``one``'s ``span``,
    ``one`` first, each with the share of ``one``'s span it overlapped (1 for ``one``)."""
    mine = span(one)
    if mine is None or mine[1] <= mine[0]:
        return [(one, 1.0)]
    found = [(one, 1.0)]
    for other in everyone:
        theirs = (their_span or span)(other)
        if other is one or theirs is None:
            continue
        overlap = min(mine[1], theirs[1]) - max(mine[0], theirs[0])
        if overlap > 0:
            found.append((other, overlap / (mine[1] - mine[0])))
    return found


def _decoding(t: _Timed) -> tuple[int, int] | None:
    return None if t.first_ns is None or t.last_ns is None else (t.first_ns, t.last_ns)


def _prefilling(t: _Timed) -> tuple[int, int] | None:
    """When the server processed its prompt: the ``prompt_ms`` before its first token."""
    return None if t.first_ns is None else (t.first_ns - round(t.prompt_ms * 1e6), t.first_ns)


def _nnls(design: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The least-squares solution with every coefficient at least 0 (Lawson and Hanson's
    active set): the columns scaled to one length first, so that a coefficient per context
    token and one per step are judged alike."""
    scale = np.linalg.norm(design, axis=0)
    scale[scale == 0] = 1.0
    a = design / scale
    columns = a.shape[1]
    x = np.zeros(columns)
    passive = np.zeros(columns, dtype=bool)
    tol = 10 * max(a.shape) * np.finfo(float).eps * max(1.0, float(np.abs(a).sum(axis=0).max()))
    for _ in range(3 * columns + 10):
        gradient = a.T @ (y - a @ x)
        free = ~passive & (gradient > tol)
        if not free.any():
            break
        passive[int(np.argmax(np.where(free, gradient, -np.inf)))] = True
        for _ in range(3 * columns + 10):
            trial = np.zeros(columns)
            trial[passive] = np.linalg.lstsq(a[:, passive], y, rcond=None)[0]
            if (trial[passive] > tol).all():
                x = trial
                break
            # step from x towards the trial until the first coefficient reaches 0
            falling = passive & (trial <= tol)
            step = float(np.min(x[falling] / np.maximum(x[falling] - trial[falling], 1e-300)))
            x = x + step * (trial - x)
            passive &= x > tol
            x[~passive] = 0.0
    return x / scale


def _least_squares(
    rows: list[list[float]], observed: list[float], signed: tuple[int, ...] = ()
) -> list[float]:
    """Coefficients minimising the relative error of each row (each row divided by what
    it observed), each at least 0 (a cost is never negative: fitted so, not cut after)
    but those of the ``signed`` columns (a saving as much as a cost); a column that is
    zero throughout, or proportional to the first (nothing in the data tells it apart),
    gets 0."""
    design = np.array(rows, dtype=float)
    y = np.array(observed, dtype=float)
    weights = 1.0 / np.maximum(y, 1e-9)
    keep = [0]
    for column in range(1, design.shape[1]):
        trial = design[:, [*keep, column]] * weights[:, None]
        if np.linalg.matrix_rank(trial, tol=1e-9 * np.abs(trial).max()) == len(keep) + 1:
            keep.append(column)
    weighted = design[:, keep] * weights[:, None]
    # a signed column is two of at least 0: its value the first less the second
    twins = [k for k, column in enumerate(keep) if column in signed]
    solved = _nnls(np.hstack([weighted, -weighted[:, twins]]), y * weights)
    for twin, k in enumerate(twins):
        solved[k] -= solved[len(keep) + twin]
    coefficients = [0.0] * design.shape[1]
    for column, value in zip(keep, solved[: len(keep)], strict=True):
        coefficients[column] = float(value)
    return coefficients


def _dot(coefficients: list[float], row: list[float]) -> float:
    return sum(c * x for c, x in zip(coefficients, row, strict=True))


def _errors(predicted: list[float], observed: list[float]) -> tuple[float, float]:
    errors = [abs(p - o) / o for p, o in zip(predicted, observed, strict=True) if o > 0]
    return (statistics.median(errors), max(errors)) if errors else (0.0, 0.0)


def _overhead_ms(timed: Sequence[_Timed]) -> float:
    """What a request costs besides its prompt and its answer: its time to first token less
    the server's prompt time, at its least (a request that found a free slot; a queued one
    waited as well)."""
    gaps = [t.ttft_ms - t.prompt_ms for t in timed if t.ttft_ms is not None]
    return max(0.0, min(gaps)) if gaps else 0.0


@dataclass(frozen=True)
class _Rows:
    """The fit's equations: one row of each kind per request, and what each observed."""

    prefill: list[list[float]]
    prompt_ms: list[float]
    decode: list[list[float]]
    predicted_ms: list[float]
    interleaved_ms: list[float]  # of each decode row: other prompts' time within it
    beside: list[tuple[float, float]]  # of each prefill row: sequences and context decoding


def _rows(records: Iterable[RequestRecord], batch_size: int | None = None) -> _Rows:
    """Prefill: each request's ``prompt_ms`` is ``base + tokens * (per_token +
    per_token_context * (cache_n + tokens / 2))`` (``PrefillCost``: each token attends over
    the cache and half its own prompt), the tokens those of every prompt processed beside it
    (the server batches prompts that arrive together, and each one's ``prompt_ms`` times
    the whole batch), each weighted by its share of the time. Decode: its ``predicted_ms``
    is ``predicted_n - 1`` steps, each ``base + per_sequence * sequences +
    per_context_token * context``, with the sequences and context decoding beside it
    averaged over its decode from the client's first and last token times (``_beside``),
    plus the time the server spent on other requests' prompts while it generated (their
    ``prompt_ms`` within its decode: a prompt interleaved with generating steps adds its
    own time to them), taken as measured (``_interleaved_ms``). A prompt processed while
    others generated (``beside``: their sequences and context, averaged over its prompt
    time) is timed with their steps: what that costs is fitted apart (``fit_costs``). The
    prompt's base is paid once a step: a prompt longer than ``batch_size`` (``-b``) takes
    several."""
    per_step = batch_size or DEFAULT_BATCH
    timed = [t for r in usable(records) if (t := _timed(r)) is not None]
    prefilled = [t for t in timed if t.prompt_n > 0 and t.prompt_ms > 0]
    decoded = [t for t in timed if t.steps > 0 and t.predicted_ms > 0 and t.first_ns is not None]
    prefill = []
    beside = []
    for t in prefilled:
        together = _beside(t, prefilled, _prefilling)
        tokens = sum(o.prompt_n * share for o, share in together)
        prefill.append(
            [
                float(max(1, math.ceil(tokens / per_step))),
                tokens,
                sum(o.prompt_n * (o.cache_n + o.prompt_n / 2) * share for o, share in together),
            ]
        )
        generating = _beside(t, decoded, _prefilling, _decoding)[1:]
        beside.append(
            (
                sum(share for _, share in generating),
                sum(o.mean_context * share for o, share in generating),
            )
        )
    decode = []
    for t in decoded:
        batch = _beside(t, decoded, _decoding)
        sequences = sum(share for _, share in batch)
        context = sum(o.mean_context * share for o, share in batch)
        decode.append([t.steps, t.steps * sequences, t.steps * context])
    return _Rows(
        prefill,
        [t.prompt_ms for t in prefilled],
        decode,
        [t.predicted_ms for t in decoded],
        [_interleaved_ms(t, prefilled) for t in decoded],
        beside,
    )


def _interleaved_ms(one: _Timed, everyone: Sequence[_Timed]) -> float:
    """The time other requests' prompts were processed within ``one``'s decode: the union
    of their prompt times (prompts batched together share one), cut to its decode."""
    mine = _decoding(one)
    if mine is None:
        return 0.0
    spans = (
        span for other in everyone if other is not one and (span := _prefilling(other)) is not None
    )
    return covered_ns(spans, *mine) / 1e6


def _prompt_ms(costs: StepCosts, row: list[float], beside: tuple[float, float]) -> float:
    """A prefill row's time by ``costs``: its prompt's step, with the generating tokens
    that rode in it (``beside``) at the interleaved step's cost."""
    p, d = costs.prefill, costs.decode
    prompt = _dot([p.base_ms, p.per_token_ms, p.per_token_context_ms], row)
    sequences, context = beside
    if sequences <= 0:
        return prompt
    return costs.step_ms(_generating_ms(d, sequences, context), prompt)


def _decode_ms(costs: StepCosts, rows: _Rows) -> list[float]:
    """Each decode row's ``predicted_ms`` by ``costs``: its steps and the other prompts'
    time within its decode, as measured."""
    d = costs.decode
    coefficients = [d.base_ms, d.per_sequence_ms, d.per_context_token_ms]
    return [
        _dot(coefficients, row) + other
        for row, other in zip(rows.decode, rows.interleaved_ms, strict=True)
    ]


def _prompts_ms(costs: StepCosts, rows: _Rows) -> list[float]:
    return [_prompt_ms(costs, r, b) for r, b in zip(rows.prefill, rows.beside, strict=True)]


def _quality(costs: StepCosts, rows: _Rows, held_back: FitQuality | None = None) -> FitQuality:
    found = FitQuality(
        len(rows.prompt_ms),
        *_errors(_prompts_ms(costs, rows), rows.prompt_ms),
        len(rows.predicted_ms),
        *_errors(_decode_ms(costs, rows), rows.predicted_ms),
    )
    if held_back is None:
        return found
    return replace(
        found,
        held_back_prefill_median_error=held_back.held_back_prefill_median_error,
        held_back_prefill_worst_error=held_back.held_back_prefill_worst_error,
        held_back_decode_median_error=held_back.held_back_decode_median_error,
        held_back_decode_worst_error=held_back.held_back_decode_worst_error,
    )


def reproduce(
    costs: StepCosts, records: Iterable[RequestRecord], batch_size: int | None = None
) -> FitQuality:
    """How near ``costs`` come to the server timings of ``records`` (their own, or another
    run's: a calibration checked against a run it was not fitted to), run at ``-b
    batch_size``."""
    return _quality(costs, _rows(records, batch_size))


HELD_BACK_FOLDS = 5
"""Each request is held back once: the costs fitted to the other four fifths predict it."""


def _subset(rows: _Rows, decode: list[int], prefill: list[int]) -> _Rows:
    return _Rows(
        [rows.prefill[i] for i in prefill],
        [rows.prompt_ms[i] for i in prefill],
        [rows.decode[i] for i in decode],
        [rows.predicted_ms[i] for i in decode],
        [rows.interleaved_ms[i] for i in decode],
        [rows.beside[i] for i in prefill],
    )


def _held_back(rows: _Rows, overhead_ms: float) -> FitQuality:
    """Each request's error when the costs are fitted to the others (``HELD_BACK_FOLDS``
    folds, by their order, so that each group of alike requests lies in every fold); None
    of a kind with fewer than two requests."""
    sizes = {"prefill": len(rows.prompt_ms), "decode": len(rows.predicted_ms)}
    predicted: dict[str, list[float]] = {kind: [] for kind in sizes}
    observed: dict[str, list[float]] = {kind: [] for kind in sizes}
    for fold in range(HELD_BACK_FOLDS):
        held = {k: [i for i in range(n) if i % HELD_BACK_FOLDS == fold] for k, n in sizes.items()}
        if not held["prefill"] and not held["decode"]:
            continue
        kept = {k: [i for i in range(n) if i % HELD_BACK_FOLDS != fold] for k, n in sizes.items()}
        costs = _solve(_subset(rows, kept["decode"], kept["prefill"]), overhead_ms)
        out = _subset(rows, held["decode"], held["prefill"])
        predicted["prefill"] += _prompts_ms(costs, out)
        observed["prefill"] += out.prompt_ms
        predicted["decode"] += _decode_ms(costs, out)
        observed["decode"] += out.predicted_ms

    def judged(kind: str) -> tuple[float | None, float | None]:
        return (None, None) if sizes[kind] < 2 else _errors(predicted[kind], observed[kind])

    prefill, decode = judged("prefill"), judged("decode")
    return FitQuality(sizes["prefill"], 0.0, 0.0, sizes["decode"], 0.0, 0.0, *prefill, *decode)


def _solve(rows: _Rows, overhead_ms: float, ubatch_size: int = DEFAULT_UBATCH) -> StepCosts:
    """The costs fitted to ``rows``: the generating step's first, then the prompt's and
    the interleaved step's together (``_interleaved_rows``); every cost at least 0, the
    interleaved step's a saving or a cost."""
    own = [
        (row, observed - other)
        for row, observed, other in zip(
            rows.decode, rows.predicted_ms, rows.interleaved_ms, strict=True
        )
        if observed - other > 0
    ]
    decode = DecodeCost(
        *(_least_squares([r for r, _ in own], [ms for _, ms in own]) if own else [0.0] * 3)
    )
    prompts = _interleaved_rows(decode, rows)
    prompt = (
        _least_squares([row for row, _ in prompts], [ms for _, ms in prompts], signed=(3,))
        if prompts
        else [0.0] * 4
    )
    return StepCosts(decode, PrefillCost(*prompt[:3]), overhead_ms, prompt[3], ubatch_size)


def coverage(records: Iterable[RequestRecord]) -> Coverage | None:
    """What ``records`` span (``Coverage``): measured ones as a fit's data, predicted ones
    as what a prediction asks of its calibration; None without a request with timings."""
    timed = [t for r in usable(records) if (t := _timed(r)) is not None]
    if not timed:
        return None
    # an end sorts before a start at the same moment: those two never generated together
    moments = sorted(
        (moment, change)
        for t in timed
        if t.steps > 0 and (span := _decoding(t)) is not None
        for moment, change in ((span[0], 1), (span[1], -1))
    )
    together = most = 0
    for _, change in moments:
        together += change
        most = max(most, together)
    return Coverage(
        max(t.prompt_n for t in timed),
        max(most, 1),
        max(t.prompt_n + t.cache_n + t.predicted_n for t in timed),
    )


def fit_costs(
    records: Iterable[RequestRecord],
    batch_size: int | None = None,
    ubatch_size: int | None = None,
) -> Fit:
    """Step costs from requests' server timings (``_rows``), by least squares with every
    cost at least 0 (``_least_squares``), how well they reproduce them, each request held
    back as well (``_held_back``), and what the requests spanned (``coverage``). A
    coefficient the data cannot tell apart (one sequence throughout, no cache) is 0.
    ``batch_size``, ``ubatch_size``: the ``-b`` and ``-ub`` the records were measured at
    (None: the server's default)."""
    records = list(records)
    rows = _rows(records, batch_size)
    if not rows.prompt_ms and not rows.predicted_ms:
        raise CalibrationError(
            "no request with the server's timings to fit (measured, successful, with "
            "llama-server's prompt_ms and predicted_ms)"
        )
    timed = [t for r in usable(records) if (t := _timed(r)) is not None]
    overhead = _overhead_ms(timed)
    costs = _solve(rows, overhead, ubatch_size or DEFAULT_UBATCH)
    return Fit(costs, _quality(costs, rows, _held_back(rows, overhead)), coverage(records))


def small_chunk_cost(
    prefill: PrefillCost, records: Iterable[RequestRecord], applies_to: int
) -> PrefillCost:
    """``prefill`` with what a small chunk over a cache costs a token pair, from requests
    that each processed a few prompt tokens after a long cached prefix (the probe's last
    step) and ones that processed as many alone, sent in turn (the machine's pace drifts
    by a quarter from minute to minute): each chunk's cost a token less the lone ones'
    (their median), over the cache it attended (``PrefillCost``), their median, for chunks
    of at most ``applies_to`` tokens. Without a lone one, the fitted cost of one stands
    for it; ``prefill`` as it was without a chunk on a cache."""
    timed = [t for r in usable(records) if (t := _timed(r)) is not None and t.prompt_n > 0]
    chunks = [t for t in timed if t.cache_n > 0]
    alone = [t.prompt_ms / t.prompt_n for t in timed if t.cache_n == 0]
    if not chunks:
        return prefill
    pairs = [
        (
            t.prompt_ms / t.prompt_n
            - (statistics.median(alone) if alone else prefill.ms(t.prompt_n) / t.prompt_n)
        )
        / t.cache_n
        for t in chunks
    ]
    return replace(
        prefill,
        small_chunk_tokens=applies_to,
        small_chunk_context_ms=min(MAX_MS, max(0.0, statistics.median(pairs))),
    )


def micro_batch_cost(
    measured: Iterable[RequestRecord], ubatch: int, other: Iterable[RequestRecord], at: int
) -> MicroBatchCost | None:
    """What a micro-batch costs besides its tokens (``MicroBatchCost``), from the same
    prompts processed alone and fresh at ``-ub`` ``ubatch`` (``measured``) and at ``at``
    (``other``), each pair one after the other in the same minute: each pair's difference
    is what its micro-batches cost more (or less) at ``at``, fitted by least squares with
    both costs at least 0. None without two prompts of different lengths at both."""

    def alone(records: Iterable[RequestRecord]) -> dict[int, float]:
        timed = (_timed(r) for r in usable(records))
        return {t.prompt_n: t.prompt_ms for t in timed if t and t.cache_n == 0 and t.prompt_n}

    mine, theirs = alone(measured), alone(other)
    shared = sorted(set(mine) & set(theirs))
    if len(shared) < 2:
        return None
    unit = MicroBatchCost(1.0, 0.0, at)
    per_token = MicroBatchCost(0.0, 1.0, at)
    design = [
        [cost.ms(n, 0, at) - cost.ms(n, 0, ubatch) for cost in (unit, per_token)] for n in shared
    ]
    base, context = _nnls(np.array(design), np.array([theirs[n] - mine[n] for n in shared]))
    return MicroBatchCost(min(MAX_MS, float(base)), min(MAX_MS, float(context)), at)


def kept_measures(fitted: StepCosts, probed: StepCosts) -> StepCosts:
    """``fitted`` (a refit of runs' requests) with what the probe measured apart, which
    no run's requests measure again: the small chunk's cost and the micro-batch's."""
    prefill = replace(
        fitted.prefill,
        small_chunk_tokens=probed.prefill.small_chunk_tokens,
        small_chunk_context_ms=probed.prefill.small_chunk_context_ms,
    )
    return replace(fitted, prefill=prefill, micro_batch=probed.micro_batch)


def _interleaved_rows(decode: DecodeCost, rows: _Rows) -> list[tuple[list[float], float]]:
    """The prompt's equations with the interleaved step's cost a term of its own: a prompt
    processed beside generating sequences times their step too, so its ``prompt_ms`` less
    that step (by ``decode``) is its prompt's cost and the interleaved cost (a column that
    is 0 for a prompt alone, and 0 throughout where none was beside them)."""
    found = []
    for row, (sequences, context), observed in zip(
        rows.prefill, rows.beside, rows.prompt_ms, strict=True
    ):
        beside = sequences > 0
        own = observed - (_generating_ms(decode, sequences, context) if beside else 0.0)
        if own > 0:
            found.append(([*row, 1.0 if beside else 0.0], own))
    return found


def _generating_ms(decode: DecodeCost, sequences: float, context: float) -> float:
    """A step of ``sequences`` generating on average, their caches holding ``context``."""
    return max(
        0.0,
        decode.base_ms + decode.per_sequence_ms * sequences + decode.per_context_token_ms * context,
    )


# --- the file ------------------------------------------------------------------------------

NOT_A_CALIBRATION = (
    "not a calibration (it has no version and costs: `workbench calibrate` makes one)"
)


def _this_version(value: int) -> int:
    if value != VERSION:
        raise ValueError(f"must be {VERSION} (another workbench's calibration: calibrate again)")
    return value


class _File(BaseModel):
    """What a calibration file holds besides a ``Calibration``'s fields: its version. A key
    it does not know is passed over (the fields that came later, as ``coverage``, were added
    so, without a new version)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, defer_build=True)

    version: Annotated[int, AfterValidator(_this_version)]

    @model_validator(mode="before")
    @classmethod
    def _a_calibration(cls, document: Any) -> Any:
        """A JSON without costs is another file, not a damaged calibration (one without its
        version is a damaged one: ``version is missing``)."""
        if isinstance(document, dict) and "costs" not in document:
            raise ValueError(NOT_A_CALIBRATION)
        return document


_UNSAID = {"build": None, "settings": {}}
"""What a file may leave out that a ``Calibration`` has no default for: no build, no
settings held (as every reader of these files has taken it)."""


# --- storage -------------------------------------------------------------------------------


def save(calibration: Calibration, folder: Path | None = None) -> Path:
    """Write the calibration into ``folder`` (the user's, by default); return its path."""
    path = path_of(calibration, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"version": VERSION, **asdict(calibration)}
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def replaced_at(path: Path) -> str:
    """What storing at ``path`` replaces, in words ("" for nothing): a calibration never
    replaces another without a word."""
    if not path.exists():
        return ""
    try:
        found = load(path)
    except ImportFileError:
        return "replacing a file that was no calibration this workbench reads"
    return f"replacing the one from {found.source} made {found.made_at}"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def load(path: Path) -> Calibration:
    """A calibration file, every value checked (``_File``, then ``Calibration``'s own
    annotations): one clear line for a damaged, foreign, newer or oversized one."""
    if not path.is_file():
        raise ImportFileError(f"{path.name}: not a file")
    if path.stat().st_size > MAX_BYTES:
        raise ImportFileError(f"{path.name}: over the {MAX_BYTES // 1024} KiB a calibration has")
    document = read_json(path)
    validated(_File, document, path.name, ImportFileError)
    # Each value strict by its own annotation: strict pydantic would take a record only as
    # an instance, never as the file's table.
    calibration: Calibration = validated(
        Calibration, {**_UNSAID, **document}, path.name, ImportFileError, strict=None
    )
    return calibration


def stored(
    machine: str,
    model: str,
    build: str | None,
    settings: dict[str, Any],
    folder: Path | None = None,
) -> tuple[Path, Calibration] | None:
    """The stored calibration that holds for these, and its file: the probe's where there
    is one (it measured each kind of cost over a range set for it), else a session's fit
    (what that session's requests spanned only). A damaged or refused file is none (it is
    made again; ``refused`` says why)."""
    folder = folder or default_folder()
    for source in (PROBE, "session"):
        path = folder / file_name(machine, model, build, settings, source)
        if not path.is_file():
            continue
        try:
            found = load(path)
        except ImportFileError:
            continue
        if found.fits(machine, model, build, settings):
            return path, found
    return None


def refused(
    machine: str,
    model: str,
    build: str | None,
    settings: dict[str, Any],
    folder: Path | None = None,
) -> list[str]:
    """Why each file stored for these was not used (``load``'s one line for each)."""
    folder = folder or default_folder()
    said = []
    for source in (PROBE, "session"):
        path = folder / file_name(machine, model, build, settings, source)
        if path.exists():
            try:
                load(path)
            except ImportFileError as exc:
                said.append(str(exc))
    return said


def find(
    machine: str,
    model: str,
    build: str | None,
    settings: dict[str, Any],
    folder: Path | None = None,
) -> Calibration | None:
    """The stored calibration that holds for these (``stored``), if there is one."""
    found = stored(machine, model, build, settings, folder)
    return None if found is None else found[1]
