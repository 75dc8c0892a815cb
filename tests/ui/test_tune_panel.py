"""The Tune tab with a stand-in search (no server): its inputs checked in the tab, progress
brought to the window's thread, Cancel, the answer shown with where its figures come from,
and "Use these settings" filling the experiment form."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import threading
from pathlib import Path

import pytest
from PySide6.QtWidgets import QApplication, QScrollArea

from tests.ui.driving import click, click_until, run
from tests.ui.tune_records import TRIED, recommendation
from workbench.cli.main import build_parser
from workbench.cli.tune_commands import WINDOW, request_of
from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.settings import as_typed, fields_of
from workbench.engine.config.workloads import RequestsWorkload, TraceWorkload, WorkloadSettings
from workbench.engine.interop.trace_file import trace_plans
from workbench.engine.tune.records import (
    TRACE_WINDOW,
    RateTried,
    Recommendation,
    SloTarget,
    TraceLoad,
    TuneProgress,
    TuneRequest,
)
from workbench.engine.tune.verdict import progress_words, verdict_words
from workbench.ui.controllers.tasks import Tasks
from workbench.ui.panels.experiment_form import ExperimentForm
from workbench.ui.panels.tune_panel import (
    FIXED,
    HOW_TO_RUN,
    TRACE,
    TRACE_LOAD,
    SloRow,
    TunePanel,
    done_share,
    window_field,
)


class FakeTune:
    """The search's signature: reports progress from its own thread, waits until let go (or
    cancelled), answers ``answer`` (or, cancelled, with no winner)."""

    def __init__(self, answer: Recommendation | None = None, hold: bool = False) -> None:
        self.answer = answer or recommendation()
        self.go = threading.Event()
        if not hold:
            self.go.set()
        self.requests: list[TuneRequest] = []
        self.threads: list[threading.Thread] = []
        self.cancelled = False

    def __call__(self, request, progress, cancel) -> Recommendation:
        self.requests.append(request)
        self.threads.append(threading.current_thread())
        progress(TuneProgress("rank", 12.0, 600.0, 48.0, "np=4 predicted", TRIED[:3]))
        while not self.go.wait(0.01):
            if cancel.is_set():
                self.cancelled = True
                return dataclasses.replace(
                    self.answer,
                    winner=None,
                    verified=False,
                    reason="cancelled",
                    runners_up=(),
                    tried=TRIED[:3],
                )
        progress(TuneProgress("verify", 40.0, 600.0, 20.0, "measuring np=4", TRIED))
        return self.answer


@pytest.fixture
def tasks():
    owned = Tasks()
    yield owned
    owned.cancel_all()


def panel_of(qtbot, tasks, tune, tmp_path: Path) -> TunePanel:
    panel = TunePanel(tasks, tmp_path / "out", tune=tune)
    qtbot.addWidget(panel)
    panel.resize(420, 900)
    panel.show()
    return panel


def test_progress_reaches_the_window_thread_and_the_answer_is_shown(
    qtbot, loop, tasks, tmp_path, monkeypatch
):
    heard: list[threading.Thread] = []
    shown = TunePanel.show_progress

    def show_progress(self, progress):
        heard.append(threading.current_thread())
        shown(self, progress)

    monkeypatch.setattr(TunePanel, "show_progress", show_progress)
    tune = FakeTune()
    panel = panel_of(qtbot, tasks, tune, tmp_path)
    click_until(loop, panel.start_button, lambda: panel.recommendation is not None, 10)
    assert tune.threads[0] is not threading.main_thread()  # the search ran off the UI thread
    assert heard and all(t is threading.main_thread() for t in heard)
    (request,) = tune.requests
    assert [s.name for s in request.slos] == ["ttft_p90", "tpot_p50"] and request.users == 8
    assert request.traffic == {"input_tokens": 512, "max_tokens": 128}
    assert request.budget_s == 600 and request.out_dir == tmp_path / "out"
    assert panel.progress.value() == panel.progress.maximum()
    verdict = panel.verdict.text()
    assert "Recommended: np=4 f16" in verdict
    assert "Verified on the real server at 8 users at once: TTFT p90 1400 ms (<= 2000)" in verdict
    assert "TPOT p50 80 ms (<= 120)" in verdict
    assert "It holds 0.9 requests/s (Poisson) within the SLO." in verdict
    assert "Tried 7 configurations (3 measured)" in verdict
    assert verdict == "\n".join(verdict_words(panel.recommendation))  # as the CLI says it
    table = panel.table
    rows = [[table.item(r, c).text() for c in range(table.columnCount())] for r in range(3)]
    assert rows[0][:5] == ["np=4 f16", "measured", "1400", "80", "96.0"]
    assert rows[1][1] == "predicted" and rows[1][-1] == "TTFT p90 5.2 s > 2000 ms"
    assert panel.chart is not None and panel.chart.drawn("measured") == 3
    assert panel.command.text() == "llama-server -m model.gguf -np 4 -c 16384 -ctk f16"


def test_the_command_line_is_copied(qtbot, loop, tasks, tmp_path):
    panel = panel_of(qtbot, tasks, FakeTune(), tmp_path)
    panel.show_recommendation(recommendation())
    copy = next(b for b in panel.findChildren(type(panel.start_button)) if b.text() == "Copy")
    click(loop, copy)
    assert QApplication.clipboard().text() == panel.command.text() != ""


def test_cancel_stops_the_search_and_says_what_it_found(qtbot, loop, tasks, tmp_path):
    tune = FakeTune(hold=True)
    panel = panel_of(qtbot, tasks, tune, tmp_path)
    click_until(
        loop, panel.start_button, lambda: "Predicting: np=4 predicted" in panel.phase.text(), 10
    )
    assert "about 48 s left" in panel.phase.text()
    assert panel.progress.value() == 200  # 12 s of 60 (elapsed and ETA)
    assert not panel.start_button.isEnabled() and panel.cancel_button.isEnabled()
    click_until(loop, panel.cancel_button, lambda: panel.recommendation is not None, 10)
    assert tune.cancelled and "No recommendation: cancelled." in panel.verdict.text()
    assert not panel.use_button.isEnabled() and panel.start_button.isEnabled()
    assert panel.chart is not None and panel.chart.drawn("measured") == 2  # what it had


def test_a_tune_that_cannot_go_on_says_why_in_the_tab(qtbot, loop, tasks, tmp_path):
    def nothing_fits(request, progress, cancel):
        raise WorkbenchError("nothing in the space fits in 1.2 GiB of free memory")

    panel = panel_of(qtbot, tasks, nothing_fits, tmp_path)
    click_until(loop, panel.start_button, lambda: panel.error.isVisible(), 10)
    assert "nothing in the space fits" in panel.error.text()
    assert "without an answer" in panel.phase.text() and panel.inputs.isVisible()
    run(loop, lambda: panel.start_button.isEnabled(), 10)


def test_an_unverified_winner_is_said_to_be_predicted(qtbot, tasks, tmp_path):
    panel = panel_of(qtbot, tasks, FakeTune(), tmp_path)
    predicted = next(t for t in TRIED if t.source == "predicted" and t.meets_slo)
    answer = dataclasses.replace(
        recommendation(verified=False), winner=predicted, reason="the budget ran out"
    )
    panel.show_recommendation(answer)
    verdict = panel.verdict.text()
    assert (
        "Best found: np=4 q8_0" in verdict and "Not verified: its figures are predicted" in verdict
    )
    assert "the budget ran out" in verdict
    assert panel.table.item(0, 1).text() == "predicted"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda p: [p._remove_slo(row) for row in list(p.slo_rows)], "Add at least one SLO"),
        (lambda p: p.users.setValue(0), "under one user"),
        (lambda p: p.slo_rows[0].limit.setValue(0), "above 0 ms"),
        (lambda p: p.add_slo("ttft", 90, 1000), "ttft_p90 is limited twice"),
        (lambda p: p.space.setText("slotz=1..4"), "did you mean 'slots'"),
        (lambda p: p.traffic.setCurrentText(TRACE), "Choose the trace file"),
        (
            lambda p: (p.from_registered.setChecked(True), p.registered.setValue(0)),
            "under one user",
        ),
    ],
)
def test_bad_input_is_said_in_the_tab_and_nothing_starts(
    qtbot, loop, tasks, tmp_path, change, said
):
    tune = FakeTune()
    panel = panel_of(qtbot, tasks, tune, tmp_path)
    change(panel)
    click(loop, panel.start_button)
    assert panel.error.isVisible() and said in panel.error.text()
    assert not tune.requests and not panel.controller.running


def test_a_tune_waits_while_a_run_has_the_machine(qtbot, loop, tasks, tmp_path):
    tune = FakeTune()
    panel = TunePanel(tasks, tmp_path, tune=tune, held=lambda: "the run")
    qtbot.addWidget(panel)
    panel.show()
    click(loop, panel.start_button)
    assert "Wait until the run is done" in panel.error.text() and not tune.requests


def test_registered_users_online_make_the_users_at_once(qtbot, tasks, tmp_path):
    panel = panel_of(qtbot, tasks, FakeTune(), tmp_path)
    panel.from_registered.setChecked(True)
    panel.registered.setValue(401)
    panel.online.setValue(0.02)
    assert panel.users_wanted() == 9 and "9 users at once" in panel.users_said.text()
    assert not panel.users.isEnabled() and panel.registered.isEnabled()


def tuned_and_used(qtbot, loop, tasks, tmp_path, experiment, trace=None, **window: str):
    """The form holding ``experiment``, then a tune (of ``trace``'s window, where one is
    given), then "Use these settings": the form, and the panel that tuned."""
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load_file(experiment)
    panel = panel_of(qtbot, tasks, FakeTune(), tmp_path)
    panel.use_settings.connect(form.use_settings)
    if trace is not None:
        trace_chosen(panel, trace, **window)
    click_until(loop, panel.start_button, lambda: panel.use_button.isEnabled(), 10)
    click(loop, panel.use_button)
    return form, panel


def test_use_these_settings_fills_the_experiment_form(qtbot, loop, tasks, tmp_path):
    form, _panel = tuned_and_used(qtbot, loop, tasks, tmp_path, "experiments/slots-1-2-4.toml")
    server, workload = form.values()
    assert server["slots"] == 4 and server["ctx"] == 16384 and server["cache_type_k"] == "f16"
    assert workload["input_tokens"] == 512 and workload["max_tokens"] == 128
    assert workload["concurrency"] == 8 and workload["requests"] == 16  # as it was verified
    assert "tune recommended" in form.path_label.text()
    form.build()  # a valid experiment, ready to run


SAMPLE = Path("resources/traces/sample-mooncake.jsonl")  # rows from 14.5 s to 17.1 s: 3


def used_after_a_trace_tune(qtbot, loop, tasks, tmp_path, experiment: str, **window: str):
    """The form holding ``experiment``, then a tune of the sample trace's window, then "Use
    these settings": the form's experiment."""
    form, panel = tuned_and_used(qtbot, loop, tasks, tmp_path, experiment, SAMPLE, **window)
    assert form.error.text() == ""
    return form.build(), panel.request


