"""Decode against the memory-bandwidth bound.

At small batch a decode step reads every weight once (shared by the batch) plus each
sequence's KV cache, so a request can decode at most ``bandwidth / (weights + batch x KV in
use)`` tokens per second. Each configuration's measured per-request decode rate is shown as
a share of that bound.

Whose bandwidth depends on where the server put the model. On the CPU it is this machine's,
measured once (a large array copy) and cached per machine. With the layers offloaded to a
GPU (the startup log's backend and "offloaded k/n layers") it is the GPU's: an NVIDIA GPU's
peak from NVML, recorded in the session's fingerprint, or an Apple chip's as Apple states
it. With some layers on each, a step reads each share at its own speed.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import time
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.records import Hardware, StartupFacts
from workbench.engine.figures.per_request import token_count
from workbench.engine.measure.hardware import cpu_model
from workbench.engine.models.memory import MIB, logged_kv_bytes_per_token
from workbench.engine.store import Session, open_session, summarize_config_records

COPY_MIB = 256


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "concurrency-workbench" / "bandwidth.json"


def machine_key() -> str:
    return f"{platform.node()}|{cpu_model()}|{platform.machine()}"


def measure_bandwidth(copy_mib: int = COPY_MIB, repeats: int = 5) -> float:
    """Bytes per second of a large memory copy (read + write counted), best of ``repeats``."""
    import numpy as np

    source = np.ones(copy_mib * MIB // 8, dtype=np.float64)
    target = np.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best = min(best, time.perf_counter() - start)
    return 2 * source.nbytes / best


def machine_bandwidth(refresh: bool = False) -> tuple[float, bool]:
    """(bytes/s, measured now?) from the per-machine cache, measuring when missing."""
    path = cache_file()
    key = machine_key()
    cached: dict[str, float] = {}
    with contextlib.suppress(OSError, ValueError):
        cached = json.loads(path.read_text())
    if not refresh and isinstance(cached.get(key), int | float):
        return float(cached[key]), False
    value = measure_bandwidth()
    cached[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cached, indent=1))
    except OSError:
        pass  # a read-only home: measure again next time
    return value, True


GPU_BACKENDS = ("CUDA", "Metal")

# Unified memory bandwidth in GB/s as Apple states it, by chip and, where two versions of a
# chip differ, by CPU cores (the binned M3 Max and M4 Max have 14, the full ones 16).
APPLE_BANDWIDTH_GBS: dict[tuple[str, int | None], float] = {
    ("M1", None): 68.25,
    ("M1 Pro", None): 200.0,
    ("M1 Max", None): 400.0,
    ("M1 Ultra", None): 800.0,
    ("M2", None): 100.0,
    ("M2 Pro", None): 200.0,
    ("M2 Max", None): 400.0,
    ("M2 Ultra", None): 800.0,
    ("M3", None): 100.0,
    ("M3 Pro", None): 150.0,
    ("M3 Max", 14): 300.0,
    ("M3 Max", 16): 400.0,
    ("M3 Ultra", None): 819.0,
    ("M4", None): 120.0,
    ("M4 Pro", None): 273.0,
    ("M4 Max", 14): 410.0,
    ("M4 Max", 16): 546.0,
    ("M5", None): 153.0,
}
_APPLE_CHIP = re.compile(r"\bApple (M\d+)(?: (Pro|Max|Ultra))?\b")


@dataclass(frozen=True)
class Bandwidth:
    """A memory bandwidth and where the figure came from, in words a view can show."""

    bytes_per_s: float
    source: str


def apple_bandwidth(chip: str | None, cpu_cores: int | None) -> Bandwidth | None:
    """An Apple chip's bandwidth from its name (``sysctl machdep.cpu.brand_string``, e.g.
    "Apple M3 Max") and CPU cores; None for a chip not in the table."""
    match = _APPLE_CHIP.search(chip or "")
    if match is None:
        return None
    name = " ".join(part for part in match.groups() if part)
    gbs = APPLE_BANDWIDTH_GBS.get((name, None)) or APPLE_BANDWIDTH_GBS.get((name, cpu_cores))
    if gbs is None:
        return None
    cores = f", {cpu_cores} CPU cores" if (name, None) not in APPLE_BANDWIDTH_GBS else ""
    return Bandwidth(gbs * 1e9, f"Apple {name}{cores}: Apple's stated unified memory bandwidth")


def nvidia_bandwidth(hardware: Hardware) -> Bandwidth | None:
    """The recorded peak bandwidth of the session's NVIDIA GPUs (the slowest, where they
    differ: CUDA numbers devices its own way, so which one ran is not certain); None when
    the fingerprint has none (nvidia-smi only, or a session recorded before it was kept)."""
    known = [g for g in hardware.gpus if (g.memory_bandwidth_gbs or 0.0) > 0]  # a file may lie
    if not known:
        return None
    slowest = min(known, key=lambda g: g.memory_bandwidth_gbs or 0.0)
    gbs = slowest.memory_bandwidth_gbs or 0.0
    differ = len({g.memory_bandwidth_gbs for g in known}) > 1
    return Bandwidth(
        gbs * 1e9,
        f"{slowest.name or 'GPU'}{' (the slowest GPU)' if differ else ''}: peak from NVML, "
        "memory clock x bus width x 2",
    )


def gpu_share(facts: StartupFacts) -> float:
    """The share of the model's layers the server put on a GPU (0 to 1): 0 for a CPU
    backend, or where the log did not say how many layers it offloaded."""
    if facts.backend not in GPU_BACKENDS or not facts.layers_total:
        return 0.0
    return min(1.0, max(0, facts.layers_offloaded or 0) / facts.layers_total)


def gpu_bandwidth(hardware: Hardware, backend: str | None) -> Bandwidth | None:
    """The bandwidth of the GPU a backend runs on, from the session's own fingerprint."""
    if backend == "CUDA":
        return nvidia_bandwidth(hardware)
    if backend == "Metal":
        return apple_bandwidth(hardware.apple_chip, hardware.cpu_physical_cores)
    return None


