"""Facts llama-server states about itself in its startup log.

The slot layout (``n_slots``, ``n_ctx_slot``, ``kv_unified``) is what decides how much context
each request really gets, and the buffer sizes are the measured side of the memory estimate, so
they are parsed from the log rather than assumed from the flags we passed.
"""

from __future__ import annotations

import re

from workbench.engine.base.records import StartupFacts

_SLOTS = re.compile(
    r"n_slots\s*=\s*(\d+),\s*n_ctx_slot\s*=\s*(\d+)(?:,\s*kv_unified\s*=\s*'?(\w+)'?)?"
)
_N_CTX = re.compile(r"\bn_ctx\s*=\s*(\d+)")
_N_CTX_TRAIN = re.compile(r"print_info:\s+n_ctx_train\s*=\s*(\d+)")
_KV_SIZE = re.compile(r"llama_kv_cache\w*:\s+size\s*=\s*([\d.]+)\s*MiB")
_STATE_SIZE = re.compile(r"llama_memory_recurrent:\s+size\s*=\s*([\d.]+)\s*MiB")
_KV_BUFFER = re.compile(r"llama_kv_cache\w*:\s+(\S+)\s+KV buffer size\s*=\s*([\d.]+)\s*MiB")
_MODEL_BUFFER = re.compile(r"(\S+)\s+model buffer size\s*=\s*([\d.]+)\s*MiB")
_COMPUTE_BUFFER = re.compile(r"(\S+)\s+compute buffer size\s*=\s*([\d.]+)\s*MiB")
_OUTPUT_BUFFER = re.compile(r"(\S+)\s+output buffer size\s*=\s*([\d.]+)\s*MiB")
_BUILD = re.compile(r"\bbuild[:\s]+(\d+\s*\([^)]*\)(?:\s+with\s+.*)?)$")
_BACKENDS = (
    (re.compile(r"ggml_cuda_init|CUDA\d*\s+model buffer|using device CUDA", re.I), "CUDA"),
    (re.compile(r"ggml_metal_\w*init|using device MTL\d*|\bMTL\d*\s+model buffer"), "Metal"),
    (re.compile(r"ggml_vulkan|Vulkan\d*\s+model buffer", re.I), "Vulkan"),
    (re.compile(r"ROCm|HIP\d*\s+model buffer", re.I), "ROCm"),
)
_BACKEND_WORDS = ("cuda", "metal", "mtl", "vulkan", "rocm", "hip")
_DEVICE = re.compile(r"using device (\S+)")
_OFFLOADED = re.compile(r"offloaded\s+(\d{1,9})/(\d{1,9})\s+layers to GPU")
# ggml-metal: "%s: recommendedMaxWorkingSetSize  = %8.2f MB" with the size over 1e6. Older
# builds divided by 1024 x 1024 under the same "MB": read as MB, their limit comes out 4.6 %
# low, on the safe side of what fits.
_WORKING_SET = re.compile(r"recommendedMaxWorkingSetSize\s*=\s*(\d{1,12}(?:\.\d{1,6})?)\s*MB\b")


def parse_startup_log(text: str) -> StartupFacts:
    """Parse the log text written so far; fields not (yet) logged stay None."""
    n_slots: int | None = None
    n_ctx_slot: int | None = None
    kv_unified: bool | None = None
    n_ctx: int | None = None
    n_ctx_train: int | None = None
    build: str | None = None
    backend: str | None = None
    devices: list[str] = []
    model_mib: dict[str, float] = {}
    compute_mib: dict[str, float] = {}
    output_mib: dict[str, float] = {}
    kv_buffers: list[float] = []
    kv_sizes: list[float] = []
    state_sizes: list[float] = []
    offloaded: tuple[int, int] | None = None
    working_set: int | None = None
    # A plain substring test before each regex: the buffer patterns backtrack at every
    # position of every line, and this runs between /health and "healthy" on each start.
    for line in text.splitlines():
        if "n_slots" in line and (m := _SLOTS.search(line)) and n_slots is None:
            n_slots = int(m.group(1))
            n_ctx_slot = int(m.group(2))
            if m.group(3) is not None:
                kv_unified = m.group(3).lower() in ("true", "1")
        if "llama_context" in line and (m := _N_CTX.search(line)) and n_ctx is None:
            n_ctx = int(m.group(1))
        if "n_ctx_train" in line and (m := _N_CTX_TRAIN.search(line)) and n_ctx_train is None:
            n_ctx_train = int(m.group(1))
        if "llama_kv_cache" in line:
            if m := _KV_SIZE.search(line):  # one line per cache (two for sliding-window models)
                kv_sizes.append(float(m.group(1)))
            if m := _KV_BUFFER.search(line):
                kv_buffers.append(float(m.group(2)))
        if "llama_memory_recurrent" in line and (m := _STATE_SIZE.search(line)):
            state_sizes.append(float(m.group(1)))
        if "model buffer size" in line and (m := _MODEL_BUFFER.search(line)) and "KV" not in line:
            model_mib[m.group(1)] = float(m.group(2))
        if "compute buffer size" in line and (m := _COMPUTE_BUFFER.search(line)):
            compute_mib[m.group(1)] = float(m.group(2))
        if "output buffer size" in line and (m := _OUTPUT_BUFFER.search(line)):
            output_mib[m.group(1)] = float(m.group(2))
        if "build" in line and (m := _BUILD.search(line)) and build is None:
            build = m.group(1)
        if "using device" in line and (m := _DEVICE.search(line)) and m.group(1) not in devices:
            devices.append(m.group(1))
        if "offloaded" in line and (m := _OFFLOADED.search(line)) and offloaded is None:
            offloaded = int(m.group(1)), int(m.group(2))
        if "WorkingSet" in line and (m := _WORKING_SET.search(line)) and working_set is None:
            working_set = round(float(m.group(1)) * 1e6)
        if backend is None and any(word in line.lower() for word in _BACKEND_WORDS):
            for pattern, name in _BACKENDS:
                if pattern.search(line):
                    backend = name
                    break
    if backend is None and (model_mib or n_slots is not None):
        backend = "CPU"
    return StartupFacts(
        n_slots=n_slots,
        n_ctx_slot=n_ctx_slot,
        kv_unified=kv_unified,
        n_ctx=n_ctx,
        kv_buffer_mib=round(sum(kv_sizes or kv_buffers), 2) if kv_sizes or kv_buffers else None,
        model_buffer_mib=round(sum(model_mib.values()), 2) if model_mib else None,
        compute_buffer_mib=round(sum(compute_mib.values()), 2) if compute_mib else None,
        output_buffer_mib=round(sum(output_mib.values()), 2) if output_mib else None,
        state_buffer_mib=round(sum(state_sizes), 2) if state_sizes else None,
        n_ctx_train=n_ctx_train,
        backend=backend,
        build=build,
        devices=tuple(devices),
        layers_offloaded=offloaded[0] if offloaded else None,
        layers_total=offloaded[1] if offloaded else None,
        metal_working_set_bytes=working_set,
    )
