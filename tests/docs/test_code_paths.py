"""The documentation names the code as it is: every file or folder of the repository that a
page cites in backticks exists, so a module moved or renamed without its pages fails here
(the site's strict build checks links between pages, not paths in code spans)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").rglob("*.md"))
# A path under one of the repository's folders; the package's own folders may be cited
# without `workbench/` (`ui/controllers/run_controller.py`).
CITED = re.compile(
    r"`((?:workbench|bench|tests|packaging|experiments|resources|docs|engine|ui|cli)"
    r"/[\w./*-]*\w/?)`"
)
IN_PACKAGE = ("engine", "ui", "cli")


def _exists(cited: str) -> bool:
    path = cited.rstrip("/")
    if path.split("/")[0] in IN_PACKAGE:
        path = "workbench/" + path
    if any(ROOT.glob(path)):
        return True
    # `ui/widgets/plot_widget.Plot`: a name in a module.
    module, _, name = path.rpartition(".")
    return bool(module) and name[:1].isupper() and (ROOT / f"{module}.py").is_file()


def _cited(page: Path) -> list[str]:
    return [found.group(1) for found in CITED.finditer(page.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT / "docs")))
def test_every_cited_path_exists(page: Path) -> None:
    assert [cited for cited in _cited(page) if not _exists(cited)] == []


def test_the_pages_cite_the_code() -> None:
    """The check above sees real citations, and would see a missing one."""
    architecture = _cited(ROOT / "docs" / "architecture.md")
    assert "ui/controllers/run_controller.py" in architecture
    assert all(_exists(cited) for cited in architecture)
    assert not _exists("workbench/ui/no_such_module.py")
    assert not _exists("ui/widgets/no_such_module.Plot")