def step_bandwidth(share: float, cpu: float, gpu: float | None) -> float:
    """Bytes per second over a step whose ``share`` of layers sits on the GPU: each share is
    read at its own speed, one after the other."""
    if gpu is None or share <= 0.0:
        return cpu
    return 1.0 / (share / gpu + (1.0 - share) / cpu) if share < 1.0 else gpu


@dataclass(frozen=True)
class RooflineRow:
    label: str
    slots: int
    batch: int
    weights_mib: float
    kv_in_use_mib: float
    bound_tok_s: float
    decode_tok_s: float | None
    bandwidth: float | None = None  # bytes/s behind this row's bound
    gpu_share: float = 0.0  # of each step read at the GPU's bandwidth

    @property
    def share(self) -> float | None:
        return None if self.decode_tok_s is None else self.decode_tok_s / self.bound_tok_s


def _step_sizes(facts: StartupFacts | None) -> bool:
    """Whether a server's start-up log gave what a step reads: its weights and KV sizes."""
    return (
        facts is not None
        and facts.model_buffer_mib is not None
        and (logged_kv_bytes_per_token(facts) is not None)
    )


def _nothing_to_bound(session: Session) -> str:
    """Why none of a session's configurations has a bound, in words a user can act on."""
    needs = "the model's and the KV cache's sizes in memory, which a roofline needs"
    source = session.import_source()
    if source is not None:
        return f"it was {source.describe()}, whose results do not say {needs}"
    if not session.managed:
        return f"it measured an external server, which does not tell the workbench {needs}"
    return f"no configuration's server logged {needs} (did none start?)"


