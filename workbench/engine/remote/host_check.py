"""A host's facts before a run: what would run there, and one line per problem a user can
act on. The agent answers ``check`` with them; the ``local`` host is checked the same way,
so every host of a run is described alike before anything starts."""

from __future__ import annotations

import platform
from pathlib import Path

import psutil

from workbench import __version__
from workbench.engine.base.errors import ModelFileError, ServerBinaryNotFound
from workbench.engine.base.escaping import printable
from workbench.engine.measure.hardware import apple_chip, nvidia_gpus
from workbench.engine.models.gguf_header import loadable_model
from workbench.engine.remote.protocol import PROTOCOL, HostFacts
from workbench.engine.server.discovery import find_server_binary

GIB = 2**30
LOW_MEMORY_BYTES = GIB  # less free than this and even the smallest model may not load


def host_facts(model: str | None, server_bin: str | None) -> HostFacts:
    """This machine's facts for a run of ``model`` (None: the default model) with
    ``server_bin`` (None: the binary the workbench would find)."""
    problems = []
    binary = found_by = None
    try:
        found = find_server_binary(server_bin)
        binary, found_by = found.path, found.found_by
    except ServerBinaryNotFound as exc:
        problems.append(str(exc))
    model_path: Path | None = None
    try:
        model_path = loadable_model(model or "default")
    except ModelFileError as exc:
        problems.append(str(exc))
    memory = psutil.virtual_memory()
    if memory.available < LOW_MEMORY_BYTES:
        problems.append(
            f"only {memory.available / GIB:.2f} GiB of memory is free: close something, "
            "or the server may not load the model"
        )
    return HostFacts(
        hostname=platform.node(),
        workbench_version=__version__,
        protocol=PROTOCOL,
        os=f"{platform.system()} {platform.release()}",
        server_binary=binary,
        server_found_by=found_by,
        model=None if model_path is None else str(model_path),
        model_bytes=None if model_path is None else model_path.stat().st_size,
        gpus=gpu_names(),
        ram_bytes=memory.total,
        free_memory_bytes=memory.available,
        problems=tuple(problems),
    )


def gpu_names() -> tuple[str, ...]:
    """The GPUs a server could use, as a line each names them."""
    names = [
        f"{g.name or 'NVIDIA GPU'}"
        + ("" if g.memory_bytes is None else f" ({g.memory_bytes / GIB:.0f} GiB)")
        for g in nvidia_gpus()
    ]
    if (chip := apple_chip()) is not None:
        names.append(f"{chip} (Metal)")
    return tuple(names)


def facts_line(host: str, facts: HostFacts) -> str:
    """One line of what a host would run with, as the CLI prints it before a run (safe
    for a terminal: a far host's facts are what it sent)."""
    binary = (
        "no llama-server"
        if facts.server_binary is None
        else f"{facts.server_binary} ({facts.server_found_by})"
    )
    model = "no model" if facts.model is None else Path(facts.model).name
    gpus = ", ".join(facts.gpus) or "no GPU"
    free = (
        "" if facts.free_memory_bytes is None else f", {facts.free_memory_bytes / GIB:.1f} GiB free"
    )
    return printable(
        f"{host}: workbench {facts.workbench_version} on {facts.hostname}, {binary}, "
        f"{model}, {gpus}{free}"
    )
