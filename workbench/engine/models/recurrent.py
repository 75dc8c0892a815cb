"""Recurrent and hybrid models (Mamba, RWKV, LFM2, Granite 4.0-H, Jamba, Nemotron-H,
Falcon-H1, Qwen3-Next): which layers keep a fixed state per sequence instead of a KV cache
that grows with the context, and how large that state is.

llama.cpp holds such a model's memory in ``llama_memory_recurrent`` (src/llama-memory-
recurrent.cpp, its constructor), beside a KV cache of the attention layers only for a hybrid
(``llama_memory_hybrid``). Each recurrent layer gets two f32 tensors, ``r_l`` of
``n_embd_r()`` and ``s_l`` of ``n_embd_s()`` floats a row (src/llama-hparams.cpp), with one
row per cell; ``llama_model::create_memory`` (src/llama-model.cpp) makes
``max(1, n_seq_max)`` cells, one a sequence, and passes ``GGML_TYPE_F32`` for both whatever
``-ctk``/``-ctv`` say. llama-server's ``n_seq_max`` is its slot count (``-np``), unified pool
or not. ``n_rs_seq`` rollback rows (``1 + n_rs_seq`` rows a cell, for speculative drafts)
are not counted: a plain server has none.

Which layers are recurrent is set per architecture in the hparams loading
(``hparams.recurrent_layer_arr``): all of them for a recurrent architecture
(``llm_arch_is_recurrent``, and Falcon-H1, whose layers hold both); those whose
``{arch}.attention.head_count_kv`` is 0 for Jamba, Granite hybrids and LFM2 (and also no
feed-forward, ``n_ff`` 0, for Nemotron-H); all but every ``{arch}.full_attention_interval``-th
(4 by default) for Qwen3-Next. A hybrid's KV is held by its attention layers only
(``filter_attn``). An architecture not in ``ARCHITECTURES`` with recurrent keys in its header
is counted here as if every layer held a full KV cache; ``read_recurrent`` says so in a note.
These rules are modelled from the source and not yet checked on a server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from workbench.engine.models.gguf_header import Value

STATE_BYTES = 4  # r and s are f32 (llama_model::create_memory)
DEFAULT_TOKEN_SHIFT = 2  # llama_hparams::token_shift_count when the GGUF has none
DEFAULT_FULL_ATTENTION_INTERVAL = 4  # Qwen3-Next's, when the GGUF has none


@dataclass(frozen=True)
class LayerShape:
    """What the hparams loading reads for one layer: its KV heads and feed-forward size."""

    kv_heads: int
    ff: int


# Per architecture (GGUF name), which layers are recurrent and which hold a KV cache.
Rule = Callable[[int, LayerShape, int], tuple[bool, bool]]  # (layer, shape, interval)


def _all_recurrent(i: int, shape: LayerShape, interval: int) -> tuple[bool, bool]:
    return True, False


def _no_kv_heads(i: int, shape: LayerShape, interval: int) -> tuple[bool, bool]:
    return shape.kv_heads == 0, shape.kv_heads > 0


def _no_kv_heads_no_ff(i: int, shape: LayerShape, interval: int) -> tuple[bool, bool]:
    recurrent = shape.kv_heads == 0 and shape.ff == 0
    return recurrent, not recurrent and shape.ff == 0


def _both(i: int, shape: LayerShape, interval: int) -> tuple[bool, bool]:
    return True, True


def _interval(i: int, shape: LayerShape, interval: int) -> tuple[bool, bool]:
    recurrent = (i + 1) % interval != 0
    return recurrent, not recurrent


ARCHITECTURES: dict[str, Rule] = {
    "mamba": _all_recurrent,
    "mamba2": _all_recurrent,
    "rwkv6": _all_recurrent,
    "rwkv6qwen2": _all_recurrent,
    "rwkv7": _all_recurrent,
    "arwkv7": _all_recurrent,
    "jamba": _no_kv_heads,
    "granitehybrid": _no_kv_heads,
    "lfm2": _no_kv_heads,
    "lfm2moe": _no_kv_heads,
    "nemotron_h": _no_kv_heads_no_ff,
    "nemotron_h_moe": _no_kv_heads_no_ff,
    "falcon-h1": _both,
    "qwen3next": _interval,
}
# Mamba-1 style loaders read no ssm.group_count: their hparams keep ssm_n_group 0.
NO_GROUPS = frozenset({"mamba", "jamba"})
STATE_KEYS = ("ssm.conv_kernel", "ssm.state_size", "wkv.head_size", "shortconv.l_cache")


@dataclass(frozen=True)
class RecurrentState:
    """Per layer, whether it holds a recurrent state and whether it holds a KV cache; and
    the floats of one sequence's state in a recurrent layer (``n_embd_r``, ``n_embd_s``)."""

    recurrent: tuple[bool, ...]
    attention: tuple[bool, ...]
    r_floats: int
    s_floats: int

    @property
    def recurrent_layers(self) -> int:
        return sum(self.recurrent)

    @property
    def attention_layers(self) -> int:
        return sum(self.attention)

    @property
    def bytes_per_sequence(self) -> int:
        """What one sequence's state takes, all recurrent layers together."""
        return self.recurrent_layers * (self.r_floats + self.s_floats) * STATE_BYTES

    def bytes_for(self, slots: int) -> int:
        """The state of a server with ``slots`` sequences: ``max(1, n_seq_max)`` cells."""
        return max(1, slots) * self.bytes_per_sequence


