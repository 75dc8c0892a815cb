"""The engine stays headless: no Qt import anywhere under workbench/engine."""

from __future__ import annotations

import ast
from pathlib import Path

import workbench.engine

QT_MODULES = {"PySide6", "PyQt5", "PyQt6", "pyqtgraph", "qasync", "shiboken6"}


def test_engine_never_imports_qt():
    root = Path(workbench.engine.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in QT_MODULES]
    assert offenders == []
    assert len(list(root.rglob("*.py"))) > 10  # the scan really saw the engine
