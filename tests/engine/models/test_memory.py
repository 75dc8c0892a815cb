"""The memory function against the real server's own figures and known shapes, the model
facts read from a GGUF header, bad models, and a started server's own buffers read the same
way."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import gguf
import pytest

from tests.engine.models.made_models import LLAMA_8B_SHAPE, write_small_model, written
from workbench.cli.main import main
from workbench.engine.base.errors import ModelFileError
from workbench.engine.base.records import StartupFacts
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import validated_as
from workbench.engine.models.memory import (
    MIB,
    KvLayout,
    Memory,
    ModelFacts,
    kv_bytes_per_token,
    kv_layout,
    layout_of,
    logged_kv_bytes_per_token,
    logged_memory,
    read_model_facts,
    server_memory,
)


@pytest.fixture(scope="module")
def smollm(model_path) -> ModelFacts:
    return read_model_facts(model_path)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> Path:
    return write_small_model(tmp_path_factory.mktemp("model") / "small.gguf")


def test_a_header_like_the_default_models(small_model, smollm):
    small = read_model_facts(small_model)
    assert (small.layers, small.kv_heads, small.head_k, small.head_v, small.train_ctx) == (
        smollm.layers,
        smollm.kv_heads,
        smollm.head_k,
        smollm.head_v,
        smollm.train_ctx,
    )
    assert (small.name, small.quantization, small.tensor_bytes) == ("Small", "Q4_1", 64 * 16 * 4)


def test_model_facts_from_the_gguf_header(smollm):
    assert (smollm.architecture, smollm.layers, smollm.kv_heads[0], smollm.head_k) == (
        "llama",
        30,
        3,
        64,
    )
    assert smollm.quantization == "Q4_1" and smollm.train_ctx == 8192
    assert smollm.name == "Smollm2 135M 8k Lc100K Mix1 Ep2"
    assert kv_bytes_per_token(smollm) == 30 * 3 * 64 * 2 * 2
    assert smollm.tensor_bytes == 96_576_768  # 92.10 MiB


def test_the_memory_of_a_known_shape():
    """Weights + every allocated cell at the KV bytes per token + the compute and output
    buffers + the process's own use."""
    assert kv_bytes_per_token(LLAMA_8B_SHAPE) == 131072  # 128 KiB per token: a Llama-3-8B shape
    memory = server_memory(LLAMA_8B_SHAPE, 8192, 4, runtime=100)
    compute = 512 * (4 * (3 * 14336 + 5 * 4096) + 64 + 2 * 2048) + 4 * 128256 * 4
    assert memory == Memory(1000.0, 1024.0, compute / MIB, 100)
    assert memory.total_mib == 2124.0 + compute / MIB
    assert memory.buffers_mib == 2024.0 + compute / MIB
    assert server_memory(LLAMA_8B_SHAPE, 1000, 3).kv_mib == 3 * 512 * 131072 / MIB  # padded
    assert server_memory(LLAMA_8B_SHAPE, 8192, -1).kv_mib == 1024.0  # 4 slots, one pool
    q8 = server_memory(LLAMA_8B_SHAPE, 8192, 1, type_k="q8_0", type_v="q8_0")
    assert q8.kv_mib == pytest.approx(1024 * 34 / 64)
    with pytest.raises(ModelFileError, match="unknown KV cache type 'q3'"):
        server_memory(LLAMA_8B_SHAPE, 8192, 1, type_k="q3")


def test_the_cells_a_layout_allocates():
    assert kv_layout(8192, 4) == kv_layout(8192, 4, unified=False)
    assert (kv_layout(1000, 3).cells_per_slot, kv_layout(1000, 3).total_cells) == (512, 1536)
    auto = kv_layout(8192, -1)
    assert (auto.slots, auto.unified, auto.cells_per_slot, auto.total_cells) == (
        4,
        True,
        8192,
        8192,
    )


def test_a_per_slot_limit_sizes_the_pool_and_caps_each_slot():
    """``--kv-unified-per-slot N``: a pool of slots x N (padded as any), N a request, whatever
    ``-c`` says (as ``test_server_real`` measures)."""
    assert kv_layout(8192, 2, True, per_slot=1024) == KvLayout(2, True, 1024, 2048)
    assert kv_layout(2000, 2, True, per_slot=1000) == KvLayout(2, True, 1000, 2048)
    assert kv_layout(0, -1, per_slot=512) == KvLayout(4, True, 512, 2048)
    assert kv_layout(0, 3, per_slot=300) == KvLayout(3, False, 300, 1536)  # no -kvu: padded
    per_slot = server_memory(LLAMA_8B_SHAPE, 8192, 2, True, per_slot=1024)
    assert per_slot.kv_mib == 2048 * 131072 / MIB == 256.0
    settings = validated_as(ServerSettings, {"slots": 2, "kv_unified_per_slot": 1024})
    assert layout_of(settings) == KvLayout(2, True, 1024, 2048)
    assert layout_of(ServerSettings(slots=4, ctx=8192)) == kv_layout(8192, 4)


def test_a_started_servers_own_buffers_read_the_same_way():
    facts = StartupFacts(kv_buffer_mib=180.0, n_ctx_slot=2048, n_slots=4, kv_unified=False)
    assert logged_kv_bytes_per_token(facts) == 23040  # SmolLM2-135M: 30 x 3 x 64 x 2 x 2
    unified = StartupFacts(kv_buffer_mib=180.0, n_ctx_slot=8192, n_slots=4, kv_unified=True)
    assert logged_kv_bytes_per_token(unified) == 23040
    capped = StartupFacts(
        kv_buffer_mib=45.0, n_ctx_slot=1024, n_slots=2, kv_unified=True, n_ctx=2048
    )  # --kv-unified-per-slot 1024: the pool is the context, not a slot's
    assert logged_kv_bytes_per_token(capped) == 23040
    assert logged_kv_bytes_per_token(StartupFacts()) is None
    assert logged_memory(facts) is None  # no model or compute buffer logged
    whole = StartupFacts(model_buffer_mib=92.0, kv_buffer_mib=180.0, compute_buffer_mib=64.0)
    assert logged_memory(whole) == Memory(92.0, 180.0, 64.0)
    assert logged_memory(replace(whole, output_buffer_mib=0.5)) == Memory(92.0, 180.0, 64.5)
    assert logged_memory(replace(whole, state_buffer_mib=2.5)) == Memory(92.0, 182.5, 64.0)
    assert logged_memory(whole).total_mib == 336.0


def test_a_file_that_is_not_gguf(tmp_path):
    text = tmp_path / "model.gguf"
    text.write_text("hello " * 50)
    with pytest.raises(ModelFileError, match="not a GGUF model file"):
        read_model_facts(text)


def test_an_architecture_without_the_needed_keys(tmp_path, capsys):
    path = tmp_path / "odd.gguf"
    writer = gguf.GGUFWriter(str(path), "oddarch")
    writer.add_block_count(4)
    writer.add_embedding_length(64)
    written(writer, path)
    with pytest.raises(
        ModelFileError, match=r"'oddarch' lacks 'oddarch\.attention\.head_count_kv'"
    ):
        read_model_facts(path)
    assert main(["plan", str(path)]) == 1
    assert "lacks" in capsys.readouterr().err
