"""At 80 and 100 columns every number, label and path the commands print is whole: ``run``'s
final table, ``show``, ``sessions``, ``compare`` and imported GuideLLM sessions."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

import pytest

from tests.cli.test_tables import words
from tests.fakes.sse_server import Behaviour, serve_in_thread
from tests.made_sessions import Config, build_session, request, startup_facts, write_sweep
from workbench.cli.main import main
from workbench.engine.analysis.compare import compare_sessions
from workbench.engine.figures.metrics import View, shown_in
from workbench.engine.figures.summaries import ConfigSummary
from workbench.engine.store import open_session

GUIDELLM = Path(__file__).parents[1] / "data" / "imports" / "guidellm" / "benchmarks.json"
WIDTHS = [80, 100]
SWEEP = (
    'name = "narrow"\n[workload]\nrequests = 2\nconcurrency = [1, 2]\nmax_tokens = 4\nwarmup = 0\n'
)


@pytest.fixture(params=WIDTHS, ids=lambda w: f"{w}-columns")
def width(request, monkeypatch) -> int:
    """A pipe read at ``COLUMNS``, as ``workbench show S | less`` in a terminal that wide."""
    monkeypatch.setenv("COLUMNS", str(request.param))
    monkeypatch.setattr(os, "get_terminal_size", lambda fd: os.terminal_size((0, 0)))
    return request.param


def assert_fits(text: str, width: int) -> None:
    """No line wider than the terminal, none cut short with an ellipsis."""
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= width


def assert_whole(text: str, *expected: str) -> None:
    shown = words(text)
    for value in expected:
        missing = [word for word in value.split() if word not in shown]
        assert not missing, f"{value!r}: {missing} not whole in\n{text}"


def assert_results_whole(text: str, summaries: list[ConfigSummary]) -> None:
    """Each configuration's label, its marks, and every figure of the terminal's table."""
    for s in summaries:
        assert_whole(text, s.label, *(f"[{flag}]" for flag in s.flags))
        for f in shown_in(View.TERMINAL):
            assert_whole(text, f.header, f.cell(s, with_sd=True))


def test_runs_final_table(width, tmp_path, capsys):
    experiment = tmp_path / "narrow.toml"
    experiment.write_text(SWEEP)
    out = tmp_path / "a-results-folder-with-a-long-name-to-make-the-path-wider-than-the-terminal"
    with serve_in_thread(Behaviour(tokens=4)) as server:
        args = ["run", str(experiment), "--out", str(out), "--base-url", server.base_url]
        assert main(args) == 0
    text = capsys.readouterr().out
    (session,) = out.glob("*.session.sqlite")
    assert len(str(session)) > width
    assert_fits(text.replace(str(session), "S").replace(str(out), "O"), width)
    assert f"narrow: 2 configurations; session {session}\n" in text
    assert f"session: {session}\n" in text
    with open_session(session) as opened:
        assert_results_whole(text, opened.summaries())


def test_show_a_sweep_and_its_memory(width, tmp_path, capsys):
    session = write_sweep(tmp_path / "sweep.session.sqlite")
    assert main(["show", str(session), "--requests"]) == 0
    text = capsys.readouterr().out
    assert_fits(text, width)
    with open_session(session) as opened:
        assert_results_whole(text, opened.summaries())
    assert_whole(text, "model + KV + compute MiB", "peak RSS MiB", "200", "250", "260")


def test_guidellm_imported_and_shown(width, tmp_path, capsys):
    """Two benchmarks, concurrency 1 and 2: the labels were both cut to ``concu…``."""
    assert main(["import", str(GUIDELLM), "--out", str(tmp_path)]) == 0
    (session,) = tmp_path.glob("*.session.sqlite")
    imported = capsys.readouterr().out
    assert f"wrote {session}: imported from GuideLLM" in imported
    assert main(["show", str(session)]) == 0
    shown = capsys.readouterr().out
    with open_session(session) as opened:
        summaries = opened.summaries()
        reported = [opened.reported_figures(c.index) for c in opened.configs]
    assert [s.label for s in summaries] == ["concurrency=1", "concurrency=2"]
    for text in (imported, shown):
        assert_fits(text.replace(str(session), "S"), width)
        assert_results_whole(text, summaries)
    for figures in reported:
        for name, value in figures.items():
            assert_whole(shown, name, str(int(value)) if value.is_integer() else f"{value:.3f}")


def test_sessions_prints_each_file_whole(width, tmp_path, capsys):
    folder = tmp_path / "a-folder-of-sessions-whose-path-is-longer-than-a-terminal-line-is"
    folder.mkdir()
    assert main(["import", str(GUIDELLM), "--out", str(folder)]) == 0
    write_sweep(folder / "sweep.session.sqlite")
    (folder / "broken.session.sqlite").write_text("not a database")
    capsys.readouterr()
    assert main(["sessions", str(folder)]) == 0
    text = capsys.readouterr().out
    paths = sorted(folder.glob("*.session.sqlite"))
    assert all(len(str(path)) > width for path in paths)
    lines = text.splitlines()
    for path in paths:
        assert any(line.split() == [line.split()[0], str(path)] for line in lines), path
    assert_fits("\n".join(line for line in lines if str(folder) not in line), width)
    assert_whole(text, "guidellm-benchmarks", "sweep", "complete", "imported", "unreadable")
    assert_whole(text, "2 configurations: concurrency 1, 2", "np 1, 2", "Made CPU 8-Core")
    assert "version not recorded" not in text  # the backend column says a backend
    at = next(n for n, line in enumerate(lines) if "backend" in line)
    backend = [cell.strip() for cell in lines[at].split("┃")].index("backend")
    row = next(line for line in lines[at:] if "guidellm-benchmarks" in line)
    assert row.split("│")[backend].strip() == "unknown"


def test_compare_an_import_with_a_sweep(width, tmp_path, capsys):
    assert main(["import", str(GUIDELLM), "--out", str(tmp_path)]) == 0
    (imported,) = tmp_path.glob("*.session.sqlite")
    sweep = write_sweep(tmp_path / "sweep.session.sqlite")
    capsys.readouterr()
    assert main(["compare", str(imported), str(sweep)]) == 0
    text = capsys.readouterr().out
    assert_fits(text, width)
    with open_session(imported) as one, open_session(sweep) as two:
        comparison = compare_sessions([one, two], relative=False)
    assert_whole(text, *comparison.columns)
    for row in comparison.rows():
        assert_whole(text, row["configuration"], row["metric"])
        assert_whole(text, *(comparison.cell_text(row, c) for c in comparison.columns))


def test_a_resumed_run_counts_every_configuration(tmp_path, capsys, monkeypatch):
    """Three configurations, the first finished: the header counts three, one done."""
    monkeypatch.setenv("COLUMNS", "100")
    toml = 'name = "resumed"\n[workload]\nrequests = 2\nconcurrency = [1, 2, 4]\nmax_tokens = 4\n'
    toml += "warmup = 0\n"
    done = Config([request(0), request(1, submit_s=0.1)], startup_facts(1, 2048))
    path = build_session(
        tmp_path / "resumed.session.sqlite", toml, [done] * 3, base_url="http://127.0.0.1:9"
    )
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE session SET status = 'cancelled'")
        conn.execute("UPDATE configs SET status = 'cancelled' WHERE idx > 0")
    with serve_in_thread(Behaviour(tokens=4)) as server:
        args = ["run", "--resume", str(path), "--base-url", server.base_url, "--quiet"]
        assert main(args) == 0
    text = capsys.readouterr().out
    assert f"resumed: 3 configurations, 1 already done; session {path}\n" in text
    assert_whole(text, "concurrency=1", "concurrency=2", "concurrency=4")