def test_use_these_settings_after_a_trace_tune_runs_the_window_tuned(qtbot, loop, tasks, tmp_path):
    """The form held 8 requests, 8 at once, in bursts: a trace run sends its window's rows,
    each as it comes, so neither is left claiming a load that will not be sent, and the
    run's setup counts the same rows the tune replayed."""
    experiment, request = used_after_a_trace_tune(
        qtbot, loop, tasks, tmp_path, "experiments/slots-1-2-4.toml",
        trace_start_s="14.5", trace_duration_s="2.6",
    )  # fmt: skip
    assert request.traffic.items() <= experiment.workload.items()  # the trace, its window
    assert not {"requests", "concurrency"} & set(experiment.workload)
    # a trace run sends no max_tokens (each row asks its own): the form's 64 goes too, as do
    # its temperature and ignore_eos, which the tune's runs had at their defaults
    assert not {"max_tokens", "temperature", "ignore_eos"} & set(experiment.workload)
    assert experiment.workload["repeats"] == 1 and experiment.server["slots"] == 4  # kept
    config = experiment.configs()[0]
    assert isinstance(config.workload, TraceWorkload) and config.workload.concurrency == 0
    rows = len(trace_plans([config], None)[config.index].rows)
    assert rows == 3
    sent = dataclasses.replace(config.workload, requests=rows)  # as the run's setup counts
    assert sent.effective_concurrency == rows  # every row as it comes, no client limit


