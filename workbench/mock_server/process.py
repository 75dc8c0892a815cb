"""The mock in a process of its own, for tests and benches that measure against it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from workbench.engine.net.bounded_http import bounded_get

ROOT = Path(__file__).resolve().parents[2]  # where ``-m workbench.mock_server`` is found


class MockProcess:
    """The mock in a process of its own (it must not share an interpreter with the client it
    checks), optionally pinned to one core: its address, what it served, and a stop."""

    def __init__(self, *args: str, core: int | None = None) -> None:
        command = [sys.executable, "-m", "workbench.mock_server", "--port", "0", *args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        if core is not None and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > core:
            os.sched_setaffinity(self.process.pid, {core})
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"the mock server did not start: {line!r}")
        self.url = line.removeprefix("listening on ")

    def served(self) -> dict[str, dict[str, Any]]:
        """What it did with each prompt's latest request (``/mock/log``)."""
        answer = bounded_get(self.url, "/mock/log", max_bytes=256 * 2**20, deadline_s=30.0)
        if answer is None or answer.status != 200:
            raise RuntimeError("the mock server's log could not be read")
        return {s["prompt"]: s for s in json.loads(answer.body)}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> MockProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
