"""Facts from llama-server's startup log, on synthetic excerpts (a real-server test covers
real logs)."""

from __future__ import annotations

import pytest

from workbench.engine.base.records import StartupFacts
from workbench.engine.server.startup_log import parse_startup_log

CPU_LOG = """\
build: 6000 (abc1234) with cc (GCC) 13.2.0 for x86_64-linux-gnu
print_info: n_ctx_train           = 8192
load_tensors:   CPU_Mapped model buffer size =    69.19 MiB
llama_context: n_ctx         = 8192
llama_context: n_ctx_per_seq = 4096
llama_context:        CPU  output buffer size =     0.38 MiB
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
    assert facts.output_buffer_mib == pytest.approx(0.38)
    assert facts.n_ctx_train == 8192
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
    assert facts.output_buffer_mib is None and "output_buffer_mib" not in facts.to_dict()
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


# The lines below are llama.cpp's own format strings rendered by hand (no Mac or GPU here):
# ggml/src/ggml-metal/ggml-metal-device.m, ggml_metal_device_init:
#   "%s: recommendedMaxWorkingSetSize  = %8.2f MB\n" (the size / 1e6)
# src/llama-model.cpp, load_tensors:
#   "%s: offloaded %d/%d layers to GPU\n" and "%s: %12s model buffer size = %8.2f MiB\n"
# with the timestamp and level prefix current llama-server logs carry.
METAL_LOG = """\
0.00.021.608 I cmn  common_param: common_params_print_info: verbosity = 3
0.00.040.770 I ggml_metal_device_init: GPU name:   MTL0
0.00.040.771 I ggml_metal_device_init: GPU family: MTLGPUFamilyApple9  (1009)
0.00.040.771 I ggml_metal_device_init: has unified memory    = true
0.00.040.772 I ggml_metal_device_init: recommendedMaxWorkingSetSize  = 11453.25 MB
0.00.109.723 I llama_prepare_model_devices: using device MTL0 (Apple M3 Pro) - 10922 MiB free
0.00.325.669 I load_tensors: offloaded 31/31 layers to GPU
0.00.341.820 I load_tensors:   CPU_Mapped model buffer size =    20.25 MiB
0.00.341.821 I load_tensors:  MTL0_Mapped model buffer size =    71.85 MiB
0.00.344.565 I llama_kv_cache:       MTL0 KV buffer size =   180.00 MiB
0.00.551.157 I srv    load_model: initializing, n_slots = 4, n_ctx_slot = 2048, kv_unified = 'false'
"""


def test_metal_log_states_the_working_set_and_the_offload() -> None:
    facts = parse_startup_log(METAL_LOG)
    assert facts.backend == "Metal" and facts.devices == ("MTL0",)
    assert facts.metal_working_set_bytes == 11_453_250_000  # MB as ggml-metal counts them
    assert (facts.layers_offloaded, facts.layers_total) == (31, 31)
    assert facts.model_buffer_mib == pytest.approx(92.10)
    assert facts.to_dict()["metal_working_set_bytes"] == 11_453_250_000


def test_working_set_in_every_spelling_llama_cpp_used() -> None:
    """ggml-metal.m's ggml_metal_init printed the same line before the device code moved
    out (older builds with one space before "=", and the size in MiB under "MB": read as MB,
    on the low side); %8.2f pads a small size with spaces (an 8 GB Mac)."""
    for line, expected in (
        ("ggml_metal_init: recommendedMaxWorkingSetSize  = 11453.25 MB", 11_453_250_000),
        ("ggml_metal_init: recommendedMaxWorkingSetSize = 10922.67 MB", 10_922_670_000),
        ("ggml_metal_device_init: recommendedMaxWorkingSetSize  =  5726.63 MB", 5_726_630_000),
    ):
        facts = parse_startup_log(line + "\n")
        assert facts.metal_working_set_bytes == expected, line
        assert facts.backend == "Metal"


def test_no_working_set_where_the_log_has_none_or_garbage() -> None:
    assert parse_startup_log(CPU_LOG).metal_working_set_bytes is None
    for odd in (
        "ggml_metal_device_init: recommendedMaxWorkingSetSize  = lots MB",
        "ggml_metal_device_init: recommendedMaxWorkingSetSize  = 1.2.3 MB",
        "ggml_metal_device_init: recommendedMaxWorkingSetSize  = " + "9" * 5000 + " MB",
        "load_tensors: offloaded " + "9" * 5000 + "/31 layers to GPU",
    ):
        facts = parse_startup_log(odd + "\n")
        assert facts.metal_working_set_bytes is None and facts.layers_offloaded is None, odd


def test_a_cpu_server_stores_its_facts_as_before() -> None:
    """Facts a CPU build never states are left out of what a session stores, so its file
    is what it was before they existed."""
    stored = parse_startup_log(CPU_LOG).to_dict()
    assert not {"layers_offloaded", "layers_total", "metal_working_set_bytes"} & set(stored)


def test_partial_offload_on_cuda() -> None:
    facts = parse_startup_log(
        "ggml_cuda_init: found 1 CUDA devices:\n"
        "load_tensors: offloaded 12/31 layers to GPU\n"
        "load_tensors:        CUDA0 model buffer size =    35.00 MiB\n"
    )
    assert (facts.backend, facts.layers_offloaded, facts.layers_total) == ("CUDA", 12, 31)
    assert facts.metal_working_set_bytes is None


def test_a_recurrent_models_state() -> None:
    """``llama_memory_recurrent``'s lines as the pinned build's libllama formats them
    ("%s: %10s RS buffer size = %8.2f MiB", "%s: size = %7.2f MiB (%6u cells, %3d layers,
    %2u seqs %2u rs_seq), R (%s): ..."), rendered by hand: no recurrent model is at hand. A
    hybrid model logs both its attention layers' KV and its state; the state is apart."""
    log = (
        "llama_kv_cache:        CPU KV buffer size =    12.00 MiB\n"
        "llama_kv_cache: size =   12.00 MiB (  8192 cells,   4 layers,  2/2 seqs), "
        "K (f16):    6.00 MiB, V (f16):    6.00 MiB\n"
        "llama_memory_recurrent:        CPU RS buffer size =     2.67 MiB\n"
        "llama_memory_recurrent: size =    2.67 MiB (     2 cells,  24 layers,  2 seqs  0 "
        "rs_seq), R (f32):    0.28 MiB, S (f32):    2.39 MiB, P (f32):    0.00 MiB\n"
    )
    facts = parse_startup_log(log)
    assert (facts.kv_buffer_mib, facts.state_buffer_mib) == (12.0, 2.67)
    assert parse_startup_log(CPU_LOG).state_buffer_mib is None