def per_layer(value: Value | None, layers: int, default: int = 0) -> tuple[int, ...]:
    """A GGUF key that is one number for every layer or an array of one a layer."""
    if isinstance(value, tuple):
        return tuple(int(v) for v in value)
    return (int(value) if value is not None else default,) * layers


def state_floats(fields: Mapping[str, Value], arch: str, embedding: int) -> tuple[int, int]:
    """``llama_hparams::n_embd_r()`` and ``n_embd_s()`` (src/llama-hparams.cpp): RWKV's token
    shifts and wkv state, LFM2's short-convolution cache, else Mamba's conv and ssm states."""

    def key(name: str, default: int = 0) -> int:
        value = fields.get(f"{arch}.{name}")
        return int(value) if isinstance(value, int) and not isinstance(value, bool) else default

    head_size = key("wkv.head_size")
    if head_size:
        return key("token_shift_count", DEFAULT_TOKEN_SHIFT) * embedding, embedding * head_size
    d_inner, d_state = key("ssm.inner_size"), key("ssm.state_size")
    l_cache = key("shortconv.l_cache")
    if l_cache:
        r = embedding * (l_cache - 1)
    else:
        d_conv = key("ssm.conv_kernel")
        groups = 0 if arch in NO_GROUPS else key("ssm.group_count")
        r = max(d_conv - 1, 0) * (d_inner + 2 * groups * d_state)
    return r, d_state * d_inner


def read_recurrent(
    fields: Mapping[str, Value], arch: str, layers: int, embedding: int
) -> tuple[RecurrentState | None, str]:
    """The model's recurrent layers and state from its GGUF header (None for a transformer),
    and a note when it has a state this module does not know (then None: its memory is the
    full-cache bound)."""
    rule = ARCHITECTURES.get(arch)
    if rule is None:
        if any(f"{arch}.{k}" in fields for k in STATE_KEYS):
            return None, (
                f"architecture '{arch}' keeps a recurrent state, which is not modelled here: "
                "its memory is counted as a full KV cache on every layer, an upper bound"
            )
        return None, ""
    kv_heads = per_layer(fields.get(f"{arch}.attention.head_count_kv"), layers)
    ff = per_layer(fields.get(f"{arch}.feed_forward_length"), layers)
    interval = fields.get(f"{arch}.full_attention_interval")
    if not isinstance(interval, int) or isinstance(interval, bool) or interval <= 0:
        interval = DEFAULT_FULL_ATTENTION_INTERVAL
    if len(kv_heads) != layers or len(ff) != layers:
        return None, (
            f"{arch}'s per-layer heads or feed-forward sizes do not match its {layers} layers, "
            "so its recurrent layers are not known here: its memory is counted as a full KV "
            "cache on every layer, an upper bound"
        )
    shapes = [LayerShape(h, f) for h, f in zip(kv_heads, ff, strict=True)]
    flags = [rule(i, shape, interval) for i, shape in enumerate(shapes)]
    r, s = state_floats(fields, arch, embedding)
    return RecurrentState(
        recurrent=tuple(f[0] for f in flags),
        attention=tuple(f[1] for f in flags),
        r_floats=r,
        s_floats=s,
    ), ""
