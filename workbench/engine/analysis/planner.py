"""Memory direction of capacity: which slot layouts fit in this machine's memory, and
whether each request's context fits in a slot. What a layout takes is ``models.memory``'s
(``server_memory``): the weights, the KV cache of the cells llama-server allocates, its compute
and output buffers and the process's own use.

On a Mac whose server offloads to Metal, what a configuration may take is not the free RAM:
the GPU holds at most Metal's recommended working set (``recommendedMaxWorkingSetSize``,
which llama-server logs at start), about two thirds to three quarters of the RAM.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from workbench.engine.base.records import StartupFacts
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.models.memory import (
    MIB,
    KvLayout,
    Memory,
    ModelFacts,
    kv_layout,
    layout_of,
    server_memory,
    settings_memory,
    slot_context,
    state_mib,
)
from workbench.engine.models.sliding_window import DEFAULT_UBATCH

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
    total_mib: float  # weights + KV + compute + runtime
    fit: str  # fits / tight / does not fit
    warning: str = ""
    state_mib: float = 0.0  # a recurrent or hybrid model's fixed state, in kv_mib
    compute_mib: float = 0.0  # compute and output buffers
    runtime_mib: float = 0.0  # the process's own use beyond its buffers


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
    runtime: float | None = None,
    need_tokens: int = 0,
    facts: StartupFacts | None = None,
    per_slot: int | None = None,
    ubatch: int = DEFAULT_UBATCH,
    swa_full: bool = False,
    flash_attn: bool = True,
    repack: bool = True,
) -> list[PlanRow]:
    """Every (ctx, slots) pair: memory it takes and whether it fits in ``available_bytes``,
    or in less where ``facts`` (a server's startup facts on this machine) say its GPU holds
    less (``usable_memory``); warns when a request would get less context than it needs
    (prompt + max tokens). With ``per_slot`` (``--kv-unified-per-slot``) each slot count's
    pool is its own (slots x per_slot), whatever ``ctxs`` say. ``ubatch`` and ``swa_full``
    size a sliding-window model's windowed cache and, with ``flash_attn``, the compute buffer;
    ``repack`` counts the weights the CPU backend repacks (not where a GPU holds them);
    ``runtime`` replaces the estimate of the process's own use."""
    available_mib = usable_memory(available_bytes, "", facts)[0] / MIB
    rows = []
    for ctx in ctxs if per_slot is None else ctxs[:1]:
        for slots in slot_counts:
            memory = server_memory(
                model,
                ctx,
                slots,
                unified,
                type_k,
                type_v,
                per_slot,
                ubatch,
                swa_full,
                flash_attn,
                repack,
                runtime,
            )
            layout = kv_layout(ctx, slots, unified, per_slot)
            rows.append(plan_row(model, memory, layout, available_mib, need_tokens, ctx, per_slot))
    return rows


def plan_row(
    model: ModelFacts,
    memory: Memory,
    layout: KvLayout,
    available_mib: float,
    need_tokens: int,
    ctx: int,
    per_slot: int | None,
) -> PlanRow:
    """One layout's row: what it takes, whether that fits, and the context a request gets
    (a slot's cells, never more than the model's training context)."""
    total = memory.total_mib
    fit = (
        "does not fit"
        if total > available_mib
        else "tight"
        if total > TIGHT_FRACTION * available_mib
        else "fits"
    )
    per_request = slot_context(layout.cells_per_slot, model.train_ctx)
    warning = context_shortfall(per_request, need_tokens) or ""
    if not warning and per_request < layout.cells_per_slot:
        warning = (
            f"llama-server caps a slot at the model's training context ({model.train_ctx}): "
            "the KV cells beyond it are allocated, never used"
        )
    return PlanRow(
        ctx=ctx if per_slot is None else layout.slots * per_slot,
        slots=layout.slots,
        unified=layout.unified,
        ctx_per_request=per_request,
        kv_mib=memory.kv_mib,
        total_mib=total,
        fit=fit,
        warning=warning,
        state_mib=state_mib(model, layout.slots),
        compute_mib=memory.compute_mib,
        runtime_mib=memory.runtime_mib,
    )


def plan_settings(
    model: ModelFacts, settings: ServerSettings, available_bytes: int, need_tokens: int = 0
) -> PlanRow:
    """One configuration's row from its typed settings (``models.memory.settings_memory``):
    the one figure ``tune``'s memory filter and the Capacity panel both give."""
    ctx = settings.ctx or model.train_ctx
    return plan_row(
        model,
        settings_memory(model, settings),
        layout_of(replace(settings, ctx=ctx)),
        available_bytes / MIB,
        need_tokens,
        ctx,
        settings.kv_unified_per_slot,
    )