def test_use_these_settings_after_a_trace_tune_resets_what_the_tune_left(
    qtbot, loop, tasks, tmp_path
):
    """A form already replaying a trace a quarter as long: the tune replayed the window at
    full length, from the trace's start, so that is what the experiment replays."""
    experiment, _ = used_after_a_trace_tune(
        qtbot, loop, tasks, tmp_path, "experiments/trace-replay.toml", max_requests="2"
    )
    workload = experiment.configs()[0].workload
    assert isinstance(workload, TraceWorkload)
    assert workload.trace == str(SAMPLE.resolve()) and workload.max_requests == 2
    assert (workload.length_scale, workload.time_scale, workload.trace_start_s) == (1.0, 1.0, 0)
    assert not workload.cache_prompt  # the tune's runs left it at its default: so does this
    assert workload.stop_when_saturated  # the form's: how it is run, not what is sent


def test_use_these_settings_after_generated_traffic_leaves_a_trace_behind(
    qtbot, loop, tasks, tmp_path
):
    """The other way: a form replaying a trace, a tune at 8 users of fixed lengths."""
    form, _panel = tuned_and_used(qtbot, loop, tasks, tmp_path, "experiments/trace-replay.toml")
    workload = form.build().configs()[0].workload
    assert not isinstance(workload, TraceWorkload) and workload.arrival == "burst"
    assert (workload.requests, workload.concurrency, workload.input_tokens) == (16, 8, 512)


