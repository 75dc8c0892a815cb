"""Reading a file someone else wrote, with its size bounded: a JSON document whole, or a JSON
Lines file line by line (another tool's results, a recorded trace, a conversations file)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import ImportFileError, WorkbenchError

MAX_FILE_BYTES = 128 * 2**20  # a JSON document takes ~10x its size in memory to read
MAX_LINE_BYTES = 64 * 2**20


def _size(path: Path, error: type[WorkbenchError] = ImportFileError) -> int:
    if not path.is_file():  # a folder, a FIFO (reading one would wait for ever), a device
        raise error(f"{path.name}: not a file")
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
    if size > MAX_FILE_BYTES:
        raise error(
            f"{path.name}: {size / 2**20:.0f} MiB, over the {MAX_FILE_BYTES // 2**20} MiB "
            "the workbench reads"
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


def json_line(line: str, where: str, error: type[WorkbenchError] = ImportFileError) -> Any:
    """One line of a JSON Lines file, or ``error`` naming ``where`` it is (file:line)."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise error(f"{where}: not valid JSON ({exc})") from None


def bounded_lines(
    path: Path,
    error: type[WorkbenchError] = ImportFileError,
    max_lines: int | None = None,
    max_line_bytes: int = MAX_LINE_BYTES,
) -> Iterator[str]:
    """The lines of a text file of bounded size, each bounded too, and at most ``max_lines``
    of them (blank ones count): a line too long or one too many is ``error`` naming the file
    and the line, found without reading either whole."""
    _size(path, error)
    try:
        with path.open("rb") as fh:
            number = 0
            while line := fh.readline(max_line_bytes + 1):
                number += 1
                if len(line) > max_line_bytes:
                    raise error(f"{path.name}:{number}: a line over {max_line_bytes:,} bytes")
                if max_lines is not None and number > max_lines:
                    raise error(f"{path.name}: over {max_lines:,} lines, the most it may hold")
                yield line.decode("utf-8", errors="replace")
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror or exc}") from None
