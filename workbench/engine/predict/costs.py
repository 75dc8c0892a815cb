"""What one step of llama-server's work costs on a calibrated machine, in milliseconds.

llama-server works in steps: each step is one ``llama_decode`` call on a batch holding one
token of every slot that is generating and as many prompt tokens as the batch has room for.
Its cost grows with the sequences generating (each reads the weights' activations and its own
KV cache) and with their context (attention over every cached token), and a prompt's tokens
cost per token. A step's tokens run in micro-batches of at most ``-ub``: each costs besides
its tokens (``MicroBatchCost``), so the costs are fitted at one ``-ub`` and another ``-ub``
pays the difference. The calibration fits these coefficients to the server's own
``timings`` (``calibration``); the scheduler model (``scheduler_model``) adds them up step
by step.

Each field's annotation says what a calibration file may hold for it: the file is read by
pydantic against these records themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, Field

from workbench.engine.base.validation import MAX_NUMBER
from workbench.engine.models.sliding_window import DEFAULT_UBATCH

MAX_MS = 1e7  # a cost beyond this (almost 3 hours a step) is damage, not a measurement


def _never_negative(value: float) -> float:
    if value < 0:
        raise ValueError(
            "must be at least 0: a cost is never negative (an older workbench's fit: "
            "calibrate again)"
        )
    return value


Cost = Annotated[
    float,
    Field(strict=True, allow_inf_nan=False, le=MAX_MS),
    AfterValidator(_never_negative),
]
"""A cost in ms: a number, never text, finite and at most ``MAX_MS``; the fit makes none
below 0, so one below 0 is another workbench's."""
Count = Annotated[int, Field(strict=True, ge=0, le=MAX_NUMBER)]
"""A count (tokens, requests), never a float."""
Saving = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=-MAX_MS, le=MAX_MS)]
"""A cost in ms that may be a saving (below 0)."""


@dataclass(frozen=True)
class DecodeCost:
    """One generating step of ``sequences`` slots whose contexts hold ``context_tokens``
    tokens between them: ``base_ms + per_sequence_ms * sequences + per_context_token_ms *
    context_tokens``."""

    base_ms: Cost
    per_sequence_ms: Cost
    per_context_token_ms: Cost

    def step_ms(self, sequences: int, context_tokens: int) -> float:
        if sequences <= 0:
            return 0.0
        # A least-squares fit may give a coefficient below 0; no step takes less than none.
        return max(
            0.0,
            self.base_ms
            + self.per_sequence_ms * sequences
            + self.per_context_token_ms * context_tokens,
        )


@dataclass(frozen=True)
class PrefillCost:
    """Processing ``tokens`` of prompt in one step, after ``context_tokens`` already in the
    slot's cache: ``base_ms + tokens * (per_token_ms + per_token_context_ms * (context_tokens
    + tokens / 2))``, each token attending over the cache and, on average, half the chunk
    before it. A prompt in chunks then costs the same attention as in one step (its chunks'
    sum is ``per_token_context_ms * n**2 / 2``), and a chunk late in a long prompt costs
    more than its first: what makes a long prompt's last chunks freeze other streams
    longest. At the ``-ub`` the calibration measured (``StepCosts.chunk_ms`` adds what
    another costs), for chunks of any ``-b``.

    A chunk of at most ``small_chunk_tokens`` tokens attends at ``small_chunk_context_ms`` a
    token pair where that is dearer: so few query rows cost more a pair than a long
    prompt's (the probe measures it on a cache; 0: not measured, a file from before)."""

    base_ms: Cost
    per_token_ms: Cost
    per_token_context_ms: Cost = 0.0
    small_chunk_tokens: Count = 0
    small_chunk_context_ms: Cost = 0.0

    def ms(self, tokens: int, context_tokens: int = 0) -> float:
        if tokens <= 0:
            return 0.0
        pair_ms = self.per_token_context_ms
        if tokens <= self.small_chunk_tokens:
            pair_ms = max(pair_ms, self.small_chunk_context_ms)
        return max(
            0.0,
            self.base_ms + tokens * (self.per_token_ms + pair_ms * (context_tokens + tokens / 2)),
        )


@dataclass(frozen=True)
class MicroBatchCost:
    """What each micro-batch of a prompt chunk costs besides its tokens' own cost:
    ``base_ms + per_context_token_ms * context``, the context its cache holds where it
    starts (a pass over the weights and one over the cache, whatever the micro-batch's
    size). Measured as the difference between the same prompts at two ``-ub`` values
    (``measured_at``, the second one), so ``StepCosts.chunk_ms`` prices another ``-ub``
    from one calibration."""

    base_ms: Cost
    per_context_token_ms: Cost
    measured_at: Count

    def ms(self, tokens: int, context_tokens: int, ubatch: int) -> float:
        """What the micro-batches of ``tokens`` after ``context_tokens``, ``ubatch`` at a
        time, cost besides their tokens."""
        if tokens <= 0:
            return 0.0
        n = -(-tokens // ubatch)
        starts = n * context_tokens + ubatch * n * (n - 1) / 2
        return n * self.base_ms + self.per_context_token_ms * starts


@dataclass(frozen=True)
class StepCosts:
    """Everything the scheduler model needs of a machine: a step's generating and prompt
    costs, what a request costs the server besides (tokenizing, sampling set-up, the HTTP
    round trip), and what a step holding both prompt tokens and generating ones costs
    besides its two parts (``interleaved_ms``: below 0 where the generating tokens ride in
    the prompt's batch for less than a step of their own), in ms. ``ubatch_size``: the
    ``-ub`` they were measured at; ``micro_batch``: what a micro-batch costs besides its
    tokens (None: not measured, and these costs hold at ``ubatch_size`` alone)."""

    decode: DecodeCost
    prefill: PrefillCost
    request_overhead_ms: Cost = 0.0
    interleaved_ms: Saving = 0.0  # a file from before it was fitted holds none
    ubatch_size: Count = DEFAULT_UBATCH
    micro_batch: MicroBatchCost | None = None

    def holds_at(self, ubatch: int) -> bool:
        """Whether these costs price a step at ``-ub`` ``ubatch``."""
        return ubatch == self.ubatch_size or self.micro_batch is not None

    def chunk_ms(self, tokens: int, context_tokens: int, ubatch: int) -> float:
        """A chunk of ``tokens`` of prompt after ``context_tokens`` at ``-ub`` ``ubatch``:
        its cost at the measured ``-ub`` and what its micro-batches cost besides there
        and at ``ubatch``."""
        cost = self.prefill.ms(tokens, context_tokens)
        if self.micro_batch is None or ubatch == self.ubatch_size:
            return cost
        extra = self.micro_batch.ms(tokens, context_tokens, ubatch)
        return max(
            0.0, cost + extra - self.micro_batch.ms(tokens, context_tokens, self.ubatch_size)
        )

    def step_ms(self, decode_ms: float, prefill_ms: float) -> float:
        """One step's cost from its generating part and its prompt part: a step holding
        both pays ``interleaved_ms`` besides, and never less than the dearer part alone."""
        if decode_ms <= 0 or prefill_ms <= 0:
            return decode_ms + prefill_ms
        return max(decode_ms, prefill_ms, decode_ms + prefill_ms + self.interleaved_ms)