def test_use_these_settings_after_fixed_lengths_resets_what_the_tune_did_not_send(
    qtbot, loop, tasks, tmp_path
):
    """A form of Poisson arrivals, sampled warm, with its own lengths and switches: the tune
    sent 512-token prompts for 128 tokens each, all at once, with every other setting at its
    default, so that is what the experiment sends; how it is run (repeats, warm-ups, a
    request's timeout) stays the form's."""
    own = tmp_path / "own.toml"
    own.write_text(
        'name = "own"\n[server]\nslots = 2\n[workload]\narrival = "gamma"\nrate = 2.0\n'
        "burstiness = 0.5\nrequests = 20\nmax_tokens = 32\ntemperature = 0.7\n"
        "cache_prompt = true\nignore_eos = false\nstream = false\nrepeats = 3\nwarmup = 2\n"
        "request_timeout_s = 60.0\nseed = 7\n",
        encoding="utf-8",
    )
    form, _panel = tuned_and_used(qtbot, loop, tasks, tmp_path, own)
    assert form.error.text() == ""
    workload = form.build().configs()[0].workload
    default = RequestsWorkload()
    assert (workload.arrival, workload.rate, workload.burstiness) == ("burst", 0.0, 1.0)
    assert (workload.input_tokens, workload.max_tokens, workload.requests) == (512, 128, 16)
    for name in ("temperature", "cache_prompt", "ignore_eos", "stream", "seed"):
        assert getattr(workload, name) == getattr(default, name), name
    assert (workload.repeats, workload.warmup, workload.request_timeout_s) == (3, 2, 60.0)


def test_the_settings_of_how_a_run_goes_are_workload_settings():
    """What "Use these settings" keeps of the form names settings the schema has (one
    renamed there would be cleared here without a word)."""
    declared = {f.name for f in fields_of(WorkloadSettings)}
    assert set(HOW_TO_RUN) <= declared


def test_progress_words_and_share():
    going = TuneProgress("verify", 90.0, 600.0, 30.0, "measuring np=4")
    assert progress_words(going) == (
        "Verifying on the real server: measuring np=4. 1 min 30 s of a 10 min budget, "
        "about 30 s left."
    )
    assert done_share(going) == 0.75
    assert done_share(dataclasses.replace(going, eta_s=None)) == 0.15  # by the budget
    assert done_share(dataclasses.replace(going, phase="done")) == 1.0


