"""``workbench watch``: a line for each task as it ends, a summary at the end, and one line
for an address it cannot watch."""

from __future__ import annotations

import concurrent.futures
import csv
import json
import math
import socket
import threading
import time
from dataclasses import replace

import httpx

from workbench.cli.exit_codes import EXIT_SLO_MISSED
from workbench.cli.main import main
from workbench.cli.watch_commands import (
    SlotsView,
    live_latencies,
    summary_lines,
    task_line,
    unseen_lines,
)
from workbench.engine.base.server_kinds import LLAMACPP, VLLM
from workbench.engine.interop.trace_file import read_trace
from workbench.engine.watch.record import kept_at
from workbench.engine.watch.slot_tasks import SlotTasks, WatchedTask
from workbench.engine.watch.summary import summarize
from workbench.engine.watch.unseen import TokenLedger
from workbench.engine.watch.watcher import Load, Watched
from workbench.mock_server.process import MockProcess

NAMES = (
    "llamacpp:requests_processing",
    "llamacpp:requests_deferred",
    "llamacpp:prompt_tokens_total",
    "llamacpp:tokens_predicted_total",
)


def slot(number: int, task: int | None, busy: bool) -> dict:
    return {"id": number, "id_task": task, "is_processing": busy, "n_decoded": 1}


def test_an_ended_task_reads_in_one_line_of_80_columns():
    long = WatchedTask(1, 116, 0.3, 4.5, 4.4, 4.53, 1500, 1024, 19, decoded_all=True)
    line = task_line(long)
    assert line == "slot  1  task    116  prompt 1,500 (1,024 cached), 19 tokens out, 4.23 s seen"
    # its slot went straight on to another task: its last tokens were not seen
    assert "19 tokens out" in task_line(replace(long, decoded_all=False)).replace("≥", "")
    assert ", ≥19 tokens out" in task_line(replace(long, decoded_all=False))
    missed = WatchedTask(0, 125, 4.9, 4.9, gone_s=5.5, missed=True, sequence_tokens=9)
    assert task_line(missed).endswith("ran between two polls (9 tokens of prompt and answer)")
    early = WatchedTask(3, 999999, 0.0, 9.0, 0.0, 9.1, 123456, None, 4096, running_at_start=True)
    for task in (long, missed, early):
        assert len(task_line(task)) <= 80, task_line(task)
    assert task_line(early).endswith("≥4,096 tokens out, ≥9.10 s seen")  # it began before
    unseen = replace(long, decoded=0, prompt_tokens=None, cached_tokens=None, decoded_all=False)
    assert task_line(unseen) == "slot  1  task    116  prompt ?, its tokens unseen, 4.23 s seen"


def test_the_summary_says_the_polls_the_tasks_the_queue_and_the_verdict():
    tasks = SlotTasks()
    tasks.observe(0.0, [slot(0, 1, True), slot(1, None, False)])
    tasks.observe(1.0, [slot(0, 1, True), slot(1, 2, False)])  # task 2 between two polls
    tasks.observe(1.1, [slot(0, 1, False), slot(1, 2, False)])
    watched = Watched(0, tasks, 10, 2, {0: 10, 1: 8}, 8, kind=LLAMACPP, seconds=1.0)
    watched.answered(0.4, False)
    watched.answered(0.7, True)
    for t in range(10):
        watched.count(
            t / 10, None, dict(zip(NAMES, (2.0, t % 3, 100.0 * t, 10.0 * t), strict=True))
        )
    watched.polls = 10  # the counts above were the same polls
    lines = summary_lines(summarize(watched))
    assert lines == [
        "watched 1.0 s: 10 polls answered, 2 not (the server down or slow)",
        "  2 tasks ended (1 between two polls, seen by the id it left), 0 running",
        "  server down 1 time, 0.3 s in all (0.4-0.7 s)",
        "  slot 0: busy in 100% of the polls",
        "  slot 1: busy in 80% of the polls",
        "  queue: p50 1, p90 2, max 2; a queue in 60% of the polls",
        "  wait in the queue: 0.63 s a request or more (estimated, Little's law)",
        "  requests in the server at once: p50 3, p90 4, p99 4, max 4",
        "  prompt 1,000.0 tok/s, generated 100.0 tok/s over the watch (its counters)",
        "verdict: all 2 slots were busy 80% of the watch and requests queued up to 2 deep "
        "(60% of the watch): the slots were the bottleneck",
    ]
    assert all(len(line) <= 80 for line in lines[:-1])


