"""Reading a result file whole, with its size bounded: a JSON document, or a JSON Lines file
line by line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import ImportFileError

MAX_FILE_BYTES = 128 * 2**20  # a JSON document takes ~10x its size in memory to read
MAX_LINE_BYTES = 64 * 2**20


def _size(path: Path) -> int:
    if not path.is_file():  # a folder, a FIFO (reading one would wait for ever), a device
        raise ImportFileError(f"{path.name}: not a file")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ImportFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size > MAX_FILE_BYTES:
        raise ImportFileError(
            f"{path.name}: {size / 2**20:.0f} MiB, over the {MAX_FILE_BYTES // 2**20} MiB "
            "an import reads"
        )
    return size


def read_json(path: Path) -> Any:
    """A JSON file of bounded size, or one clear error."""
    _size(path)
    try:
        with path.open("rb") as fh:
            return json.loads(fh.read(MAX_FILE_BYTES + 1))
    except OSError as exc:
        raise ImportFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ImportFileError(f"{path.name}: not valid JSON ({exc})") from None


def bounded_lines(path: Path) -> Iterator[str]:
    """The lines of a text file of bounded size, each bounded too."""
    _size(path)
    try:
        with path.open("rb") as fh:
            while line := fh.readline(MAX_LINE_BYTES + 1):
                if len(line) > MAX_LINE_BYTES:
                    raise ImportFileError(f"{path.name}: a line over {MAX_LINE_BYTES} bytes")
                yield line.decode("utf-8", errors="replace")
    except OSError as exc:
        raise ImportFileError(f"cannot read {path}: {exc.strerror or exc}") from None