def test_the_window_has_a_tune_tab_whose_settings_fill_its_form(window, loop):
    tab = next(i for i in range(window.left.count()) if window.left.tabText(i) == "Tune")
    window.left.setCurrentIndex(tab)
    panel = window.tune_panel
    panel.controller.tune = FakeTune()
    click_until(loop, panel.start_button, lambda: panel.use_button.isEnabled(), 10)
    click(loop, panel.use_button)
    assert window.left.currentIndex() == 0  # the experiment form, filled
    assert window.form.fields[("server", "slots")].text() == "4"


def test_closing_the_window_stops_the_tune(window, loop):
    tune = FakeTune(hold=True)
    window.tune_panel.controller.tune = tune
    click_until(loop, window.tune_panel.start_button, lambda: tune.requests, 10)
    window.close()
    run(loop, lambda: tune.cancelled, 10)


def test_the_chart_window_follows_the_tab_and_closes_with_it(qtbot, loop, tasks, tmp_path):
    panel = panel_of(qtbot, tasks, FakeTune(), tmp_path)
    click_until(loop, panel.start_button, lambda: panel.recommendation is not None, 10)
    click(loop, panel.enlarge)
    big = panel.chart_window
    assert big is not None and big.isVisible() and big.drawn("measured") == 3
    assert big.legend.isVisible()  # wide enough for its legend; the tab's chart says KEY
    panel.stop()
    panel.stop()  # the window closing after a Cancel: nothing left to close
    assert panel.chart_window is None
    assert [w for w in QApplication.topLevelWidgets() if w.isVisible()] == [panel]


def test_no_run_starts_while_a_tune_has_the_machine(window, loop):
    tune = FakeTune(hold=True)
    window.tune_panel.controller.tune = tune
    click_until(loop, window.tune_panel.start_button, lambda: tune.requests, 10)
    window.start_run()
    assert "A tune has the machine" in window.banner.text() and not window.running
    click_until(
        loop, window.tune_panel.cancel_button, lambda: not window.tune_panel.controller.running, 10
    )


def test_the_rate_is_said_as_the_cli_says_it():
    missed = dataclasses.replace(
        recommendation(), rate_rps=None, rate_probes=(RateTried(0.5, False, "queue grew"),)
    )
    assert "No Poisson rate probe met the SLO." in verdict_words(missed)
    unprobed = dataclasses.replace(missed, rate_probes=())
    assert "Rate search: no room left in the budget." in verdict_words(unprobed)


def test_an_slo_row_paints(qtbot):
    """Qt asks a widget's ``metric()`` to paint it: an attribute of that name crashed the
    window (a segmentation fault) the first time an SLO row was painted in a new font."""
    row = SloRow("itl", 99, 80.0)
    qtbot.addWidget(row)
    row.show()
    assert not row.grab().isNull()
    assert row.target() == SloTarget("itl", 99, 80.0)


def test_a_stall_slo_row_offers_the_stalls_percentile_only(qtbot):
    row = SloRow("ttft", 90, 2000.0)
    qtbot.addWidget(row)
    row.metric_box.setCurrentIndex(row.metric_box.findData("stall"))
    assert [row.percentile.itemData(i) for i in range(row.percentile.count())] == [99]
    assert row.target() == SloTarget("stall", 99, 2000.0)
    row.metric_box.setCurrentIndex(row.metric_box.findData("itl"))
    assert row.percentile.count() == 3 and row.percentile.currentData() == 99  # kept


def test_a_draft_model_in_the_tab_is_the_tunes(qtbot, tasks, tmp_path):
    panel = panel_of(qtbot, tasks, FakeTune(), tmp_path)
    assert panel.tune_request().draft_model is None
    panel.draft.setText("  drafts/small.gguf ")
    assert panel.tune_request().draft_model == "drafts/small.gguf"


def trace_chosen(panel: TunePanel, trace: Path, **window: str) -> None:
    panel.traffic.setCurrentText(TRACE)
    panel.trace.setText(str(trace))
    for name, text in window.items():
        panel.window_edits[name].setText(text)


