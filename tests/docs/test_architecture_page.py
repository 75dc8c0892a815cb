"""The architecture page's table of the engine's layers is the code's: the layers in the order
the import contract keeps them, and every module of each layer named in its row, so a module
added or moved without the page fails here."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "workbench" / "engine"
PAGE = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| (`[a-z_]+`(?: \\\| `[a-z_]+`)*) \| (.*) \|$", re.MULTILINE)


def _rows() -> dict[str, str]:
    """Each layer of the page's table (siblings written `a` \\| `b`) and its row's text."""
    rows = {}
    for layer, text in ROW.findall(PAGE.read_text(encoding="utf-8")):
        rows[layer.replace("`", "").replace(" \\| ", " | ")] = text
    return rows


def _contract_layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (engine,) = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c.get("containers") == ["workbench.engine"]
    ]
    return engine["layers"]


def test_the_layers_are_the_contracts() -> None:
    assert list(_rows()) == _contract_layers()


def test_every_engine_module_is_in_its_layers_row() -> None:
    missing = []
    for layer, text in _rows().items():
        for package in layer.split(" | "):
            folder = ENGINE / package
            modules = sorted(folder.glob("*.py")) if folder.is_dir() else []
            missing += [
                f"{package}/{m.name}"
                for m in modules
                if m.stem != "__init__" and f"`{m.stem}`" not in text
            ]
    assert missing == []


def test_the_check_sees_the_table() -> None:
    rows = _rows()
    assert "`render_controller`" not in rows["run"]  # a row holds its own layer only
    assert "`lifecycle`" in rows["run"] and "`sse`" in rows["net | events"]
    assert len(rows) == len(_contract_layers()) > 5