def test_the_tasks_no_poll_saw_are_said_estimated_with_what_sized_them():
    ledger = TokenLedger(5, 2000.0, 1000.0, tasks=20, missed_tokens=150.0, missed=3)
    s = summarize(Watched(0, kind=LLAMACPP, seconds=10.0, ledger=ledger))
    lines = unseen_lines(s)
    assert " ".join(line.strip() for line in lines) == (
        "≈ 20 more ended between polls, unseen (estimated from the token counters: 1,000 "
        "tokens no task seen accounts for, at 50 tokens a task, the mean of the 3 tasks that "
        "ran between two polls)"
    )
    assert all(len(line) <= 80 for line in lines) and lines == summary_lines(s)[2:5]
    few = replace(ledger, missed=1, missed_tokens=50.0)
    lines = unseen_lines(summarize(Watched(0, seconds=1.0, ledger=few)))
    said = " ".join(line.strip() for line in lines)
    assert "the mean of the 20 tasks seen to their end, longer than the unseen: a low" in said
    vllm = Watched(0, kind=VLLM, slots_on=False, seconds=1.0)
    for t, done in ((0.0, 100.0), (1.0, 130.0)):
        vllm.count_load(Load(t, 1.0, 0.0, None, None, requests=done))
    assert unseen_lines(summarize(vllm)) == ["  30 requests finished (the server's count)"]


def test_the_live_view_says_once_when_the_server_goes_down_and_when_it_answers_again():
    view, watched = SlotsView(), Watched(0)
    said = []
    for t_s, answered in ((0.1, True), (0.2, False), (0.3, False), (2.4, True), (2.5, True)):
        watched.answered(t_s, answered)
        said.append(view.gap_line(watched))
    assert said == [
        "",
        "0.2 s: server down (no answer); the watch goes on",
        "",
        "2.4 s: the server answers again, after 2.2 s",
        "",
    ]


def watched_mock(tmp_path, at_once: int, rounds: int, *flags: str) -> str:
    """``workbench watch`` of the mock (2 slots) for 1.5 s, with ``flags`` besides, while
    ``rounds`` of ``at_once`` requests are sent to it; the mock's address."""
    mock = MockProcess("--ttft-ms", "50", "--itl-ms", "5", "--tokens", "10", "--slots", "2")
    body = {"prompt": "x" * 80, "max_tokens": 10, "stream": True}

    def one(_: int) -> None:
        httpx.post(f"{mock.url}/v1/completions", json=body, timeout=10)

    def traffic() -> None:
        time.sleep(0.3)
        with concurrent.futures.ThreadPoolExecutor(at_once) as pool:
            for _ in range(rounds):
                list(pool.map(one, range(at_once)))

    try:
        sender = threading.Thread(target=traffic)
        sender.start()
        argv = ["watch", mock.url, "--for", "1.5", "--interval", "0.02", "--out", str(tmp_path)]
        assert main([*argv, *flags]) == 0
        sender.join()
    finally:
        mock.stop()
    return mock.url


def test_it_watches_a_llama_server_for_the_time_given_and_keeps_it(tmp_path, capsys):
    url = watched_mock(tmp_path, at_once=1, rounds=3)
    out = capsys.readouterr().out
    assert f"watching {url} (every 0.02 s; for 1.5 s)" in out
    assert "3 tasks ended, 0 running" in out and "queue: p50 0, p90 0, max 0" in out
    (kept,) = tmp_path.glob("watch-*.watch.sqlite")
    assert f"kept in {kept}" in out.replace("\n", "")
    # read back, the same summary
    assert main(["show", str(kept)]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"watch of {url} from ")
    said = out[out.index("watched ") : out.index("kept in")]
    assert said in shown
    # judged against SLOs: a missed one is exit status 6, a stall is not judged
    argv = ["show", str(kept), "--slo", "ttft_p50:1", "--slo", "stall_p99:9"]
    assert main(argv) == EXIT_SLO_MISSED
    lines = capsys.readouterr().out.splitlines()
    judged = lines[lines.index("SLOs on the watch:") + 1 :]
    assert judged[0].startswith("  TTFT p50 ") and judged[0].endswith(" ms against 1 ms: missed")
    assert judged[1] == "    3 tasks, from the poll that showed each on its slot"
    assert judged[2:] == ["  STALL p99: not judged", "    a stall needs each token's time"]
    assert main(["show", str(kept), "--slo", "tpot_p90:60000"]) == 0
    assert "ms against 60,000 ms: met" in capsys.readouterr().out
    assert main(["show", str(kept), "--slo", "ttft:3"]) == 1  # one line, nothing judged
    assert "--slo 'ttft:3': write METRIC_PCT:MS" in capsys.readouterr().err


def test_show_judges_the_slos_a_watch_kept_and_slo_given_replaces_them(tmp_path, capsys):
    watched_mock(tmp_path, 1, 2, "--slo", "tpot_p90:60000", "--slo", "stall_p99:9")
    out = capsys.readouterr().out
    (kept,) = tmp_path.glob("watch-*.watch.sqlite")
    at_end = out[out.index("SLOs on the watch:") :]
    assert "ms against 60,000 ms: met" in at_end and "STALL p99: not judged" in at_end
    assert main(["show", str(kept)]) == 0  # no --slo: those it keeps, judged as at its end
    shown = capsys.readouterr().out
    assert shown[shown.index("SLOs on the watch:") :] == at_end
    assert main(["show", str(kept), "--slo", "ttft_p50:1"]) == EXIT_SLO_MISSED
    lines = capsys.readouterr().out.splitlines()
    judged = lines[lines.index("SLOs on the watch:") + 1 :]
    assert len(judged) == 2 and judged[0].startswith("  TTFT p50 ")  # the kept two replaced


