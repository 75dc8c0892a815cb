"""Which tool wrote a result file, and reading it whole: one entry point for the CLI's
``import`` and the window's drop."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from workbench.engine.base.errors import ImportFileError, OutputDirError
from workbench.engine.interop.aiperf import RECORDS as AIPERF_RECORDS
from workbench.engine.interop.aiperf import SUMMARY as AIPERF_SUMMARY
from workbench.engine.interop.aiperf import looks_like_aiperf_summary, read_aiperf
from workbench.engine.interop.files import read_json
from workbench.engine.interop.guidellm import looks_like_guidellm, read_guidellm
from workbench.engine.interop.imported import ImportedResult, write_imported_session
from workbench.engine.interop.vllm_result import looks_like_vllm, read_vllm

KNOWN_FORMATS = (
    "vllm bench serve --save-result --save-detailed JSON, GuideLLM's benchmarks.json, "
    "AIPerf's profile_export.jsonl"
)


# The names the tools give every result file; their folder tells one run from another.
GENERIC_NAMES = ("benchmarks", "profile_export", "profile_export_aiperf")


def read_result_file(path: Path) -> ImportedResult:
    """The result ``path`` holds, read by the reader of the tool that wrote it: each validates
    the whole file against its model before anything is kept."""
    if path.suffix == ".jsonl":
        return read_aiperf(path)
    doc = read_json(path)
    if looks_like_aiperf_summary(doc):
        return read_aiperf(path)
    if looks_like_guidellm(doc):
        return read_guidellm(doc, path.name)
    if looks_like_vllm(doc):
        return read_vllm(doc, path.name)
    raise ImportFileError(
        f"{path.name}: not a result file this version reads (it reads {KNOWN_FORMATS})"
    )


def one_per_run(paths: list[Path]) -> list[Path]:
    """The files to import, without an AIPerf summary whose records file is also given:
    both stand for one run."""
    given = {p.resolve() for p in paths}
    return [
        p
        for p in paths
        if not (p.name == AIPERF_SUMMARY and (p.with_name(AIPERF_RECORDS)).resolve() in given)
    ]


def import_file(path: Path, folder: Path) -> Path:
    """Import ``path`` as a new session in ``folder`` (named after it, never over another
    session); returns the session's path."""
    stem = path.name.removesuffix(".json").removesuffix(".jsonl")
    if stem in GENERIC_NAMES:  # every run of the tool writes this name: say which run
        stem = f"{path.parent.name}-{stem}"
    result = replace(read_result_file(path), name=stem)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"cannot create {folder}: {exc.strerror or exc}") from None
    target = folder / f"{stem}.session.sqlite"
    copy = 1
    while target.exists():
        copy += 1
        target = folder / f"{stem}-{copy}.session.sqlite"
    return write_imported_session(result, target)
