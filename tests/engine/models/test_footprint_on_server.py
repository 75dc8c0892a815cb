"""The memory function against the real llama-server's own buffers, a server started for each
cell of a grid on both real models (SmolLM2-135M, and Gemma 3 270M with its sliding window):
``-np`` 1/2/4/-1, ``-c`` 4096/8192/32768, f16 and q8_0 KV, ``--kv-unified`` on and off, and
``--swa-full`` on and off where the model has a window; then other micro-batches, flash
attention off, a windowed cache capped by a small slot and padded slots. The KV is the sum of
its ``llama_kv_cache: size = ...`` lines within 1 %; the weights (mapped and repacked), KV,
compute and output buffers within 5 % of what it logged, the compute within 2 MiB.

The servers start a few at a time (nothing here is timed): over a hundred one after another
would add minutes to the suite."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from workbench.engine.analysis.planner import plan_settings
from workbench.engine.base.records import StartupFacts
from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.models.memory import (
    layout_of,
    logged_memory,
    read_model_facts,
    settings_memory,
)
from workbench.engine.server.llama_server import LlamaServer

AT_ONCE = 3


def grid(windowed: bool) -> list[ServerSettings]:
    return [
        ServerSettings(
            slots=slots,
            ctx=ctx,
            cache_type_k=kv_type,
            cache_type_v=kv_type,
            kv_unified=unified,
            extra_args=("--swa-full",) if swa_full else (),
        )
        for slots, ctx, kv_type, unified, swa_full in itertools.product(
            (1, 2, 4, -1),
            (4096, 8192, 32768),
            ("f16", "q8_0"),
            (False, True),
            (False, True) if windowed else (False,),
        )
        if not (slots == -1 and unified)  # -np -1 is a unified pool already
    ]


CELLS = [
    *(("smollm2", s) for s in grid(windowed=False)),
    *(("gemma3", s) for s in grid(windowed=True)),
    ("gemma3", ServerSettings(slots=2, ctx=8192, ubatch_size=64)),
    ("gemma3", ServerSettings(slots=2, ctx=8192, ubatch_size=2048)),
    ("gemma3", ServerSettings(slots=2, ctx=8192, flash_attn="off")),
    ("smollm2", ServerSettings(slots=2, ctx=8192, flash_attn="off")),
    ("gemma3", ServerSettings(slots=4, ctx=8192, kv_unified=True, ubatch_size=128)),
    ("gemma3", ServerSettings(slots=4, ctx=2048)),
    ("smollm2", ServerSettings(slots=3, ctx=8192)),
    ("smollm2", ServerSettings(slots=3, ctx=1000)),
]


def cell_id(cell: tuple[str, ServerSettings]) -> str:
    model, s = cell
    flags = [
        f"np{s.slots}",
        f"c{s.ctx}",
        s.cache_type_k or "",
        "kvu" if s.kv_unified else "",
        f"ub{s.ubatch_size}" if s.ubatch_size else "",
        f"fa-{s.flash_attn}" if s.flash_attn else "",
        *s.extra_args,
    ]
    return "-".join([model, *(f for f in flags if f)])


@pytest.fixture(scope="module")
def logged(server_binary, model_path, gemma3_path, tmp_path_factory) -> dict[str, StartupFacts]:
    """What each cell's server logged, by the cell's id."""
    paths: dict[str, Path] = {"smollm2": model_path, "gemma3": gemma3_path}
    folder = tmp_path_factory.mktemp("servers")

    async def start_all() -> list[StartupFacts]:
        gate = asyncio.Semaphore(AT_ONCE)

        async def one(n: int, model: str, settings: ServerSettings) -> StartupFacts:
            async with gate:
                server = LlamaServer(server_binary, paths[model], settings, folder / f"{n}.log")
                try:
                    return await server.start()
                finally:
                    await asyncio.to_thread(server.stop)

        return await asyncio.gather(*(one(n, *cell) for n, cell in enumerate(CELLS)))

    return dict(zip(map(cell_id, CELLS), asyncio.run(start_all()), strict=True))


@pytest.mark.server
@pytest.mark.parametrize("cell", CELLS, ids=cell_id)
def test_the_estimate_is_what_the_server_logged(cell, logged, model_path, gemma3_path):
    model_name, settings = cell
    model = read_model_facts(gemma3_path if model_name == "gemma3" else model_path)
    facts = logged[cell_id(cell)]
    estimate = settings_memory(model, settings)
    buffers = logged_memory(facts)
    assert buffers is not None and facts.output_buffer_mib is not None
    assert estimate.kv_mib == pytest.approx(facts.kv_buffer_mib, rel=0.01)
    assert estimate.weights_mib == pytest.approx(facts.model_buffer_mib, rel=0.01)
    assert estimate.compute_mib == pytest.approx(buffers.compute_mib, abs=2.0)
    assert estimate.buffers_mib == pytest.approx(buffers.total_mib, rel=0.05)
    cells = layout_of(settings).cells_per_slot
    assert facts.n_ctx_train == model.train_ctx
    assert min(cells, model.train_ctx) == facts.n_ctx_slot  # the server caps a slot there
    assert plan_settings(model, settings, 2**40).ctx_per_request == facts.n_ctx_slot
    assert estimate.runtime_mib > 0
