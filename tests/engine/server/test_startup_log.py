"""Facts from llama-server's startup log, on synthetic excerpts (a real-server test covers
real logs)."""

from __future__ import annotations

import pytest

from workbench.engine.base.records import StartupFacts
from workbench.engine.server.startup_log import parse_startup_log

CPU_LOG = """\
build: 6000 (abc1234) with cc (GCC) 13.2.0 for x86_64-linux-gnu
load_tensors:   CPU_Mapped model buffer size =    69.19 MiB
llama_context: n_ctx         = 8192
llama_context: n_ctx_per_seq = 4096
llama_kv_cache:        CPU KV buffer size =   180.00 MiB
llama_context:        CPU compute buffer size =    66.51 MiB
srv    load_model: initializing slots, n_slots = 2
slot   load_model: id  0 | task -1 | new slot, n_ctx = 4096
srv          init: initializing slots, n_slots = 2, n_ctx_slot = 4096, kv_unified = 'false'
main: server is listening on http://127.0.0.1:8080 - starting the main loop
"""


def test_cpu_log() -> None:
    facts = parse_startup_log(CPU_LOG)
    assert (facts.n_slots, facts.n_ctx_slot, facts.kv_unified) == (2, 4096, False)
    assert facts.n_ctx == 8192
    assert facts.kv_buffer_mib == pytest.approx(180.00)
    assert facts.model_buffer_mib == pytest.approx(69.19)
    assert facts.compute_buffer_mib == pytest.approx(66.51)
    assert facts.backend == "CPU"
    assert facts.build is not None and facts.build.startswith("6000 (abc1234)")


def test_slot_count_alone_is_not_the_slot_layout() -> None:
    facts = parse_startup_log("srv    load_model: initializing slots, n_slots = 4\n")
    assert facts.n_slots is None and facts.n_ctx_slot is None and facts.kv_unified is None


def test_unified_kv_and_log_so_far() -> None:
    facts = parse_startup_log(
        "srv  init: initializing slots, n_slots = 4, n_ctx_slot = 8192, kv_unified = 'true'\n"
    )
    assert (facts.n_slots, facts.n_ctx_slot, facts.kv_unified) == (4, 8192, True)
    assert facts.kv_buffer_mib is None and facts.model_buffer_mib is None
    assert parse_startup_log("") == StartupFacts()


def test_buffers_on_several_devices_are_summed() -> None:
    log = """\
ggml_cuda_init: found 1 CUDA devices:
load_tensors: offloaded 31/31 layers to GPU
load_tensors:        CUDA0 model buffer size =   100.50 MiB
load_tensors:   CPU_Mapped model buffer size =    20.25 MiB
llama_kv_cache:      CUDA0 KV buffer size =   160.00 MiB
llama_kv_cache:        CPU KV buffer size =    20.00 MiB
llama_context:      CUDA0 compute buffer size =    60.00 MiB
llama_context:  CUDA_Host compute buffer size =     6.51 MiB
"""
    facts = parse_startup_log(log)
    assert facts.model_buffer_mib == pytest.approx(120.75)
    assert facts.kv_buffer_mib == pytest.approx(180.00)
    assert facts.compute_buffer_mib == pytest.approx(66.51)
    assert facts.backend == "CUDA"
