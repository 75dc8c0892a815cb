"""The memory function against the real llama-server's own buffers, a server started for each
cell of a grid on both real models (SmolLM2-135M, and Gemma 3 270M with its sliding window):
``-np`` 1/2/4/-1, ``-c`` 4096/8192/32768, f16 and q8_0 KV, ``--kv-unified`` on and off, and
``--swa-full`` on and off where the model has a window. The KV is the sum of its
``llama_kv_cache: size = ...`` lines within 1 %; the weights (mapped and repacked), KV, compute
and output buffers within 5 % of what it logged, the compute within 2 MiB."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from workbench.engine.analysis.planner import plan_settings
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.models.memory import (
    layout_of,
    logged_memory,
    read_model_facts,
    settings_memory,
)
from workbench.engine.server.llama_server import LlamaServer

GRID = [
    (slots, ctx, kv_type, unified)
    for slots, ctx, kv_type, unified in itertools.product(
        (1, 2, 4, -1), (4096, 8192, 32768), ("f16", "q8_0"), (False, True)
    )
    if not (slots == -1 and unified)  # -np -1 is a unified pool already
]


def check(server_binary, model_path, tmp_path, settings: ServerSettings) -> None:
    model = read_model_facts(model_path)
    server = LlamaServer(server_binary, model_path, settings, tmp_path / "s.log")
    asyncio.run(server.start())
    server.stop()
    facts = server.facts
    estimate = settings_memory(model, settings)
    logged = logged_memory(facts)
    assert logged is not None and facts.output_buffer_mib is not None
    assert estimate.kv_mib == pytest.approx(facts.kv_buffer_mib, rel=0.01)
    assert estimate.weights_mib == pytest.approx(facts.model_buffer_mib, rel=0.01)
    assert estimate.compute_mib == pytest.approx(logged.compute_mib, abs=2.0)
    assert estimate.buffers_mib == pytest.approx(logged.total_mib, rel=0.05)
    cells = layout_of(settings).cells_per_slot
    assert min(cells, model.train_ctx) == facts.n_ctx_slot  # the server caps a slot there
    assert estimate.runtime_mib > 0
    assert plan_settings(model, settings, 2**40).ctx_per_request == facts.n_ctx_slot


@pytest.mark.server
@pytest.mark.parametrize(("slots", "ctx", "kv_type", "unified"), GRID)
def test_smollm2s_footprint(server_binary, model_path, tmp_path, slots, ctx, kv_type, unified):
    settings = ServerSettings(
        slots=slots, ctx=ctx, cache_type_k=kv_type, cache_type_v=kv_type, kv_unified=unified
    )
    check(server_binary, model_path, tmp_path, settings)


@pytest.mark.server
@pytest.mark.parametrize("swa_full", [False, True])
@pytest.mark.parametrize(("slots", "ctx", "kv_type", "unified"), GRID)
def test_gemma3s_footprint(
    server_binary, gemma3_path, tmp_path, slots, ctx, kv_type, unified, swa_full
):
    settings = ServerSettings(
        slots=slots,
        ctx=ctx,
        cache_type_k=kv_type,
        cache_type_v=kv_type,
        kv_unified=unified,
        extra_args=("--swa-full",) if swa_full else (),
    )
    check(server_binary, gemma3_path, tmp_path, settings)


@pytest.mark.server
@pytest.mark.parametrize(
    ("gemma", "settings"),
    [
        (True, ServerSettings(slots=2, ctx=8192, ubatch_size=64)),
        (True, ServerSettings(slots=2, ctx=8192, ubatch_size=2048)),
        (True, ServerSettings(slots=2, ctx=8192, flash_attn="off")),
        (False, ServerSettings(slots=2, ctx=8192, flash_attn="off")),
        (True, ServerSettings(slots=4, ctx=8192, kv_unified=True, ubatch_size=128)),
        (True, ServerSettings(slots=4, ctx=2048)),
        (False, ServerSettings(slots=3, ctx=8192)),
        (False, ServerSettings(slots=3, ctx=1000)),
    ],
)
def test_other_micro_batches_flash_attention_and_odd_layouts(
    server_binary, model_path, gemma3_path, tmp_path, gemma, settings
):
    """The compute buffer's two other inputs (on the model whose windowed cache also holds the
    micro-batch), a windowed cache capped by a small slot, and padded slots."""
    check(server_binary, gemma3_path if gemma else model_path, tmp_path, settings)
