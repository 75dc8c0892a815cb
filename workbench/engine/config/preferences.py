"""What the workbench remembers between starts: the llama-server binary the user chose (and how
it was found), the model last picked, the machines of the Machine picker and the folders the
Sessions tab lists besides the output folder. One small JSON
file in the platform's config folder (``$WORKBENCH_CONFIG_DIR`` moves it); ``reset`` forgets
everything.

The file is the user's but may be damaged or from another version: it is read up to
``MAX_BYTES``, each value is checked against ``_File`` on its own, and what does not pass is
left at its default with a note saying so, never an error that stops the app.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.base.validation import validated

APP_NAME = "concurrency-workbench"
FILE_NAME = "preferences.json"
MAX_BYTES = 64 * 1024
MAX_TEXT = 4096  # a path or a label
MAX_MACHINES = 32  # hosts a list of machines holds (and folders the Sessions tab lists)


@dataclass(frozen=True)
class Preferences:
    server_bin: str | None = None  # the llama-server the user chose
    server_bin_found_by: str | None = None  # how: "PATH", "Homebrew", "chosen file", ...
    model: str | None = None  # the GGUF model last picked
    machines: tuple[str, ...] = ()  # the hosts added by hand to the Machine picker
    machines_ticked: tuple[str, ...] = ()  # the machines a run goes to ("local": this one)
    session_folders: tuple[str, ...] = ()  # folders of sessions added in the Sessions tab


def _printable(text: str) -> str:
    if not text.isprintable():
        raise ValueError("must be printable text (no control characters)")
    return text


_Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT), AfterValidator(_printable)]
"""A text the file may hold: a path, a label, a host."""
_Texts = Annotated[list[_Text], Field(max_length=MAX_MACHINES)]


class _File(BaseModel):
    """The preferences file: each key one of ``Preferences``' (a key it does not know, as a
    newer workbench's, is passed over)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, defer_build=True)
    server_bin: _Text | None = None
    server_bin_found_by: _Text | None = None
    model: _Text | None = None
    machines: _Texts | None = None
    machines_ticked: _Texts | None = None
    session_folders: _Texts | None = None


def config_folder() -> Path:
    override = os.environ.get("WORKBENCH_CONFIG_DIR")
    if override:
        return Path(override)
    from platformdirs import user_config_path

    return user_config_path(APP_NAME, appauthor=False)


def preferences_path() -> Path:
    return config_folder() / FILE_NAME


def load_preferences(path: Path | None = None) -> tuple[Preferences, list[str]]:
    """The remembered preferences, and notes on what was ignored (a damaged file)."""
    path = path or preferences_path()
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return Preferences(), []
    except OSError as exc:
        return Preferences(), [f"cannot read {path}: {exc.strerror or exc}; using defaults"]
    if len(raw) > MAX_BYTES:
        return Preferences(), [f"{path} is over {MAX_BYTES} bytes; using defaults"]
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        return Preferences(), [f"{path} is not JSON; using defaults"]
    if not isinstance(document, dict):
        return Preferences(), [f"{path} does not hold an object; using defaults"]
    values: dict[str, Any] = {}
    notes = []
    # each key on its own: a bad one is left at its default, the others kept
    for name in _File.model_fields:
        if document.get(name) is None:
            continue
        try:
            found = validated(_File, {name: document[name]}, str(path))
        except WorkbenchError as exc:
            notes.append(f"{exc}; ignored")
            continue
        value = getattr(found, name)
        values[name] = tuple(value) if isinstance(value, list) else value
    return Preferences(**values), notes


def save_preferences(preferences: Preferences, path: Path | None = None) -> Path:
    """Write them whole, through a temporary file, so a crash never leaves half a file."""
    path = path or preferences_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(asdict(preferences), indent=1), encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        raise WorkbenchError(f"cannot save preferences to {path}: {exc.strerror or exc}") from None
    return path


def remember(path: Path | None = None, **changes: str | tuple[str, ...] | None) -> Preferences:
    """Change some preferences and save them all."""
    current, _ = load_preferences(path)
    updated = replace(current, **changes)
    save_preferences(updated, path)
    return updated


def reset_preferences(path: Path | None = None) -> bool:
    """Forget everything; False when there was nothing to forget."""
    path = path or preferences_path()
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise WorkbenchError(f"cannot remove {path}: {exc.strerror or exc}") from None
    return True
