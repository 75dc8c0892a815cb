"""A real agent whose clock reads ``SHIFT_S`` seconds ahead of this machine's, and which keeps
a copy of every line it sends in ``LOG`` (``python shifted_agent.py SHIFT_S LOG agent``): a
far machine with a clock of its own, whose own measurements a test can read back."""

from __future__ import annotations

import sys
import time
from typing import Any, BinaryIO


class Tee:
    """The agent's stdout, each write copied to the log."""

    def __init__(self, out: BinaryIO, log: BinaryIO) -> None:
        self.out, self.log = out, log

    def write(self, data: bytes) -> Any:
        self.log.write(data)
        self.log.flush()
        return self.out.write(data)

    def flush(self) -> None:
        self.out.flush()


def main() -> int:
    shift_ns = round(float(sys.argv[1]) * 1e9)
    real = time.perf_counter_ns
    time.perf_counter_ns = lambda: real() + shift_ns  # every reading of the engine's clock
    from workbench.engine.remote.agent import serve

    with open(sys.argv[2], "ab") as log:
        return serve(sys.stdin.buffer, Tee(sys.stdout.buffer, log))  # type: ignore[arg-type]


if __name__ == "__main__":
    sys.exit(main())
