"""What a server configuration takes in memory: the one memory function (``server_memory``)
and the cell layout it stands on (``kv_layout``), for the planner, the tune's memory filter,
the predictor's slots, the run's context check, the verdicts and the figures alike.

A server holds its weights (and the copies the CPU backend repacks), its KV cache, its compute
and output buffers and the process's own use (``models.buffers``). KV bytes per token = sum
over layers of KV heads x (K head size x bytes per K element + V head size x bytes per V
element), the shape read from the GGUF header
(``read_model_facts``). llama-server gives each of N explicit slots ``pad256(ctx / N)`` cells
(so the total can exceed ``-c``); with a unified cache (``-kvu``, or ``-np -1``) all slots
share one pool of ``pad256(ctx)`` cells and a single request may use all of it. With
``--kv-unified-per-slot N`` the pool is sized for N a slot (``-c`` is N x slots) and a request
uses at most N of it. Checked against the server's own log line ``llama_kv_cache: size = ...``
in the tests.

A sliding-window model's windowed layers hold a smaller cache of their own beside it
(``models.sliding_window``): ``kv_caches`` gives the two apart. A recurrent or hybrid model's
recurrent layers hold a fixed state per sequence instead (``models.recurrent``): only its
attention layers count KV heads, and ``kv_caches`` gives the state apart.

What a server that ran says of itself (its startup log's buffers, ``StartupFacts``) is read
into the same ``Memory`` (``logged_memory``), and its KV bytes per token from the same cells
(``logged_kv_bytes_per_token``), so the plan, the memory plot and the roofline add up one way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from workbench.engine.base.errors import ModelFileError
from workbench.engine.base.records import StartupFacts
from workbench.engine.config.server_settings import AUTO_SLOTS, ServerSettings
from workbench.engine.models.buffers import (
    Shape,
    compute_bytes,
    output_bytes,
    read_shape,
    runtime_mib,
)
from workbench.engine.models.gguf_header import FILE_TYPES, Value, read_gguf_header
from workbench.engine.models.recurrent import RecurrentState, per_layer, read_recurrent
from workbench.engine.models.sliding_window import (
    DEFAULT_UBATCH,
    SlidingWindow,
    micro_batch,
    read_window,
    windowed_cells,
)

MIB = 2**20
CELL_PAD = 256
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
    """What the memory estimate needs from a model's GGUF header."""

    path: str
    architecture: str
    name: str
    file_bytes: int
    tensor_bytes: int
    layers: int
    kv_heads: tuple[int, ...]  # per layer; 0 where the layer holds no KV cache
    head_k: int
    head_v: int
    train_ctx: int
    quantization: str
    shape: Shape  # what the compute and output buffers grow with
    window: SlidingWindow | None = None  # None: every layer holds a full cache
    window_note: str = ""  # why a model with a window is counted as if it had none
    recurrent: RecurrentState | None = None  # None: no layer holds a recurrent state
    recurrent_note: str = ""  # why a model with a state is counted as if it had none


def read_model_facts(path: str | Path) -> ModelFacts:
    """What the KV estimate needs, from the GGUF header (no weights or vocabulary are
    loaded)."""
    p = Path(path)
    header = read_gguf_header(p)
    fields = header.fields
    arch = fields.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelFileError(f"{p} has no general.architecture key: not a model GGUF")

    def need(key: str, default: int | None = None) -> Value:
        value = fields.get(f"{arch}.{key}", default)
        if value is None:
            raise ModelFileError(
                f"{p}: architecture '{arch}' lacks '{arch}.{key}', which the KV estimate "
                "needs (not a transformer with a KV cache, or an unusual converter)"
            )
        return value

    layers = int(need("block_count"))
    embedding = int(need("embedding_length"))
    state, state_note = read_recurrent(fields, arch, layers, embedding)
    no_kv = 0 if state is not None and not any(state.attention) else None  # Mamba, RWKV
    kv_heads = per_layer(need("attention.head_count_kv", no_kv), layers)
    if state is not None:
        kv_heads = tuple(h if a else 0 for h, a in zip(kv_heads, state.attention, strict=True))
    heads = need("attention.head_count", no_kv)
    first_heads = int(heads[0] if isinstance(heads, tuple) else heads)
    head_k = fields.get(f"{arch}.attention.key_length") or embedding // max(first_heads, 1)
    head_v = fields.get(f"{arch}.attention.value_length") or head_k
    train_ctx = int(fields.get(f"{arch}.context_length") or 0)
    file_type = fields.get("general.file_type")
    window, window_note = read_window(fields, arch, layers)
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
        shape=read_shape(fields, header.tensors, arch, int(head_k)),
        window=window,
        window_note=window_note,
        recurrent=state,
        recurrent_note=state_note,
    )


