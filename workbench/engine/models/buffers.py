"""What llama-server holds beside its weights and KV cache: the compute buffer its scheduler
reserves, the output buffer for the logits, the weights the CPU backend repacks, and the
process's own use. With these the plan adds up the whole footprint, not a fixed allowance.

The compute buffer is reserved once, for the worst micro-batch of ``-ub`` tokens. With flash
attention (llama-server's ``auto`` turns it on where the backend has it) the most that is alive
at once is one feed-forward block's f32 rows (three of ``n_ff``, five of ``n_embd`` a token)
beside every KV cache's attention mask (f16, one element a cell of a stream a token). Without
it, one layer's attention scores (f32, a cell a head a token) and an f32 mask are the peak.
The logits are reserved for one token a sequence (llama-server's ``n_outputs_max``), so a
262k-token vocabulary only dominates at a small ``-ub``. The rule was fitted and checked on
SmolLM2-135M and Gemma 3 270M against b11434's logged buffers; ``llama-fit-params`` reserves
logits for every token of the micro-batch and so reports several times more compute than the
server takes. For other shapes (mixture of experts, recurrent layers) it is an estimate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workbench.engine.models.gguf_header import TensorInfo, Value

F32 = 4
F16 = 2
MIB = 2**20
INPUTS_PER_TOKEN = 64  # the graph's small inputs (positions, output ids), a token, as fitted

# Weight types the CPU backend copies into its repacked layout (a ``CPU_REPACK model buffer``
# beside the mapped file) on x86-64 with AVX2 and on Arm: Q4_0, Q4_K and IQ4_NL matrices whose
# rows come in eights. The token embeddings are looked up, not multiplied, and stay as they are.
REPACKED_TYPES = frozenset({2, 12, 20})
REPACK_ROWS = 8

RUNTIME_BASE_MIB = 30.0  # the binary, its libraries, threads and the HTTP server
RUNTIME_BYTES_PER_TOKEN = 128  # the vocabulary's strings and lookup tables, a token


@dataclass(frozen=True)
class Shape:
    """The sizes the buffers grow with, from the GGUF header."""

    vocab: int
    embedding: int
    feed_forward: int  # a token's widest feed-forward block (the experts it uses, for MoE)
    heads: int
    head_k: int
    repacked_bytes: int  # weights the CPU backend holds a second, repacked copy of


def read_shape(
    fields: Mapping[str, Value], tensors: Sequence[TensorInfo], arch: str, head_k: int
) -> Shape:
    """The buffer sizes' inputs: the vocabulary from the token embeddings' rows (else
    ``ARCH.vocab_size``), the widest feed-forward block and the first layer's heads."""
    embeddings = next((t for t in tensors if t.name == "token_embd.weight"), None)
    vocab = embeddings.shape[1] if embeddings and len(embeddings.shape) > 1 else 0
    return Shape(
        vocab=vocab or _widest(fields.get(f"{arch}.vocab_size")),
        embedding=_widest(fields.get(f"{arch}.embedding_length")),
        feed_forward=_widest(fields.get(f"{arch}.feed_forward_length"))
        or _widest(fields.get(f"{arch}.expert_feed_forward_length"))
        * max(1, _widest(fields.get(f"{arch}.expert_used_count"))),
        heads=_widest(fields.get(f"{arch}.attention.head_count")),
        head_k=head_k,
        repacked_bytes=sum(
            t.n_bytes
            for t in tensors
            if t.ggml_type in REPACKED_TYPES
            and t.name != "token_embd.weight"
            and len(t.shape) > 1
            and t.shape[1] % REPACK_ROWS == 0
        ),
    )


def _widest(value: Value | None) -> int:
    """A size that may be one number or one a layer: the largest."""
    if isinstance(value, tuple):
        return max((int(v) for v in value if isinstance(v, int | float)), default=0)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def compute_bytes(
    shape: Shape,
    ubatch: int,
    stream_cells: Sequence[int],
    sequences: int,
    flash_attn: bool = True,
) -> int:
    """The compute buffer for micro-batches of ``ubatch`` tokens, KV caches of
    ``stream_cells`` cells a stream each (one a cache: the full layers', the windowed
    layers'), and logits for ``sequences`` tokens."""
    cells = sum(stream_cells)
    feed_forward = F32 * (3 * shape.feed_forward + 5 * shape.embedding) + INPUTS_PER_TOKEN
    if flash_attn:
        layers = ubatch * (feed_forward + F16 * cells)
    else:
        scores = F32 * shape.heads * max(stream_cells, default=0)
        attention = F32 * (5 * shape.embedding + 3 * shape.heads * shape.head_k) + scores
        layers = ubatch * (max(feed_forward, attention) + F32 * cells)
    logits = F32 * shape.vocab * sequences + F16 * ubatch * cells
    return max(layers, logits)


def output_bytes(shape: Shape, sequences: int) -> int:
    """The output buffer: one token's logits a sequence."""
    return F32 * shape.vocab * sequences


def runtime_mib(shape: Shape) -> float:
    """The process's own memory beyond its buffers, on Linux with the CPU backend (measured
    as resident memory less the logged buffers, about 36 MiB for a 49k vocabulary and 62 MiB
    for 262k); a GPU backend's driver context is not in it."""
    return RUNTIME_BASE_MIB + RUNTIME_BYTES_PER_TOKEN * shape.vocab / MIB
