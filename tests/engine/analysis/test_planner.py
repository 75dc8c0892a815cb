"""Plan tables: what fits in memory (or in Metal's working set), and the plan command."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.engine.models.made_models import LLAMA_8B_SHAPE, write_small_model, write_windowed_model
from workbench.cli.main import main
from workbench.engine.analysis.planner import (
    METAL_WORKING_SET,
    plan,
    plan_settings,
    usable_memory,
)
from workbench.engine.base.records import Gpu, StartupFacts
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import validated_as
from workbench.engine.models.memory import kv_bytes_per_token, read_model_facts


@pytest.fixture(scope="module")
def small_model(tmp_path_factory) -> Path:
    return write_small_model(tmp_path_factory.mktemp("model") / "small.gguf")


def test_plan_table_for_known_inputs():
    model = LLAMA_8B_SHAPE
    assert kv_bytes_per_token(model) == 131072  # 128 KiB per token: a Llama-3-8B shape
    rows = plan(
        model, [8192, 65536], [1, 4], available_bytes=6 * 2**30, runtime=0, need_tokens=3000
    )
    cells = [(r.ctx, r.slots, r.ctx_per_request, r.kv_mib, r.fit) for r in rows]
    assert cells == [
        (8192, 1, 8192, 1024.0, "fits"),
        (8192, 4, 2048, 1024.0, "fits"),
        (65536, 1, 32768, 8192.0, "does not fit"),  # capped at training
        (65536, 4, 16384, 8192.0, "does not fit"),
    ]
    assert "refused or cut short" in rows[1].warning and rows[0].warning == ""
    assert "training context" in rows[2].warning
    tight = plan(model, [16384], [2], available_bytes=int(3.4 * 2**30), runtime=0)
    assert tight[0].fit == "tight"  # 3000 MiB of 3482
    q8 = plan(model, [8192], [1], 6 * 2**30, type_k="q8_0", type_v="q8_0")[0]
    assert q8.kv_mib == pytest.approx(1024 * 34 / 64)


def test_a_per_slot_limit_plans_each_slot_counts_own_pool():
    """``--kv-unified-per-slot 1024``: slots x 1024 cells in one pool, 1024 a request,
    whatever context is asked."""
    rows = plan(LLAMA_8B_SHAPE, [8192], [1, 4], 6 * 2**30, unified=True, per_slot=1024)
    cells = [(r.ctx, r.slots, r.unified, r.ctx_per_request, r.kv_mib) for r in rows]
    assert cells == [(1024, 1, True, 1024, 128.0), (4096, 4, True, 1024, 512.0)]


# What a 16 GB Mac's server logs (recommendedMaxWorkingSetSize = 11453.25 MB, all layers on
# the GPU), and the same server with none offloaded.
ON_METAL = StartupFacts(
    backend="Metal", layers_offloaded=33, layers_total=33, metal_working_set_bytes=11_453_250_000
)
GIB = 2**30


def test_on_metal_the_gpu_working_set_is_what_a_configuration_may_take():
    assert usable_memory(14 * GIB, "free RAM", ON_METAL) == (11_453_250_000, METAL_WORKING_SET)
    assert usable_memory(8 * GIB, "free RAM", ON_METAL) == (8 * GIB, "free RAM")  # less free
    on_cpu = replace(ON_METAL, layers_offloaded=0)
    assert usable_memory(14 * GIB, "free RAM", on_cpu) == (14 * GIB, "free RAM")
    unstated = replace(ON_METAL, layers_offloaded=None)  # Metal offloads all by default
    assert usable_memory(14 * GIB, "free RAM", unstated)[1] == METAL_WORKING_SET
    for facts in (None, StartupFacts(backend="CUDA"), replace(ON_METAL, metal_working_set_bytes=0)):
        assert usable_memory(14 * GIB, "free RAM", facts) == (14 * GIB, "free RAM")


def test_a_plan_on_metal_is_held_to_the_working_set():
    """64k of context for one slot: 8 GiB of KV and 1000 MiB of weights, 9192 MiB beside the
    compute buffers. In 14 GiB of free RAM that fits; in the 10923 MiB Metal lets the GPU hold
    it is tight, and with twice the context it does not fit at all."""
    ram = plan(LLAMA_8B_SHAPE, [65536, 131072], [1], 14 * GIB, runtime=0)
    metal = plan(LLAMA_8B_SHAPE, [65536, 131072], [1], 14 * GIB, runtime=0, facts=ON_METAL)
    assert [r.total_mib for r in ram] == [r.total_mib for r in metal]
    assert [r.total_mib - r.compute_mib for r in ram] == [9192.0, 17384.0]
    assert [r.fit for r in ram] == ["fits", "does not fit"]
    assert [r.fit for r in metal] == ["tight", "does not fit"]
    on_cpu = replace(ON_METAL, layers_offloaded=0)
    assert [
        r.fit for r in plan(LLAMA_8B_SHAPE, [65536], [1], 14 * GIB, runtime=0, facts=on_cpu)
    ] == ["fits"]


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
    assert "each request gets 2048 tokens" in out
    with pytest.raises(SystemExit):
        main(["plan", str(small_model), "--slots", "two"])
    assert "argument --slots: takes comma-separated values" in capsys.readouterr().err


def test_plan_command_with_a_per_slot_limit(small_model, capsys):
    argv = ["plan", str(small_model), "--slots", "1,4", "--kv-unified-per-slot", "1024"]
    assert main([*argv, "--memory-gib", "8"]) == 0
    out = capsys.readouterr().out
    assert "│ 1024 │     1 │ unified │            1024 │   22.5 │" in out
    assert "│ 4096 │     4 │ unified │            1024 │   90.0 │" in out
    with pytest.raises(SystemExit):
        main(["plan", str(small_model), "--kv-unified-per-slot", "0"])
    assert "--kv-unified-per-slot: must be" in capsys.readouterr().err


def test_planning_for_a_gpu_that_is_not_there(small_model, capsys, monkeypatch):
    from workbench.engine.measure import hardware

    monkeypatch.setattr(hardware, "nvidia_gpus", lambda: [])
    assert main(["plan", str(small_model), "--gpu"]) == 1
    assert "no NVIDIA GPU found" in capsys.readouterr().err
    monkeypatch.setattr(
        hardware, "nvidia_gpus", lambda: [Gpu(name="H200", memory_bytes=141 * 2**30)]
    )
    assert main(["plan", str(small_model), "--gpu", "--ctx", "8192", "--slots", "4"]) == 0
    assert "141.0 GiB (VRAM of H200)" in " ".join(capsys.readouterr().out.split())


def test_a_configurations_row_reads_every_setting_that_sizes_its_memory(tmp_path):
    """``plan_settings`` (tune's filter and the Capacity panel): a Gemma-3-270M shape at
    -np 2 -c 8192 takes 54 MiB of KV (what llama-server logged), 46.5 with -ub 128, 144
    with ``--swa-full`` among its extra arguments, and a per-slot limit's pool."""
    model = read_model_facts(write_windowed_model(tmp_path / "g.gguf", "gemma3", 512))
    base = ServerSettings(slots=2, ctx=8192)
    free = 64 * 2**30
    assert plan_settings(model, base, free).kv_mib == pytest.approx(54.0)
    assert plan_settings(model, replace(base, ubatch_size=128), free).kv_mib == pytest.approx(46.5)
    swa_full = replace(base, extra_args=("--swa-full",))
    assert plan_settings(model, swa_full, free).kv_mib == pytest.approx(144.0)
    pooled = validated_as(ServerSettings, {"slots": 2, "kv_unified_per_slot": 1024})
    row = plan_settings(model, pooled, free, need_tokens=1500)
    assert (row.ctx, row.ctx_per_request, row.unified) == (2048, 1024, True)
    assert row.warning.startswith("each request gets 1024")
