"""The comparison window reads its sessions off the GUI thread, shows that it is loading,
and draws only the result of the latest refresh."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from tests.ui.driving import run
from workbench.engine.analysis.compare import Comparison
from workbench.ui import compare_window
from workbench.ui.compare_window import CompareWindow, Loaded

PATHS = [Path("a.session.sqlite"), Path("b.session.sqlite")]


def comparison(value: float, relative: bool) -> Loaded:
    cells = {("np=1", "agg_tok_s"): [value, value]}
    return Loaded(Comparison(["a", "b"], ["np=1"], cells, relative=relative), [])


def test_refresh_loads_in_a_thread_and_shows_loading(qtbot, loop, monkeypatch):
    threads: list[threading.Thread] = []
    release = threading.Event()

    def load(paths: list[Path], relative: bool, predicted: bool = False) -> Loaded:
        threads.append(threading.current_thread())
        release.wait(10)
        return comparison(100.0, relative)

    monkeypatch.setattr(compare_window, "load_comparison", load)
    monkeypatch.setattr(compare_window, "load_timelines", lambda paths: [])
    window = CompareWindow(PATHS)
    qtbot.addWidget(window)
    window.show()
    assert window.loading.isVisible() and "loading 2 sessions" in window.loading.text()
    run(loop, lambda: threads, 10)
    assert window.table.rowCount() == 0  # still loading: the GUI thread is not waiting
    release.set()
    run(loop, lambda: not window.loading.isVisible(), 10)
    assert len(threads) == 1 and threads[0] is not threading.main_thread()
    assert window.table.item(0, 2).text() == "100.0"
    window.close()
    run(loop, lambda: not window.tasks, 10)


def test_a_refresh_overtaken_by_a_later_one_is_dropped(qtbot, loop, monkeypatch):
    first_may_return = threading.Event()
    returned: list[bool] = []

    def load(paths: list[Path], relative: bool, predicted: bool = False) -> Loaded:
        if not relative:  # the first refresh, at construction: slower than the second
            first_may_return.wait(10)
        returned.append(relative)
        return comparison(2.0 if relative else 100.0, relative)

    monkeypatch.setattr(compare_window, "load_comparison", load)
    monkeypatch.setattr(compare_window, "load_timelines", lambda paths: [])
    window = CompareWindow(PATHS)
    qtbot.addWidget(window)
    window.show()
    window.relative.setChecked(True)  # a second refresh while the first is loading
    run(loop, lambda: returned == [True], 10)
    run(loop, lambda: not window.loading.isVisible(), 10)
    assert window.table.item(0, 2).text() == "2.00"
    first_may_return.set()
    run(loop, lambda: returned == [True, False] and not window.tasks, 10)
    assert window.table.item(0, 2).text() == "2.00"  # the stale result was not drawn
    window.close()


def test_closing_while_loading_draws_nothing(qtbot, loop, monkeypatch):
    release = threading.Event()

    def load(paths: list[Path], relative: bool, predicted: bool = False) -> Loaded:
        release.wait(10)
        return comparison(100.0, relative)

    monkeypatch.setattr(compare_window, "load_comparison", load)
    monkeypatch.setattr(compare_window, "load_timelines", lambda paths: [])
    window = CompareWindow(PATHS)
    qtbot.addWidget(window)
    window.show()
    window.close()
    release.set()
    until = time.monotonic() + 0.5
    run(loop, lambda: time.monotonic() > until, 5)
    assert window.table.rowCount() == 0 and not window.tasks


def test_other_tools_results_open_beside_a_measured_session(qtbot, loop, tmp_path, sweep_session):
    """A vLLM file (built from vLLM's schema), GuideLLM's and AIPerf's (written by the tools)
    imported, then compared with a workbench session in the window: a column, a Gantt and
    the charts' points for each."""
    from workbench.engine.interop.formats import import_file

    data = Path(__file__).parents[1] / "data" / "imports"
    files = [
        next((data / "vllm").glob("*.json")),
        data / "guidellm" / "benchmarks.json",
        data / "aiperf" / "concurrency2" / "profile_export.jsonl",
    ]
    paths = [import_file(f, tmp_path) for f in files] + [sweep_session]
    window = CompareWindow(paths)
    qtbot.addWidget(window)
    window.show()
    run(loop, lambda: not window.loading.isVisible() and len(window.gantts) == 4, 30)
    headers = [window.table.horizontalHeaderItem(c).text() for c in range(2, 6)]
    assert [h.split(" · ")[1] for h in headers] == [
        "imported from vllm bench serve",
        "imported from GuideLLM",
        "imported from AIPerf",
        "Made CPU 8-Core",
    ]
    assert [g.bar_count() for g in window.gantts] == [4, 10, 5, 6]
    # On the slots axis only the sweep: an imported file does not say its slots.
    assert window.charts["ttft_p50_s"].point_count() == 2
    assert window.charts["throughput_vs_ttft"].point_count() >= 5
    window.close()
    run(loop, lambda: not window.tasks, 10)
