"""The KV estimate against the real server's own figures, plan tables, and bad models."""

from __future__ import annotations

import asyncio

import gguf
import numpy as np
import pytest

from workbench.cli.main import main
from workbench.engine.analysis.planner import ModelFacts, kv_layout, kv_mib, plan, read_model_facts
from workbench.engine.base.errors import ModelFileError
from workbench.engine.config.experiment import ServerSettings
from workbench.engine.server.llama_server import LlamaServer

MIB = 2**20


@pytest.fixture(scope="module")
def smollm(model_path) -> ModelFacts:
    return read_model_facts(model_path)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    """A GGUF header with the default model's KV shape (30 layers, 3 KV heads of 64) and
    one small tensor: what the plan command reads, without parsing a 49k-token vocabulary."""
    path = tmp_path_factory.mktemp("model") / "small.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("Small")
    writer.add_block_count(30)
    writer.add_embedding_length(576)
    writer.add_head_count(9)
    writer.add_head_count_kv(3)
    writer.add_context_length(8192)
    writer.add_file_type(3)  # Q4_1
    writer.add_tensor("token_embd.weight", np.zeros((64, 16), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


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
    assert smollm.kv_bytes_per_token() == 30 * 3 * 64 * 2 * 2
    assert smollm.tensor_bytes / MIB == pytest.approx(92.10, abs=0.01)


@pytest.mark.server
@pytest.mark.parametrize(
    ("slots", "ctx", "unified", "type_k"),
    [
        (2, 8192, None, None),
        (3, 8192, None, None),
        (3, 1000, None, None),
        (4, 4096, True, None),
        (-1, 8192, None, None),
        (2, 8192, None, "q8_0"),
    ],
)
def test_estimate_matches_the_servers_kv_buffer(
    smollm, server_binary, model_path, tmp_path, slots, ctx, unified, type_k
):
    settings = ServerSettings(slots=slots, ctx=ctx, kv_unified=unified, cache_type_k=type_k)
    server = LlamaServer(server_binary, model_path, settings, tmp_path / "s.log")
    asyncio.run(server.start())
    server.stop()
    estimate = kv_mib(smollm, ctx, slots, bool(unified), type_k or "f16")
    assert estimate == pytest.approx(server.facts.kv_buffer_mib, rel=0.01)
    layout = kv_layout(ctx, slots, bool(unified))
    assert layout.cells_per_slot == server.facts.n_ctx_slot
    assert server.facts.model_buffer_mib == pytest.approx(smollm.tensor_bytes / MIB, rel=0.01)


def test_plan_table_for_known_inputs():
    model = ModelFacts(
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
    )
    assert model.kv_bytes_per_token() == 131072  # 128 KiB per token: a Llama-3-8B shape
    rows = plan(
        model, [8192, 65536], [1, 4], available_bytes=6 * 2**30, overhead_mib=0, need_tokens=3000
    )
    cells = [(r.ctx, r.slots, r.ctx_per_request, r.kv_mib, r.fit) for r in rows]
    assert cells == [
        (8192, 1, 8192, 1024.0, "fits"),
        (8192, 4, 2048, 1024.0, "fits"),
        (65536, 1, 65536, 8192.0, "does not fit"),
        (65536, 4, 16384, 8192.0, "does not fit"),
    ]
    assert "truncated" in rows[1].warning and rows[0].warning == ""
    assert "training context" in rows[2].warning
    tight = plan(model, [16384], [2], available_bytes=int(3.4 * 2**30), overhead_mib=0)
    assert tight[0].fit == "tight"  # 3000 MiB of 3482
    q8 = plan(model, [8192], [1], 6 * 2**30, type_k="q8_0", type_v="q8_0")[0]
    assert q8.kv_mib == pytest.approx(1024 * 34 / 64)


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
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(
        ModelFileError, match=r"'oddarch' lacks 'oddarch\.attention\.head_count_kv'"
    ):
        read_model_facts(path)
    assert main(["plan", str(path)]) == 1
    assert "lacks" in capsys.readouterr().err


def test_plan_command(small_model, capsys):
    assert (
        main(
            [
                "plan",
                str(small_model),
                "--ctx",
                "8192",
                "--slots",
                "1,4,-1",
                "--memory-gib",
                "0.5",
                "--need",
                "3000",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("Small (llama, Q4_1): 30 layers, 3 KV heads x 64, weights 0 MiB, KV ")
    assert "22.5 KiB per token (f16); memory to plan for: 0.5 GiB (given)" in " ".join(out.split())
    assert "│ 8192 │     4 │  unified │            8192 │  180.0 │" in out
    assert "less than the 3000 it needs" in out
    assert main(["plan", str(small_model), "--slots", "two"]) == 1
    assert "--slots takes whole numbers separated by commas" in capsys.readouterr().err


def test_planning_for_a_gpu_that_is_not_there(small_model, capsys, monkeypatch):
    from workbench.engine.measure import hardware

    monkeypatch.setattr(hardware, "nvidia_gpus", lambda: [])
    assert main(["plan", str(small_model), "--gpu"]) == 1
    assert "no NVIDIA GPU found" in capsys.readouterr().err
    monkeypatch.setattr(
        hardware, "nvidia_gpus", lambda: [{"name": "H200", "memory_bytes": 141 * 2**30}]
    )
    assert main(["plan", str(small_model), "--gpu", "--ctx", "8192", "--slots", "4"]) == 0
    assert "141.0 GiB (VRAM of H200)" in " ".join(capsys.readouterr().out.split())