def test_a_trace_is_its_own_load_and_its_window_is_asked(qtbot, tasks, tmp_path):
    panel = panel_of(qtbot, tasks, FakeTune(), tmp_path)
    assert not panel.trace_load.isVisible() and not panel.window_box.isVisible()
    panel.traffic.setCurrentText(TRACE)
    for widget in (panel.at_once, panel.from_registered, panel.users, panel.registered):
        assert not widget.isEnabled() and not widget.isVisible()
    assert panel.trace_load.isVisible() and panel.trace_load.text() == TRACE_LOAD
    assert all(edit.isVisible() for edit in panel.window_edits.values())
    rows = panel.window_box.layout()
    labels = [rows.labelForField(edit).text() for edit in panel.window_edits.values()]
    assert labels == ["trace start (s)", "trace duration (s)", "max requests", "time scale"]
    assert "From 0.001 to 1000 (2 = twice as fast)" in panel.window_edits["time_scale"].toolTip()
    panel.traffic.setCurrentText(FIXED)
    assert panel.users.isEnabled() and not panel.registered.isEnabled()  # as it was
    assert panel.users.isVisible() and not panel.trace_load.isVisible()
    assert not panel.window_box.isVisible()


def test_a_trace_tune_asks_its_window_as_the_cli_does(qtbot, loop, tasks, tmp_path):
    tune = FakeTune()
    panel = panel_of(qtbot, tasks, tune, tmp_path)
    panel.users.setValue(0)  # not read with a trace
    trace = tmp_path / "t.jsonl"
    # typed as the flags are: a time as 10m or 90s, through the same parser
    window = dict(trace_start_s="10m", trace_duration_s="90s", max_requests="40", time_scale="2.5")
    trace_chosen(panel, trace, **window)
    click_until(loop, panel.start_button, lambda: panel.recommendation is not None, 10)
    (request,) = tune.requests
    assert request.users is None
    assert request.traffic == {
        "arrival": "trace",
        "trace": str(trace.resolve()),
        "trace_start_s": 600.0,
        "trace_duration_s": 90.0,
        "max_requests": 40,
        "time_scale": 2.5,
    }
    flags = ["--trace-start", "10m", "--trace-duration", "90s", "--trace-requests", "40",
             "--time-scale", "2.5"]  # fmt: skip
    args = build_parser().parse_args(["tune", "--slo", "ttft_p90:2000", "--trace", str(trace),
                                      *flags])  # fmt: skip
    assert request_of(args).traffic == request.traffic  # the CLI's, the same
    for edit in panel.window_edits.values():
        edit.clear()
    assert panel.tune_request().traffic == request_of(
        build_parser().parse_args(["tune", "--slo", "ttft_p90:2000", "--trace", str(trace)])
    ).traffic == {"arrival": "trace", "trace": str(trace.resolve())}  # fmt: skip


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        (
            "time_scale",
            "0",
            "Trace window: time scale must be between 0.001 and 1000 (2 = twice as fast), got 0.",
        ),
        (
            "trace_start_s",
            "-5",
            "Trace window: trace start (s) must be between 0 and 10000000 (seconds), got -5.",
        ),
        ("max_requests", "100001", "max requests must be between 0 and 100000 (0 = every row)"),
        ("max_requests", "2.5", "Trace window: max requests: '2.5' is not a whole number."),
        (
            "trace_duration_s",
            "10x",
            "Trace window: trace duration (s): '10x' is not a time (90, 90s, 10m or 1h).",
        ),
        (
            "trace_duration_s",
            "2778h",
            "Trace window: trace duration (s) must be between 0 and 10000000 (seconds, 0 = to the "
            "end), got 2778h.",
        ),
        ("time_scale", "nan", "time scale: 'nan' is not a finite number"),
    ],
)
def test_a_window_out_of_its_bounds_is_said_and_nothing_starts(
    qtbot, loop, tasks, tmp_path, name, text, said
):
    tune = FakeTune()
    panel = panel_of(qtbot, tasks, tune, tmp_path)
    trace_chosen(panel, tmp_path / "t.jsonl", **{name: text})
    click(loop, panel.start_button)
    assert panel.error.isVisible() and said in panel.error.text()
    assert not tune.requests and not panel.controller.running


