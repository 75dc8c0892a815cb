"""Where a frozen app keeps what it carries: PyInstaller's data folder, in which
packaging/workbench.spec puts the llama-server (``server/discovery.py`` finds it) and the
default model (``models/model_file.py``), and from which the launcher starts the app."""

from __future__ import annotations

import sys
from pathlib import Path


def bundle_root() -> Path | None:
    """The frozen app's data folder (PyInstaller's ``sys._MEIPASS``); None when running
    from source."""
    root = getattr(sys, "_MEIPASS", None)
    return Path(root) if getattr(sys, "frozen", False) and root else None
