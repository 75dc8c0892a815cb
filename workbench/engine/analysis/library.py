"""The sessions on disk, one line each: what ran, where, on what, and how it ended."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from workbench.engine.base.errors import OutputDirError, SessionError
from workbench.engine.models.model_file import DEFAULT_MODEL_FILE
from workbench.engine.store import Session, open_session

SESSION_GLOB = "*.session.sqlite"


def data_folder() -> Path:
    """The app's own folder for sessions (platform convention), listed with ``results/``."""
    from platformdirs import user_data_path

    return user_data_path("concurrency-workbench", appauthor=False) / "sessions"


@dataclass
class SessionNotes:
    """What the user says about a session: kept beside it (``X.session.sqlite.notes.json``),
    because reading a session never writes to it."""

    label: str = ""
    tags: list[str] = field(default_factory=list)
    note: str = ""


def notes_path(session: Path) -> Path:
    return session.with_name(session.name + ".notes.json")


def load_notes(session: Path) -> SessionNotes:
    try:
        data = json.loads(notes_path(session).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return SessionNotes()
    return SessionNotes(
        str(data.get("label", "")),
        [str(t) for t in data.get("tags", [])],
        str(data.get("note", "")),
    )


def save_notes(session: Path, notes: SessionNotes) -> None:
    try:
        notes_path(session).write_text(json.dumps(asdict(notes), indent=1), encoding="utf-8")
    except OSError as exc:
        raise OutputDirError(f"cannot save notes beside {session}: {exc.strerror or exc}") from None


def delete_session(session: Path) -> None:
    """The session file, its SQLite sidecars and its notes."""
    for path in (
        session,
        session.with_name(session.name + "-wal"),
        session.with_name(session.name + "-shm"),
        notes_path(session),
    ):
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise OutputDirError(f"cannot delete {path}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class SessionInfo:
    path: Path
    error: str | None = None
    name: str = ""
    created_at: str = ""
    status: str = ""
    mode: str = ""
    hardware: str = ""
    backend: str = ""
    model: str = ""
    configs: list[str] = field(default_factory=list)
    notes: SessionNotes = field(default_factory=SessionNotes)


def model_name(model: str) -> str:
    return f"{Path(DEFAULT_MODEL_FILE).stem} (default)" if model == "default" else Path(model).name


def model_file_name(model: str) -> str:
    """The name of the file an experiment's ``model`` field ran (``default``: the default
    model's own file), as another tool names a model: a file name, never a path."""
    return DEFAULT_MODEL_FILE if model == "default" else Path(model).name


UNKNOWN_MODEL = "unknown model"


def session_models(session: Session) -> list[str]:
    """The models a session ran, by name: the file the workbench gave its server, or, for a
    server it did not start (external, imported), the name its requests gave; never the
    default model a session did not run."""
    names = set()
    for c in session.configs:
        if session.managed:
            names.add(model_name(c.run_config.server.model or "default"))
        else:
            named = c.run_config.workload.model_name
            names.add(named if named.strip() not in ("", "default") else UNKNOWN_MODEL)
    return sorted(names)


SHOWN_DIGITS = 3  # significant digits of a setting's fraction in a listing (rate=1.8715: 1.87)


def configurations_line(labels: list[str]) -> str:
    """A session's configurations on one line that reads apart: ``4 configurations:
    requests 29, 15, 21, 18; rate 3.74, 1.87, 2.65, 2.23``, each setting its labels name
    with its values in the order they ran, fractions to ``SHOWN_DIGITS`` significant
    digits. Labels that are not ``name=value`` words (a value with spaces) are listed
    whole, ``;`` between them."""
    if len(labels) == 1:
        return _short_numbers(labels[0])
    axes: dict[str, list[str]] = {}
    for label in labels:
        words = [w.partition("=") for w in label.split()]
        if not words or any(not name or not eq for name, eq, _ in words):
            return "; ".join(map(_short_numbers, labels))
        for name, _, value in words:
            shown = axes.setdefault(name, [])
            if (short := _short_number(value)) not in shown:
                shown.append(short)
    settings = "; ".join(f"{name} {', '.join(values)}" for name, values in axes.items())
    return f"{len(labels)} configurations: {settings}"


def _short_numbers(label: str) -> str:
    return " ".join(
        f"{name}={_short_number(value)}" if eq else name
        for name, eq, value in (w.partition("=") for w in label.split())
    )


def _short_number(text: str) -> str:
    """A fraction to ``SHOWN_DIGITS`` significant digits (never as an exponent); anything
    else, whole numbers included, as it is."""
    if "." not in text:
        return text
    try:
        value = float(text)
    except ValueError:
        return text
    if not math.isfinite(value) or value == 0:
        return text
    decimals = max(0, SHOWN_DIGITS - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{value:.0f}"


def describe(path: Path) -> SessionInfo:
    """One session's line; an unreadable file gets a line with its error, never a crash."""
    try:
        with open_session(path) as session:
            hw = session.hardware
            gpus = ", ".join(g.name or "?" for g in hw.gpus)
            machine = hw.machine_name
            backends = sorted(
                {c.facts.backend for c in session.configs if c.facts and c.facts.backend}
            )
            source = session.import_source()
            return SessionInfo(
                path=path,
                name=session.meta["name"],
                created_at=session.meta["created_at"],
                status=session.status,
                mode="imported" if source else session.meta["mode"],
                hardware=f"imported from {source.tool}"
                + (f" {source.version}" if source.version else "")
                if source
                else machine + (f" + {gpus}" if gpus else ""),
                backend="/".join(backends),  # empty: not known (an import, an external run)
                model=", ".join(session_models(session)),
                configs=[c.label for c in session.configs],
                notes=load_notes(path),
            )
    except SessionError as exc:
        return SessionInfo(path=path, error=str(exc))


def scan(folders: list[Path]) -> list[SessionInfo]:
    """Every session file in the folders (and their subfolders), newest first."""
    paths = sorted({p for folder in folders if folder.is_dir() for p in folder.rglob(SESSION_GLOB)})
    infos = [describe(p) for p in paths]
    return sorted(infos, key=lambda i: (_moment(i.created_at), str(i.path)), reverse=True)


def _moment(created_at: str) -> datetime:
    """When a session ran, to sort by: a time without a zone (an imported vLLM file's) is
    read as this machine's local time; text that is no time sorts last."""
    try:
        when = datetime.fromisoformat(created_at)
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)
    return when if when.tzinfo else when.astimezone()
