"""Memory direction of capacity: which slot layouts fit in this machine's memory, and
whether each request's context fits in a slot. What a layout takes is ``models.memory``'s
(``server_memory``): the weights, the KV cache of the cells llama-server allocates, and an
overhead.

On a Mac whose server offloads to Metal, what a configuration may take is not the free RAM:
the GPU holds at most Metal's recommended working set (``recommendedMaxWorkingSetSize``,
which llama-server logs at start), about two thirds to three quarters of the RAM.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.engine.base.records import StartupFacts
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.models.memory import (
    DEFAULT_OVERHEAD_MIB,
    MIB,
    ModelFacts,
    kv_layout,
    server_memory,
    state_mib,
)
from workbench.engine.models.sliding_window import DEFAULT_UBATCH, micro_batch

BUILTIN_PROMPT_TOKENS = 80
"""About what a built-in prompt takes with a chat template (SmolLM2: 45 + 30 tokens)."""


def request_tokens(input_tokens: int, max_tokens: int) -> int:
    """The context one request takes: its prompt as the server counts it (``input_tokens``,
    else about a built-in prompt's) and the tokens it generates."""
    return (input_tokens or BUILTIN_PROMPT_TOKENS) + max_tokens


def context_shortfall(per_slot: int, need: int) -> str | None:
    """Why requests needing ``need`` tokens will not be served whole by a slot of
    ``per_slot``: llama-server refuses a prompt longer than the slot and stops generating
    when the slot fills up. None when they fit."""
    if need <= per_slot:
        return None
    return (
        f"each request gets {per_slot} tokens of context, less than the {need} it needs: "
        "requests will be refused or cut short"
    )


@dataclass(frozen=True)
class PlanRow:
    ctx: int
    slots: int
    unified: bool
    ctx_per_request: int
    kv_mib: float  # the recurrent state too, where the model has one
    total_mib: float
    fit: str  # fits / tight / does not fit
    warning: str = ""
    state_mib: float = 0.0  # a recurrent or hybrid model's fixed state, in kv_mib


TIGHT_FRACTION = 0.8  # above this share of available memory, other programs will feel it
METAL_WORKING_SET = "Metal's working set"


def usable_memory(available_bytes: int, where: str, facts: StartupFacts | None) -> tuple[int, str]:
    """The memory a configuration may take and what it is: ``available_bytes`` (``where``
    says what they are), or less where a server's startup facts say its GPU holds less: a
    server that offloaded layers to Metal gets at most Metal's working set. A server that
    offloaded some layers only still holds the rest in the same RAM, so the smaller figure
    is the one to plan for either way."""
    if facts is None or facts.layers_offloaded == 0:  # nothing on the GPU: the RAM is the limit
        return available_bytes, where
    limit = facts.metal_working_set_bytes
    if limit is None or not 0 < limit < available_bytes:
        return available_bytes, where
    return limit, METAL_WORKING_SET


def plan(
    model: ModelFacts,
    ctxs: list[int],
    slot_counts: list[int],
    available_bytes: int,
    unified: bool = False,
    type_k: str = "f16",
    type_v: str = "f16",
    overhead_mib: float = DEFAULT_OVERHEAD_MIB,
    need_tokens: int = 0,
    facts: StartupFacts | None = None,
    per_slot: int | None = None,
    ubatch: int = DEFAULT_UBATCH,
    swa_full: bool = False,
) -> list[PlanRow]:
    """Every (ctx, slots) pair: memory it takes and whether it fits in ``available_bytes``,
    or in less where ``facts`` (a server's startup facts on this machine) say its GPU holds
    less (``usable_memory``); warns when a request would get less context than it needs
    (prompt + max tokens). With ``per_slot`` (``--kv-unified-per-slot``) each slot count's
    pool is its own (slots x per_slot), whatever ``ctxs`` say. ``ubatch`` and ``swa_full``
    size a sliding-window model's windowed cache."""
    available_mib = usable_memory(available_bytes, "", facts)[0] / MIB
    rows = []
    for ctx in ctxs if per_slot is None else ctxs[:1]:
        for slots in slot_counts:
            layout = kv_layout(ctx, slots, unified, per_slot)
            memory = server_memory(
                model,
                ctx,
                slots,
                unified,
                type_k,
                type_v,
                overhead_mib,
                per_slot,
                ubatch,
                swa_full,
            )
            total = memory.total_mib
            fit = (
                "does not fit"
                if total > available_mib
                else "tight"
                if total > TIGHT_FRACTION * available_mib
                else "fits"
            )
            warning = context_shortfall(layout.cells_per_slot, need_tokens) or ""
            if not warning and model.train_ctx and layout.cells_per_slot > model.train_ctx:
                warning = f"beyond the model's training context ({model.train_ctx})"
            rows.append(
                PlanRow(
                    ctx=ctx if per_slot is None else layout.slots * per_slot,
                    slots=layout.slots,
                    unified=layout.unified,
                    ctx_per_request=layout.cells_per_slot,
                    kv_mib=memory.kv_mib,
                    total_mib=total,
                    fit=fit,
                    warning=warning,
                    state_mib=state_mib(model, layout.slots),
                )
            )
    return rows


def plan_settings(
    model: ModelFacts, settings: ServerSettings, available_bytes: int, need_tokens: int = 0
) -> PlanRow:
    """One configuration's row from its typed settings (context, slots, unified pool or a
    per-slot limit, K and V types, micro-batch, ``--swa-full`` among its extra arguments):
    the one figure ``tune``'s memory filter and the Capacity panel both give."""
    s = settings
    return plan(
        model,
        [s.ctx or model.train_ctx],
        [s.slots],
        available_bytes,
        unified=bool(s.kv_unified),
        type_k=s.cache_type_k or "f16",
        type_v=s.cache_type_v or "f16",
        need_tokens=need_tokens,
        per_slot=s.kv_unified_per_slot,
        ubatch=micro_batch(s.batch_size, s.ubatch_size),
        swa_full="--swa-full" in s.extra_args,
    )[0]
