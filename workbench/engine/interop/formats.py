"""Which tool wrote a result file, and reading it whole: one entry point for the CLI's
``import`` and the window's drop."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench.engine.base.errors import ImportFileError, OutputDirError
from workbench.engine.interop.imported import ImportedResult, write_imported_session
from workbench.engine.interop.vllm_result import looks_like_vllm, read_vllm

MAX_FILE_BYTES = 512 * 2**20

# (what the document looks like, its reader, the tool's name): tried in turn.
READERS: tuple[tuple[Callable[[Any], bool], Callable[[Any, str], ImportedResult], str], ...] = (
    (looks_like_vllm, read_vllm, "vllm bench serve"),
)
KNOWN_FORMATS = "vllm bench serve --save-result --save-detailed JSON"


def read_json(path: Path) -> Any:
    """A JSON file of bounded size, or one clear error."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ImportFileError(
                f"{path.name}: {size / 2**20:.0f} MiB, over the {MAX_FILE_BYTES // 2**20} MiB "
                "an import reads"
            )
        with path.open("rb") as fh:
            return json.loads(fh.read(MAX_FILE_BYTES + 1))
    except OSError as exc:
        raise ImportFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:
        raise ImportFileError(f"{path.name}: not valid JSON ({exc})") from None


def read_result_file(path: Path) -> ImportedResult:
    """The result ``path`` holds, read by the reader of the tool that wrote it."""
    doc = read_json(path)
    for looks_like, read, _tool in READERS:
        if looks_like(doc):
            return read(doc, path.name)
    raise ImportFileError(
        f"{path.name}: not a result file this version reads (it reads {KNOWN_FORMATS})"
    )


def import_file(path: Path, folder: Path) -> Path:
    """Import ``path`` as a new session in ``folder`` (named after it, never over another
    session); returns the session's path."""
    result = read_result_file(path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot create {folder}: {exc.strerror or exc}") from None
    stem = path.name.removesuffix(".json").removesuffix(".jsonl")
    target = folder / f"{stem}.session.sqlite"
    copy = 1
    while target.exists():
        copy += 1
        target = folder / f"{stem}-{copy}.session.sqlite"
    return write_imported_session(result, target)
