"""Model files and shapes the models tests and the planner's share: a small GGUF with the
default model's KV shape, a Gemma-3-270M-shaped header with a sliding window, a
header of any recurrent or hybrid architecture, and a Llama-3-8B shape."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from workbench.engine.models.buffers import Shape
from workbench.engine.models.memory import MIB, ModelFacts


def written(writer: gguf.GGUFWriter, path: Path) -> Path:
    """``writer``'s header, keys and tensors written to ``path``, closed."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_small_model(path: Path) -> Path:
    """A GGUF header with the default model's KV shape (30 layers, 3 KV heads of 64) and
    one small tensor: what the plan command reads, without parsing a 49k-token vocabulary."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("Small")
    writer.add_block_count(30)
    writer.add_embedding_length(576)
    writer.add_head_count(9)
    writer.add_head_count_kv(3)
    writer.add_context_length(8192)
    writer.add_file_type(3)  # Q4_1
    writer.add_tensor("token_embd.weight", np.zeros((64, 16), dtype=np.float32))
    return written(writer, path)


def write_windowed_model(
    path: Path, arch: str, window: int | None, pattern: int | list[bool] | None = None
) -> Path:
    """A Gemma-3-270M-shaped GGUF header (no tensors): what the memory estimate reads."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("Windowed")
    writer.add_block_count(18)
    writer.add_embedding_length(640)
    writer.add_feed_forward_length(2048)
    writer.add_vocab_size(262144)
    writer.add_head_count(4)
    writer.add_head_count_kv(1)
    writer.add_key_length(256)
    writer.add_value_length(256)
    writer.add_context_length(32768)
    if window is not None:
        writer.add_sliding_window(window)
    if pattern is not None:
        writer.add_sliding_window_pattern(pattern)
    return written(writer, path)


LLAMA_8B_SHAPE = ModelFacts(
    "m.gguf",
    "llama",
    "m",
    1000 * MIB,
    1000 * MIB,
    layers=32,
    kv_heads=(8,) * 32,
    head_k=128,
    head_v=128,
    train_ctx=32768,
    quantization="Q4_K_M",
    shape=Shape(
        vocab=128256, embedding=4096, feed_forward=14336, heads=32, head_k=128, repacked_bytes=0
    ),
)


def write_recurrent_model(
    path: Path, arch: str, layers: int, embedding: int, keys: dict[str, int | list[int]]
) -> Path:
    """A GGUF header of ``arch`` (no tensors) with ``keys`` under ``{arch}.``: unsigned
    numbers, or one a layer."""
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name("Recurrent")
    writer.add_block_count(layers)
    writer.add_embedding_length(embedding)
    for key, value in keys.items():
        if isinstance(value, list):
            writer.add_array(f"{arch}.{key}", value)
        else:
            writer.add_uint32(f"{arch}.{key}", value)
    return written(writer, path)