def bytes_per_element(kv_type: str) -> float:
    """What one element of a KV cache type (``-ctk`` / ``-ctv``) takes."""
    try:
        return BYTES_PER_ELEMENT[kv_type]
    except KeyError:
        raise ModelFileError(
            f"unknown KV cache type {kv_type!r}: use one of {', '.join(BYTES_PER_ELEMENT)}"
        ) from None


def layer_kv_bytes(model: ModelFacts, type_k: str = "f16", type_v: str = "f16") -> list[float]:
    """The KV cache one token takes in each layer."""
    k, v = bytes_per_element(type_k), bytes_per_element(type_v)
    return [heads * (model.head_k * k + model.head_v * v) for heads in model.kv_heads]


def kv_bytes_per_token(model: ModelFacts, type_k: str = "f16", type_v: str = "f16") -> float:
    """The KV cache one token takes, all layers together."""
    return sum(layer_kv_bytes(model, type_k, type_v))


def pad_cells(n: int) -> int:
    return max(CELL_PAD, math.ceil(n / CELL_PAD) * CELL_PAD)


@dataclass(frozen=True)
class KvLayout:
    slots: int
    unified: bool
    cells_per_slot: int  # context a single request can use
    total_cells: int


def kv_layout(ctx: int, slots: int, unified: bool = False, per_slot: int | None = None) -> KvLayout:
    """The cells llama-server allocates for ``-c ctx -np slots`` (``-np -1`` = 4, unified);
    with ``--kv-unified-per-slot per_slot`` the pool is ``slots x per_slot`` (the server's own
    size for it without ``-c``, and the ``-c`` the workbench gives it) and a request uses at
    most ``per_slot`` of it: the server caps each slot's context at exactly that."""
    if slots == -1:
        slots, unified = AUTO_SLOTS, True
    if per_slot is not None:
        layout = kv_layout(slots * per_slot, slots, unified)
        return replace(layout, cells_per_slot=min(per_slot, layout.cells_per_slot))
    if unified:
        cells = pad_cells(ctx)
        return KvLayout(slots, True, cells, cells)
    cells = pad_cells(ctx // slots)
    return KvLayout(slots, False, cells, cells * slots)


def slot_context(cells_per_slot: int, train_ctx: int) -> int:
    """The context a request gets in a slot of ``cells_per_slot``: llama-server caps a slot at
    the model's training context ``train_ctx`` (0: not known), though it allocates every cell
    (SmolLM2 at ``-np 1 -c 32768``: ``n_ctx_slot = 8192``)."""
    return min(cells_per_slot, train_ctx) if train_ctx else cells_per_slot


def layout_of(settings: ServerSettings) -> KvLayout:
    """The cells a managed server of ``settings`` holds (``kv_layout`` of its flags)."""
    return kv_layout(
        settings.ctx, settings.slots, bool(settings.kv_unified), settings.kv_unified_per_slot
    )


def state_mib(model: ModelFacts, slots: int) -> float:
    """The recurrent layers' state of a server with ``slots`` slots (0 for a transformer):
    one sequence's state a slot, whatever the context (``models.recurrent``)."""
    return model.recurrent.bytes_for(slots) / MIB if model.recurrent else 0.0


@dataclass(frozen=True)
class KvCaches:
    """The KV cache apart: the layers holding the full layout, the windowed ones and the
    recurrent layers' fixed state."""

    full_mib: float
    windowed_mib: float = 0.0
    windowed_cells: int = 0  # all streams together
    state_mib: float = 0.0

    @property
    def total_mib(self) -> float:
        return self.full_mib + self.windowed_mib + self.state_mib


def kv_caches(
    model: ModelFacts,
    layout: KvLayout,
    type_k: str = "f16",
    type_v: str = "f16",
    ubatch: int = DEFAULT_UBATCH,
    swa_full: bool = False,
) -> KvCaches:
    """The KV that ``layout`` takes: every full layer at its cells, every windowed layer at
    the windowed cache's (``sliding_window.windowed_cells``), and every recurrent layer's
    state once a slot (f32, whatever ``type_k`` and ``type_v``)."""
    per_layer = layer_kv_bytes(model, type_k, type_v)
    window = model.window
    state = state_mib(model, layout.slots)
    if window is None:
        return KvCaches(layout.total_cells * sum(per_layer) / MIB, state_mib=state)
    cells = windowed_cells(
        layout.total_cells, layout.slots, layout.unified, window.tokens, ubatch, swa_full
    )
    full = sum(b for b, w in zip(per_layer, window.windowed, strict=True) if not w)
    windowed = sum(b for b, w in zip(per_layer, window.windowed, strict=True) if w)
    return KvCaches(layout.total_cells * full / MIB, cells * windowed / MIB, cells, state)


@dataclass(frozen=True)
class Memory:
    """What a server holds, in MiB: its weights (with the copies the CPU backend repacks),
    its KV cache, its compute and output buffers, and the process's own use beyond them."""

    weights_mib: float
    kv_mib: float
    compute_mib: float
    runtime_mib: float = 0.0

    @property
    def buffers_mib(self) -> float:
        """What the server's startup log accounts for."""
        return self.weights_mib + self.kv_mib + self.compute_mib

    @property
    def total_mib(self) -> float:
        return self.buffers_mib + self.runtime_mib


def stream_cells(model: ModelFacts, layout: KvLayout, caches: KvCaches) -> list[int]:
    """The cells of one stream of each KV cache the model has (its full layers', its
    windowed layers'): what an attention mask spans."""
    streams = 1 if layout.unified else layout.slots
    window = model.window
    windowed = window.windowed if window else (False,) * model.layers
    cells = []
    if any(h for h, w in zip(model.kv_heads, windowed, strict=True) if not w):
        cells.append(layout.total_cells // streams)
    if caches.windowed_cells:
        cells.append(caches.windowed_cells // streams)
    return cells


def server_memory(
    model: ModelFacts,
    ctx: int,
    slots: int,
    unified: bool = False,
    type_k: str = "f16",
    type_v: str = "f16",
    per_slot: int | None = None,
    ubatch: int = DEFAULT_UBATCH,
    swa_full: bool = False,
    flash_attn: bool = True,
    repack: bool = True,
    runtime: float | None = None,
) -> Memory:
    """The memory llama-server takes for this model with ``-c ctx -np slots`` (``-kvu``,
    ``-ctk type_k -ctv type_v``, ``--kv-unified-per-slot per_slot``, ``-ub ubatch``,
    ``--swa-full``, ``-fa off`` where not ``flash_attn``): the weights' tensors and, where
    the CPU backend runs them (``repack``), its repacked copies; the KV of the cells
    ``kv_layout`` allocates (``kv_caches``); the compute and output buffers
    (``models.buffers``); and ``runtime`` MiB of its own (None: the estimate for the model)."""
    layout = kv_layout(ctx, slots, unified, per_slot)
    caches = kv_caches(model, layout, type_k, type_v, ubatch, swa_full)
    shape = model.shape
    compute = compute_bytes(
        shape, ubatch, stream_cells(model, layout, caches), layout.slots, flash_attn
    )
    return Memory(
        weights_mib=(model.tensor_bytes + (shape.repacked_bytes if repack else 0)) / MIB,
        kv_mib=caches.total_mib,
        compute_mib=(compute + output_bytes(shape, layout.slots)) / MIB,
        runtime_mib=runtime_mib(shape) if runtime is None else runtime,
    )


def settings_memory(model: ModelFacts, settings: ServerSettings) -> Memory:
    """``server_memory`` of a managed server's typed settings (context, slots, unified pool or
    a per-slot limit, K and V types, micro-batch, flash attention, ``--swa-full`` among its
    extra arguments): the one figure the plan, ``tune``'s memory filter and the Capacity panel
    give for a configuration."""
    s = settings
    return server_memory(
        model,
        s.ctx or model.train_ctx,
        s.slots,
        bool(s.kv_unified),
        s.cache_type_k or "f16",
        s.cache_type_v or "f16",
        s.kv_unified_per_slot,
        micro_batch(s.batch_size, s.ubatch_size),
        "--swa-full" in s.extra_args,
        s.flash_attn != "off",
    )


def logged_layout(facts: StartupFacts) -> KvLayout | None:
    """The cells a started server says it holds (its slots and context per slot); None when
    its log did not give the context per slot. A unified pool is its whole context (``n_ctx``),
    more than a slot's where ``--kv-unified-per-slot`` caps each slot."""
    per_slot = facts.n_ctx_slot
    if per_slot is None:
        return None
    slots = facts.n_slots if facts.n_slots is not None else 1
    if facts.kv_unified:
        return KvLayout(slots, True, per_slot, max(per_slot, facts.n_ctx or 0))
    return KvLayout(slots, False, per_slot, per_slot * slots)


def logged_memory(facts: StartupFacts) -> Memory | None:
    """Model + KV (and a recurrent state) + compute (and output) buffers, as the server logged
    them at start-up; None unless it logged model, KV and compute. A prediction missing a
    part would read the part's size as the runtime's own use (what the measured memory above
    the buffers is taken for)."""
    model, kv, compute = facts.model_buffer_mib, facts.kv_buffer_mib, facts.compute_buffer_mib
    if model is None or kv is None or compute is None:
        return None
    state = facts.state_buffer_mib or 0.0
    return Memory(
        float(model), float(kv) + state, float(compute) + (facts.output_buffer_mib or 0.0)
    )


def logged_kv_bytes_per_token(facts: StartupFacts) -> float | None:
    """From what the server logged: its KV buffer over the cells it holds."""
    layout = logged_layout(facts)
    if facts.kv_buffer_mib is None or layout is None:
        return None
    return facts.kv_buffer_mib * MIB / layout.total_cells if layout.total_cells else None