def test_an_address_it_cannot_watch_is_one_line_and_keeps_nothing(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert main(["watch", url, "--for", "1", "--out", str(tmp_path)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"nothing answers at {url}" in line
    assert list(tmp_path.iterdir()) == []


def test_two_watches_of_one_second_are_kept_apart(tmp_path, monkeypatch):
    monkeypatch.setattr(time, "strftime", lambda pattern: "20261206-222222")
    first = kept_at(tmp_path)
    first.touch()
    second = kept_at(tmp_path)
    assert (first.name, second.name) == (
        "watch-20261206-222222.watch.sqlite",
        "watch-20261206-222222-2.watch.sqlite",
    )


def test_a_kept_watch_exports_its_tasks_and_a_track_per_slot(tmp_path, capsys):
    watched_mock(tmp_path, at_once=2, rounds=2)
    (kept,) = tmp_path.glob("watch-*.watch.sqlite")
    capsys.readouterr()
    tasks_csv = tmp_path / "tasks.csv"
    argv = [
        "export",
        str(kept),
        "--csv",
        str(tasks_csv),
        "--format",
        "perfetto",
        "--out",
        str(tmp_path),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"wrote {tasks_csv} (4 tasks)" in out
    with tasks_csv.open() as fh:
        rows = list(csv.DictReader(fh))
    assert {r["slot"] for r in rows} == {"0", "1"} and all(r["prompt_tokens"] == "20" for r in rows)
    trace = json.loads(
        (tmp_path / kept.name.replace(".watch.sqlite", ".perfetto.json")).read_text()
    )
    events = trace["traceEvents"]
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == {"slot 0", "slot 1"}
    slices = [e for e in events if e["ph"] == "X"]
    assert {e["name"] for e in slices} == {"prompt", "decode"} and len(slices) == 8
    assert any(e["ph"] == "C" and e["name"] == "requests" for e in events)
    # its requests as a Mooncake trace the workbench replays
    assert main(["export", str(kept), "--format", "trace", "--out", str(tmp_path)]) == 0
    said = " ".join(capsys.readouterr().out.split())  # as the terminal wrapped it
    assert "(4 rows): arrivals estimated from the queue's rises" in said
    replayed = read_trace(tmp_path / kept.name.replace(".watch.sqlite", ".trace.jsonl"))
    assert len(replayed.rows) == 4
    assert all(r.input_length == 20 and r.output_length == 10 for r in replayed.rows)
    # a session's other outputs are no watch's
    assert main(["export", str(kept), "--json", str(tmp_path / "x.json")]) == 1
    assert "a watch (.watch.sqlite) exports alone" in capsys.readouterr().err


def test_kept_watches_are_listed_and_compared_side_by_side(tmp_path, capsys):
    watched_mock(tmp_path, at_once=1, rounds=2)
    watched_mock(tmp_path, at_once=2, rounds=2)
    first, second = sorted(tmp_path.glob("watch-*.watch.sqlite"))
    capsys.readouterr()
    assert main(["sessions", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "Watches" in listed and f"  1  {second}" in listed and f"  2  {first}" in listed
    assert main(["compare", str(first), str(second), "--csv", str(tmp_path / "c.csv")]) == 0
    out = capsys.readouterr().out
    assert "Watches side by side" in out
    assert f"┃ {first.name[6:21]} ┃ {second.name[6:21]} ┃" in out  # each by its start
    with (tmp_path / "c.csv").open() as fh:
        rows = {row["figure"]: row for row in csv.DictReader(fh)}
    assert set(rows["slots"].values()) == {"slots", "", "2"}
    # twice the tasks at once in the second: each slot busy longer
    busy = rows["slot busy, the mean"]
    assert float(busy[second.name]) > float(busy[first.name])
    assert float(rows["TTFT from the slot p50"][first.name]) >= 40  # the mock's 50 ms
    assert f"{first.name[6:21]}: " in out and out.count("  verdict: ") == 2
    # a session and a watch are not compared
    (tmp_path / "x.session.sqlite").touch()
    assert main(["compare", str(first), str(tmp_path / "x.session.sqlite")]) == 1
    assert "compare kept watches (.watch.sqlite) with kept watches" in capsys.readouterr().err


def test_live_the_servers_own_percentiles_are_said_over_the_last_minute():
    watched = Watched(kind=VLLM)
    name = "vllm:time_to_first_token_seconds"
    for t in range(10):
        watched.histograms({name: {0.1: 0.0, 0.5: 2.0 * t, math.inf: 2.0 * t}}, float(t))
    assert live_latencies(watched) == ["the server's, last 9 s: TTFT p50 300, p90 460 ms"]
    assert live_latencies(Watched(kind=VLLM)) == []
