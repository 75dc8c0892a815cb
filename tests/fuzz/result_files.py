"""What the fuzz tests of another tool's result file check: a file is imported (read, its
runs made configurations, every request made a record, all that happens before a session
file is written) or refused in one line naming a file it was given, never a traceback."""

from __future__ import annotations

from pathlib import Path

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.interop.formats import read_result_file
from workbench.engine.interop.imported import import_events

MAX_LINE = 500  # characters of a refusal: the place, the problem, the value cut short


def refusal(exc: WorkbenchError, *names: str) -> None:
    """``exc`` is one short line that names one of the files ``names``."""
    line = str(exc)
    assert "\n" not in line and "\r" not in line and len(line) < MAX_LINE, line
    assert line.startswith(tuple(f"{name}:" for name in names)), line


def imported(path: Path, *beside: str) -> bool:
    """Whether ``path`` imports (everything an import checks before it writes); a file it
    refuses is refused in one line naming it, or one of the files ``beside`` it."""
    try:
        result = read_result_file(path)
        import_events(result)
    except WorkbenchError as exc:
        refusal(exc, path.name, *beside)
        return False
    return True
