"""A fingerprint of the machine a session was recorded on, for cross-machine comparison."""

from __future__ import annotations

import contextlib
import platform
import subprocess
import sys
from pathlib import Path

import psutil

from workbench.engine.base.records import Gpu, Hardware
from workbench.engine.measure.gpu_memory import MAX_DEVICES, nvml
from workbench.engine.measure.process_memory import RSS, process_measure


def _run(cmd: list[str], timeout: float = 5.0) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return (out.stdout or "") + (out.stderr or "")


def cpu_model() -> str:
    if sys.platform == "darwin":
        return _run(["sysctl", "-n", "machdep.cpu.brand_string"]).strip() or platform.processor()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def nvidia_gpus() -> list[Gpu]:
    """GPUs through NVML when nvidia-ml-py is installed (with each one's memory bandwidth);
    through nvidia-smi otherwise."""
    session = nvml()
    if session.module is not None:
        return session.gpus()
    out = _run(
        [
            "nvidia-smi",
            "--query-gpu=name,memory.total,driver_version",
            "--format=csv,noheader,nounits",
        ]
    )
    gpus = []
    for line in out.splitlines()[:MAX_DEVICES]:
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[1].isdigit():
            gpus.append(
                Gpu(name=parts[0], memory_bytes=int(parts[1]) * 1024 * 1024, driver=parts[2])
            )
    return gpus


def apple_chip() -> str | None:
    if sys.platform != "darwin":
        return None
    return _run(["sysctl", "-n", "machdep.cpu.brand_string"]).strip() or None


def server_build(binary: str) -> str:
    """What ``llama-server --version`` says (build number, commit, compiler, backends)."""
    text = _run([binary, "--version"], timeout=15.0)
    lines = [line for line in text.splitlines() if line.startswith(("version", "built with"))]
    return "; ".join(lines) or text.strip()[-300:]


def fingerprint(server_binary: str | None = None) -> Hardware:
    """This machine; with the server binary the workbench starts, that binary and its build;
    and how the server's memory is counted here, where that is not the RSS (macOS)."""
    memory = process_measure()
    return Hardware(
        hostname=platform.node(),
        os=f"{platform.system()} {platform.release()}",
        os_version=platform.version(),
        machine=platform.machine(),
        cpu_model=cpu_model(),
        cpu_physical_cores=psutil.cpu_count(logical=False),
        cpu_logical_cores=psutil.cpu_count(logical=True),
        ram_bytes=psutil.virtual_memory().total,
        python=platform.python_version(),
        gpus=tuple(nvidia_gpus()),
        apple_chip=apple_chip(),
        llama_server=server_binary or None,
        llama_server_build=server_build(server_binary) if server_binary else None,
        process_memory=None if memory.name == RSS.name else memory.name,
    )
