"""The compute and output buffers, the repacked weights and the runtime against what
llama-server b11434 logged for the two real models (CPU, this session's grid): the rule's
arithmetic, without a server. ``test_footprint_on_server`` checks the same against a server
started for each cell."""

from __future__ import annotations

import pytest

from tests.engine.models.made_models import LLAMA_8B_SHAPE
from workbench.engine.models.buffers import (
    MIB,
    Shape,
    compute_bytes,
    output_bytes,
    read_shape,
    runtime_mib,
)
from workbench.engine.models.gguf_header import TensorInfo

SMOLLM2 = Shape(vocab=49152, embedding=576, feed_forward=1536, heads=9, head_k=64, repacked_bytes=0)
GEMMA3 = Shape(
    vocab=262144, embedding=640, feed_forward=2048, heads=4, head_k=256, repacked_bytes=0
)

# model, -ub, cells a stream of each cache, sequences, flash attention, logged compute MiB
LOGGED = [
    (SMOLLM2, 512, [4096], 1, True, 18.64),  # -c 4096 -np 1
    (SMOLLM2, 512, [1024], 4, True, 15.64),  # -c 4096 -np 4
    (SMOLLM2, 512, [32768], 4, True, 46.64),  # -c 32768 -np 4 -kvu
    (SMOLLM2, 64, [4096], 4, True, 2.33),  # -c 4096 -np -1 -ub 64
    (SMOLLM2, 2048, [16384], 2, True, 122.57),  # -c 32768 -np 2 -ub 2048
    (SMOLLM2, 256, [2048], 2, True, 8.32),  # -c 4096 -np 2 -ub 256 -b 256
    (SMOLLM2, 512, [2048], 2, False, 47.51),  # -c 4096 -np 2 -fa off
    (SMOLLM2, 512, [16384], 2, False, 327.51),  # -c 32768 -np 2 -fa off
    (GEMMA3, 512, [4096, 1024], 1, True, 23.28),  # -c 4096 -np 1
    (GEMMA3, 512, [4096, 1536], 2, True, 23.78),  # -c 4096 -np 2 -kvu
    (GEMMA3, 512, [8192, 8192], 1, True, 34.28),  # -c 8192 -np 1 --swa-full
    (GEMMA3, 512, [32768, 2560], 4, True, 52.78),  # -c 32768 -np -1
    (GEMMA3, 2048, [16384, 2560], 2, True, 147.11),  # -c 32768 -np 2 -ub 2048
    (GEMMA3, 64, [4096, 2304], 4, True, 5.57),  # -c 4096 -np -1 -ub 64: the logits' turn
    (GEMMA3, 64, [32768, 2304], 4, True, 6.57),  # -c 32768 -np -1 -ub 64
    (GEMMA3, 512, [2048, 1024], 2, False, 34.27),  # -c 4096 -np 2 -fa off
    (GEMMA3, 512, [16384, 1024], 2, False, 174.27),  # -c 32768 -np 2 -fa off
]


@pytest.mark.parametrize(("shape", "ubatch", "cells", "sequences", "flash", "logged"), LOGGED)
def test_the_compute_buffer_is_what_the_server_logged(
    shape, ubatch, cells, sequences, flash, logged
):
    """Within 2 MiB of the logged buffer, at most 2 % of the two models' footprints (about
    200 and 300 MiB); most cells within 0.1 MiB."""
    assert compute_bytes(shape, ubatch, cells, sequences, flash) / MIB == pytest.approx(
        logged, abs=2.0
    )


def test_the_compute_buffer_grows_with_the_micro_batch_and_the_cells():
    small = compute_bytes(SMOLLM2, 512, [4096], 1)
    assert compute_bytes(SMOLLM2, 1024, [4096], 1) == 2 * small
    assert compute_bytes(SMOLLM2, 512, [8192], 1) - small == 512 * 2 * 4096  # an f16 mask
    assert compute_bytes(SMOLLM2, 512, [4096], 1, flash_attn=False) > 2 * small


def test_the_output_buffer_holds_a_tokens_logits_a_sequence():
    assert output_bytes(SMOLLM2, 1) / MIB == pytest.approx(0.19, abs=0.005)
    assert output_bytes(GEMMA3, 4) / MIB == 4.0


def test_the_runtime_grows_with_the_vocabulary():
    assert runtime_mib(SMOLLM2) == pytest.approx(36.0, abs=0.1)
    assert runtime_mib(GEMMA3) == 62.0
    assert runtime_mib(LLAMA_8B_SHAPE.shape) > runtime_mib(SMOLLM2)


def test_the_shape_and_the_repacked_weights_from_a_header():
    """Gemma 3 270M Q4_K_M's 12.66 MiB of Q4_K matrices are what its CPU_REPACK buffer held;
    its Q8_0 token embeddings and a matrix whose rows do not come in eights are not."""
    tensors = [
        TensorInfo("token_embd.weight", (640, 262144), 8, 0),
        TensorInfo("blk.0.attn_output.weight", (1024, 640), 12, 0),
        TensorInfo("blk.0.ffn_down.weight", (2048, 640), 12, 0),
        TensorInfo("blk.0.ffn_up.weight", (640, 2048), 14, 0),
        TensorInfo("blk.0.odd.weight", (256, 12), 12, 0),
        TensorInfo("blk.0.attn_norm.weight", (640,), 0, 0),
    ]
    fields = {
        "gemma3.embedding_length": 640,
        "gemma3.feed_forward_length": (2048,) * 18,
        "gemma3.attention.head_count": 4,
    }
    shape = read_shape(fields, tensors, "gemma3", 256)
    assert shape == Shape(262144, 640, 2048, 4, 256, (1024 + 2048) * 640 * 144 // 256)
    moe = read_shape(
        {"m.expert_feed_forward_length": 768, "m.expert_used_count": 8, "m.vocab_size": 1000},
        [],
        "m",
        128,
    )
    assert (moe.feed_forward, moe.vocab, moe.repacked_bytes) == (768 * 8, 1000, 0)