def roofline(session: Session, bandwidth: float, gpu: float | None = None) -> list[RooflineRow]:
    """Each configuration against its bound: ``bandwidth`` (bytes/s) for what runs on the
    CPU, ``gpu`` for the layers a server offloaded (None: the CPU's for those too)."""
    rows = []
    for config in session.configs:
        facts = config.facts or StartupFacts()
        weights, per_token = facts.model_buffer_mib, logged_kv_bytes_per_token(facts)
        if weights is None or per_token is None:
            continue  # external servers and failed starts log no buffers
        records = [r for r in session.records(config.index) if r.ok and not r.warmup]
        summary = summarize_config_records(config, records, managed=session.managed)
        # KV read per step for one sequence: its cached tokens, on average the prompt plus
        # half the output.
        lengths = [
            (token_count((r.timings or {}).get("prompt_n")) or 0) + (r.output_tokens[0] or 0) / 2
            for r in records
        ]
        kv_in_use = (sum(lengths) / len(lengths) if lengths else 0.0) * per_token
        batch = max(1, min(summary.slots, summary.concurrency))
        step_bytes = weights * MIB + batch * kv_in_use
        share = gpu_share(facts) if gpu is not None else 0.0
        speed = step_bandwidth(share, bandwidth, gpu)
        rows.append(
            RooflineRow(
                config.label,
                summary.slots,
                batch,
                float(weights),
                kv_in_use / MIB,
                speed / step_bytes,
                summary.mean.get("decode_tok_s"),
                speed,
                share,
            )
        )
    return rows


@dataclass(frozen=True)
class RooflineReport:
    """A session's roofline with where its bandwidth came from."""

    rows: list[RooflineRow]
    bandwidth: float  # bytes per second: the GPU's where the runs were on one
    how: str  # given / measured now / measured earlier on this machine / the GPU's source
    recorded_on: str | None  # the session's machine, when it is not this one (bound unfair)
    on_gpu: bool = False  # some configuration's bound is (partly) the GPU's


def session_roofline(
    path: str | Path, bandwidth_gbs: float | None = None, refresh: bool = False
) -> RooflineReport:
    """The roofline of a session file, against a given bandwidth or the ones its runs used:
    the GPU's for the layers a server offloaded, this machine's for the rest (measured after
    the file opened, so a wrong path fails at once, and only when a configuration needs
    it)."""
    with open_session(path) as session:
        if not any(_step_sizes(c.facts) for c in session.configs):
            raise WorkbenchError(f"{Path(path).name}: {_nothing_to_bound(session)}")
        if bandwidth_gbs:
            given = bandwidth_gbs * 1e9
            return RooflineReport(roofline(session, given), given, "given", None)
        facts = [c.facts for c in session.configs if c.facts is not None]
        offloaded = [f for f in facts if gpu_share(f) > 0.0]
        gpu = gpu_bandwidth(session.hardware, offloaded[0].backend) if offloaded else None
        cpu: tuple[float, bool] | None = None
        if gpu is None or any(gpu_share(f) < 1.0 for f in facts):
            cpu = machine_bandwidth(refresh=refresh)
        gpu_speed = gpu.bytes_per_s if gpu is not None else None
        rows = roofline(session, cpu[0] if cpu else gpu_speed or 0.0, gpu_speed)
        host = session.hardware.hostname
    elsewhere = host if cpu and host and host != platform.node() else None
    cpu_how = (
        "" if cpu is None else "measured now" if cpu[1] else "measured earlier on this machine"
    )
    if gpu is None:
        assert cpu is not None
        how = cpu_how
        if offloaded:
            how += (
                f"; the session does not say its {offloaded[0].backend} GPU's bandwidth, so "
                "the bound is the CPU's (give the GPU's with --bandwidth-gbs)"
            )
        return RooflineReport(rows, cpu[0], how, elsewhere)
    how = gpu.source if cpu is None else f"{gpu.source}; CPU {cpu[0] / 1e9:.1f} GB/s, {cpu_how}"
    return RooflineReport(rows, gpu.bytes_per_s, how, elsewhere, on_gpu=True)
