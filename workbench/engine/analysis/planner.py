"""Memory direction of capacity: how much KV cache a slot layout takes, and which layouts
fit in this machine's memory.

KV bytes per token = sum over layers of KV heads x (K head size x bytes per K element +
V head size x bytes per V element). llama-server gives each of N explicit slots
``pad256(ctx / N)`` cells (so the total can exceed ``-c``); with a unified cache (``-kvu``, or
``-np -1``) all slots share one pool of ``pad256(ctx)`` cells and a single request may use all
of it. Checked against the server's own log line ``llama_kv_cache: size = ...`` in the tests.

On a Mac whose server offloads to Metal, what a configuration may take is not the free RAM:
the GPU holds at most Metal's recommended working set (``recommendedMaxWorkingSetSize``,
which llama-server logs at start), about two thirds to three quarters of the RAM.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.analysis.gguf_header import FILE_TYPES, Value, read_gguf_header
from workbench.engine.base.errors import ModelFileError
from workbench.engine.base.records import StartupFacts

MIB = 2**20
CELL_PAD = 256
AUTO_SLOTS = 4  # what -np -1 gives
# Bytes per element of each KV cache type (block size 32 for the quantised ones).
BYTES_PER_ELEMENT = {
    "f32": 4.0,
    "f16": 2.0,
    "bf16": 2.0,
    "q8_0": 34 / 32,
    "q4_0": 18 / 32,
    "q4_1": 20 / 32,
    "iq4_nl": 18 / 32,
    "q5_0": 22 / 32,
    "q5_1": 24 / 32,
}


@dataclass(frozen=True)
class ModelFacts:
    path: str
    architecture: str
    name: str
    file_bytes: int
    tensor_bytes: int
    layers: int
    kv_heads: tuple[int, ...]  # per layer
    head_k: int
    head_v: int
    train_ctx: int
    quantization: str

    def kv_bytes_per_token(self, type_k: str = "f16", type_v: str = "f16") -> float:
        k, v = _bytes_per_element(type_k), _bytes_per_element(type_v)
        return sum(heads * (self.head_k * k + self.head_v * v) for heads in self.kv_heads)


def _bytes_per_element(kv_type: str) -> float:
    try:
        return BYTES_PER_ELEMENT[kv_type]
    except KeyError:
        raise ModelFileError(
            f"unknown KV cache type {kv_type!r}: use one of {', '.join(BYTES_PER_ELEMENT)}"
        ) from None


def read_model_facts(path: str | Path) -> ModelFacts:
    """What the KV estimate needs, from the GGUF header (no weights or vocabulary are
    loaded)."""
    p = Path(path)
    header = read_gguf_header(p)
    fields = header.fields
    arch = fields.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelFileError(f"{p} has no general.architecture key: not a model GGUF")

    def need(key: str) -> Value:
        value = fields.get(f"{arch}.{key}")
        if value is None:
            raise ModelFileError(
                f"{p}: architecture '{arch}' lacks '{arch}.{key}', which the KV estimate "
                "needs (not a transformer with a KV cache, or an unusual converter)"
            )
        return value

    layers = int(need("block_count"))
    heads_kv = need("attention.head_count_kv")
    kv_heads = (
        tuple(int(h) for h in heads_kv)
        if isinstance(heads_kv, tuple)
        else (int(heads_kv),) * layers
    )
    embedding = int(need("embedding_length"))
    heads = need("attention.head_count")
    first_heads = int(heads[0] if isinstance(heads, tuple) else heads)
    head_k = fields.get(f"{arch}.attention.key_length") or embedding // first_heads
    head_v = fields.get(f"{arch}.attention.value_length") or head_k
    train_ctx = int(fields.get(f"{arch}.context_length") or 0)
    file_type = fields.get("general.file_type")
    return ModelFacts(
        path=str(p),
        architecture=arch,
        name=str(fields.get("general.name") or p.stem),
        file_bytes=p.stat().st_size,
        tensor_bytes=sum(t.n_bytes for t in header.tensors),
        layers=layers,
        kv_heads=kv_heads,
        head_k=int(head_k),
        head_v=int(head_v),
        train_ctx=train_ctx,
        quantization=FILE_TYPES.get(file_type, str(file_type)) if file_type is not None else "?",
    )


def pad_cells(n: int) -> int:
    return max(CELL_PAD, math.ceil(n / CELL_PAD) * CELL_PAD)


@dataclass(frozen=True)
class KvLayout:
    slots: int
    unified: bool
    cells_per_slot: int  # context a single request can use
    total_cells: int


def kv_layout(ctx: int, slots: int, unified: bool = False) -> KvLayout:
    """The cells llama-server allocates for ``-c ctx -np slots`` (``-np -1`` = 4, unified)."""
    if slots == -1:
        slots, unified = AUTO_SLOTS, True
    if unified:
        cells = pad_cells(ctx)
        return KvLayout(slots, True, cells, cells)
    per_slot = pad_cells(ctx // slots)
    return KvLayout(slots, False, per_slot, per_slot * slots)


def kv_mib(
    model: ModelFacts,
    ctx: int,
    slots: int,
    unified: bool = False,
    type_k: str = "f16",
    type_v: str = "f16",
) -> float:
    layout = kv_layout(ctx, slots, unified)
    return layout.total_cells * model.kv_bytes_per_token(type_k, type_v) / MIB


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
    kv_mib: float
    total_mib: float
    fit: str  # fits / tight / does not fit
    warning: str = ""


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
    overhead_mib: float = 128.0,
    need_tokens: int = 0,
    facts: StartupFacts | None = None,
) -> list[PlanRow]:
    """Every (ctx, slots) pair: memory it takes and whether it fits in ``available_bytes``,
    or in less where ``facts`` (a server's startup facts on this machine) say its GPU holds
    less (``usable_memory``); warns when a request would get less context than it needs
    (prompt + max tokens)."""
    available_mib = usable_memory(available_bytes, "", facts)[0] / MIB
    weights_mib = model.tensor_bytes / MIB
    rows = []
    for ctx in ctxs:
        for slots in slot_counts:
            layout = kv_layout(ctx, slots, unified)
            kv = kv_mib(model, ctx, slots, unified, type_k, type_v)
            total = weights_mib + kv + overhead_mib
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
                    ctx=ctx,
                    slots=layout.slots,
                    unified=layout.unified,
                    ctx_per_request=layout.cells_per_slot,
                    kv_mib=kv,
                    total_mib=total,
                    fit=fit,
                    warning=warning,
                )
            )
    return rows
