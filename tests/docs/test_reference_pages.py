"""The site's reference tables come from the code at build time: every setting, figure, server
kind and shipped experiment gets its row, and every page's marker becomes its table."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from mkdocs.exceptions import PluginError

from workbench.engine.analysis import export
from workbench.engine.analysis.export import concurrency_columns
from workbench.engine.base.server_kinds import KINDS
from workbench.engine.config.experiment import SETTINGS
from workbench.engine.config.settings import fields_of
from workbench.engine.figures import metrics

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def _load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("reference", DOCS / "hooks" / "reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _load_hook()


def _rows(markdown: str) -> list[list[str]]:
    """The body rows of every Markdown table in ``markdown``, as cells."""
    rows = []
    lines = markdown.splitlines()
    for i, line in enumerate(lines):
        is_header = i + 1 < len(lines) and lines[i + 1].startswith("|---")
        if line.startswith("| ") and not is_header:
            rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_every_setting_has_its_row() -> None:
    rows = _rows(reference.settings_tables())
    fields = [f for cls in SETTINGS for f in fields_of(cls)]
    assert [row[0] for row in rows] == [f"`{f.name}`" for f in fields]
    slots = next(row for row in rows if row[0] == "`slots`")
    assert slots[1] == "`1`"
    assert slots[2].startswith("`-np`: ") and slots[2].endswith("1 to 1,024 or -1")
    kv = next(row for row in rows if row[0] == "`kv_unified`")
    assert kv[1] == "server default" and kv[2].startswith("`--kv-unified` / `--no-kv-unified`")


def test_every_figure_has_its_row() -> None:
    rows = _rows(reference.metric_tables())
    by_part = [f for part in metrics.Part for f in metrics.in_part(part)]
    assert len(by_part) == len(metrics.FIGURES)
    assert [(row[0], row[3], row[4]) for row in rows] == [
        (f.title, f.combine.value, f.definition) for f in by_part
    ]
    columns = {f.title: row[1] for f, row in zip(by_part, rows, strict=True)}
    exported = set(concurrency_columns())
    assert {f.title for f in by_part if columns[f.title]} == {
        f.title for f in by_part if f.column in exported
    }
    # The steady state's figures are columns (the last ones); a live-only figure is none.
    steady = metrics.figure("steady_agg_tok_s")
    assert columns[steady.title] == "`steady_agg_tok_s`"
    assert not any(columns[f.title] for f in metrics.in_part(metrics.Part.LIVE))


def test_every_request_figure_has_its_row() -> None:
    rows = _rows(reference.request_metric_table())
    assert [(row[0], row[1]) for row in rows] == [
        (r.title, f"`{r.column}`") for r in metrics.REQUEST_FIGURES
    ]


def test_every_server_kind_has_its_names() -> None:
    rows = _rows(reference.server_kinds_table())
    assert len(rows) == len(KINDS)
    for kind, row in zip(KINDS, rows, strict=True):
        assert row[0].startswith(kind.name)
        assert all(f"`{name}`" in " ".join(row) for name in kind.names)
        assert row[3] == ("yes" if kind.slots else "no")


def test_every_shipped_experiment_is_listed() -> None:
    rows = _rows(reference.shipped_experiments())
    files = sorted((ROOT / "experiments").glob("*.toml"))
    assert [row[0] for row in rows] == [f"`{path.name}`" for path in files]
    assert all(row[1] for row in rows), "an experiment without a description"


def test_the_csv_headers_are_the_exports() -> None:
    assert reference.concurrency_columns().split(", ") == [
        f"`{name}`" for name in concurrency_columns()
    ]
    assert reference.request_columns().split(", ") == [
        f"`{name}`" for name in export.REQUEST_COLUMNS
    ]


@pytest.mark.parametrize(
    ("page", "tables"),
    [
        ("reference/experiment-file.md", ["settings", "experiments"]),
        ("reference/metrics.md", ["metrics", "request-metrics"]),
        ("guides/remote.md", ["server-kinds"]),
        ("reference/outputs.md", ["concurrency-columns", "request-columns"]),
    ],
)
def test_the_pages_get_their_tables(page: str, tables: list[str]) -> None:
    markdown = (DOCS / page).read_text(encoding="utf-8")
    assert [f.group(1) for f in reference.MARKER.finditer(markdown)] == tables
    filled = reference.fill(markdown, page)
    assert "<!-- reference:" not in filled
    for name in tables:
        assert reference.TABLES[name]() in filled


def test_an_unknown_marker_stops_the_build() -> None:
    with pytest.raises(PluginError, match="no reference table named 'setting'"):
        reference.fill("<!-- reference: setting -->", "page.md")