def window_texts(name: str) -> list[str]:
    """What to type for a window setting: each bound of it, as the trace setting declares
    it (the flag's and the tab's, both read from it), and a step past either side; times
    and numbers as they are written, and what is neither."""
    declared = window_field(name).range
    assert declared is not None
    step = 1 if window_field(name).kind is int else 0.001
    edges = {declared.low, declared.high}
    values = sorted({v + d for v in edges if v is not None for d in (-step, 0, step)})
    written = [f"{v:.3f}".rstrip("0").rstrip(".") for v in values]
    return [*written, "10m", "1h", "1.5m", "2.5", "40", " 7 ", "+5", "1e3", "nan", "inf", "x"]


def cli_reads(name: str, text: str) -> tuple[bool, object, str]:
    """Whether ``workbench tune --trace``'s flag for a window setting takes ``text``, what
    it makes of it, and what it said."""
    flag = next(f for f, setting in WINDOW.items() if setting == name)
    argv = ["tune", "--slo", "ttft_p90:2000", "--trace", "t.jsonl", f"{flag}={text}"]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            args = build_parser().parse_args(argv)
    except SystemExit:
        return False, None, said.getvalue()
    return True, request_of(args).traffic.get(name), ""


@pytest.mark.parametrize(
    ("name", "text"), [(name, text) for name in TRACE_WINDOW for text in window_texts(name)]
)
def test_the_tab_and_the_cli_take_and_refuse_the_same_window(qtbot, tasks, tmp_path, name, text):
    """A window value the CLI refuses, the tab refuses, and the other way round; what both
    take, they take as the same value. A refusal out of the bounds names them."""
    panel = panel_of(qtbot, tasks, FakeTune(), tmp_path)
    trace_chosen(panel, tmp_path / "t.jsonl", **{name: text})
    taken, value, cli_said = cli_reads(name, text)
    try:
        tab_value = panel.window_settings()[name]
    except ValueError as exc:
        assert not taken, f"the CLI takes {text!r} for {name} as {value}, the tab refuses: {exc}"
        bounds = window_field(name).range
        assert bounds is not None
        if "must be between" in str(exc):  # a number past a bound: both say the bounds
            low, high = as_typed(bounds.low), as_typed(bounds.high)
            assert f"between {low} and {high}" in str(exc)
            assert f"from {low}" in cli_said and f"to {high}" in cli_said
        return
    assert taken, f"the tab takes {text!r} for {name} as {tab_value}, the CLI refuses"
    assert tab_value == value and type(tab_value) is type(value)


def test_a_trace_tunes_answer_says_its_window_and_its_peak(qtbot, tasks, tmp_path):
    panel = panel_of(qtbot, tasks, FakeTune(), tmp_path)
    load = TraceLoad("t.jsonl", 3, 14.5, 2.6, 2.0, 1.25, 3, "its arrivals and lengths", 3)
    answer = dataclasses.replace(recommendation(), users=3, load=load, own_times=True)
    panel.show_recommendation(answer)
    verdict = panel.verdict.text().splitlines()
    assert verdict == verdict_words(answer)  # as the CLI prints it
    assert "Verified on the real server on the trace window: TTFT p90 1400 ms" in verdict[1]
    assert load.window_said() in verdict and load.peak_said() in verdict
    assert "3 requests at once at peak in the trace window (measured" in load.peak_said()


def test_the_tab_with_a_trace_fits_its_column_at_1366x768(window, loop):
    """Nothing cut at the right: the SLO rows, and with a trace its window's labels, once
    overflowed the column the tab has on a small screen (no sideways scroll)."""
    window.resize(1366, 768)
    tab = next(i for i in range(window.left.count()) if window.left.tabText(i) == "Tune")
    window.left.setCurrentIndex(tab)
    panel = window.tune_panel
    for kind in (FIXED, TRACE):
        panel.traffic.setCurrentText(kind)
        run(loop, lambda: window.left.width() < 400, 5)
        area = panel.findChild(QScrollArea)
        assert area.widget().minimumSizeHint().width() <= area.viewport().width()
