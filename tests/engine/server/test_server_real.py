"""The supervisor against the real llama-server and SmolLM2-135M."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from workbench.engine.config.server_settings import ServerSettings
from workbench.engine.config.settings import validated_as
from workbench.engine.models.memory import layout_of, logged_kv_bytes_per_token
from workbench.engine.server.llama_server import LlamaServer

pytestmark = pytest.mark.server


async def start(binary: str, model: Path, tmp_path: Path, **settings) -> LlamaServer:
    server = LlamaServer(binary, model, ServerSettings(**settings), tmp_path / "server.log")
    await server.start()
    return server


@pytest.mark.parametrize(("slots", "per_slot"), [(1, 8192), (2, 4096), (4, 2048)])
async def test_startup_facts_for_explicit_slots(
    server_binary, model_path, tmp_path, slots, per_slot
):
    server = await start(server_binary, model_path, tmp_path, slots=slots, ctx=8192)
    try:
        facts = server.facts
        assert (facts.n_slots, facts.n_ctx_slot, facts.kv_unified) == (slots, per_slot, False)
        assert facts.n_ctx == 8192
        # SmolLM2-135M: 30 layers x 3 KV heads x 64 x 2 (K, V) x 2 bytes x 8192 cells = 180 MiB.
        assert facts.kv_buffer_mib == pytest.approx(180.0)
        assert facts.model_buffer_mib and 60 < facts.model_buffer_mib < 120
        assert facts.compute_buffer_mib and facts.compute_buffer_mib > 0
        assert facts.backend == "CPU"
        assert facts.build
    finally:
        await asyncio.to_thread(server.stop)
    assert not server.is_running()


async def test_startup_facts_for_auto_slots(server_binary, model_path, tmp_path):
    server = await start(server_binary, model_path, tmp_path, slots=-1, ctx=8192)
    try:
        facts = server.facts
        assert facts.n_slots == 4
        assert facts.kv_unified is True
        assert facts.n_ctx_slot == 8192
    finally:
        await asyncio.to_thread(server.stop)


@pytest.mark.parametrize(
    ("slots", "per_slot", "n_slots", "pool"),
    [(2, 1024, 2, 2048), (-1, 512, 4, 2048), (3, 300, 3, 1024)],
)
async def test_a_per_slot_limit_makes_one_unified_pool_of_slots_times_it(
    server_binary, model_path, tmp_path, slots, per_slot, n_slots, pool
):
    """``kv_unified_per_slot``: the server starts one unified pool of slots x the limit
    (padded to 256 cells: 3 x 300 takes 1024) and caps each slot at exactly the limit, as
    ``models.memory`` and the scheduler model plan it."""
    settings = validated_as(ServerSettings, {"slots": slots, "kv_unified_per_slot": per_slot})
    server = LlamaServer(server_binary, model_path, settings, tmp_path / "server.log")
    await server.start()
    try:
        facts = server.facts
        assert (facts.n_slots, facts.n_ctx_slot, facts.kv_unified) == (n_slots, per_slot, True)
        assert facts.n_ctx == pool
        assert facts.kv_buffer_mib == pytest.approx(pool * 23040 / 2**20)  # SmolLM2-135M
        layout = layout_of(settings)
        assert (layout.slots, layout.cells_per_slot, layout.total_cells) == (
            n_slots,
            per_slot,
            pool,
        )
        assert logged_kv_bytes_per_token(facts) == 23040
        assert f"to --kv-unified-per-slot ({per_slot})" in server.log_path.read_text()
    finally:
        await asyncio.to_thread(server.stop)


async def test_stop_uses_sigint_and_leaves_a_log(server_binary, model_path, tmp_path):
    states: list[str] = []
    server = LlamaServer(
        server_binary,
        model_path,
        ServerSettings(slots=1, ctx=2048),
        tmp_path / "logs" / "s.log",
        on_state=lambda state, detail: states.append(state),
    )
    await server.start()
    async with httpx.AsyncClient(base_url=server.base_url) as client:
        assert (await client.get("/health")).status_code == 200
        metrics = await client.get("/metrics")
        assert "llamacpp:requests_processing" in metrics.text
    result = await asyncio.to_thread(server.stop)
    assert result.how == "SIGINT"
    assert states == ["starting", "healthy", "stopping", "stopped"]
    assert "n_slots = 1" in (tmp_path / "logs" / "s.log").read_text()
    assert server.stop().how == "not running"  # a second stop is harmless


def wrapper_script(tmp_path: Path, binary: str) -> Path:
    """A --server-bin that runs llama-server as its child instead of exec'ing it."""
    wrapper = tmp_path / "llama-wrapper.sh"
    wrapper.write_text(f'#!/bin/sh\n"{binary}" "$@"\necho "wrapper done"\n')
    wrapper.chmod(0o755)
    return wrapper


async def test_a_wrapper_scripts_server_stops_with_it(server_binary, model_path, tmp_path):
    import psutil

    wrapper = wrapper_script(tmp_path, server_binary)
    server = await start(str(wrapper), model_path, tmp_path, slots=1, ctx=1024)
    try:
        (real,) = psutil.Process(server.pid).children(recursive=True)
        assert real.name() == "llama-server"
    finally:
        await asyncio.to_thread(server.stop)
    _, alive = psutil.wait_procs([real], timeout=5)
    assert not alive, "the wrapper's llama-server outlived stop()"


def test_a_wrapper_scripts_server_dies_with_a_killed_workbench(server_binary, tmp_path):
    import os
    import signal

    import psutil

    from tests.cli_process import start_run, stop, wait_for_finished_requests

    wrapper = wrapper_script(tmp_path, server_binary)
    experiment = (
        'name = "wrapped"\n[server]\nslots = 1\nctx = 1024\n'
        "[workload]\nrequests = 8\nmax_tokens = 48\nwarmup = 0\n"
    )
    proc, out, log = start_run(experiment, tmp_path, "--server-bin", str(wrapper))
    try:
        progress = wait_for_finished_requests(proc, out, log, count=1)
        (real,) = psutil.Process(progress.server_pid).children(recursive=True)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        stop(proc)
    _, alive = psutil.wait_procs([real], timeout=10)
    for leftover in alive:
        leftover.kill()
    assert not alive, "the wrapper's llama-server outlived the killed workbench"
