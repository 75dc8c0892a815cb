"""``workbench watch``: a line for each task as it ends, a summary at the end, and one line
for an address it cannot watch."""

from __future__ import annotations

import socket

from workbench.cli.main import main
from workbench.cli.watch_commands import summary, task_line
from workbench.engine.watch.slot_tasks import SlotTasks, WatchedTask
from workbench.engine.watch.watcher import Watched
from workbench.mock_server.process import MockProcess


def test_an_ended_task_reads_in_one_line_of_80_columns():
    long = WatchedTask(1, 116, 0.3, 4.5, 4.4, 4.53, 1500, 1024, 19)
    line = task_line(long)
    assert line == "slot  1  task    116  prompt 1,500 (1,024 cached), 19 tokens out, 4.23 s seen"
    missed = WatchedTask(0, 125, 4.9, 4.9, gone_s=5.5, missed=True, sequence_tokens=9)
    assert task_line(missed).endswith("ran between two polls (9 tokens of prompt and answer)")
    early = WatchedTask(3, 999999, 0.0, 9.0, 0.0, 9.1, 123456, None, 4096, running_at_start=True)
    for task in (long, missed, early):
        assert len(task_line(task)) <= 80, task_line(task)
    assert task_line(early).endswith("4,096 tokens out, ≥9.10 s seen")  # it began before


def test_the_summary_says_the_polls_the_tasks_and_each_slots_busy_share():
    tasks = SlotTasks()
    tasks.done = [WatchedTask(0, 1, 0.0, 1.0, gone_s=1.1), WatchedTask(1, 2, 0.0, 0.0, missed=True)]
    watched = Watched(0, tasks, polls=10, unanswered=2, busy={0: 4}, seconds=1.2)
    assert summary(watched) == [
        "watched 1.2 s: 10 polls answered, 2 not (the server down or slow); 2 tasks ended "
        "(1 between two polls, seen by the id it left), 0 running",
        "  slot 0: busy in 40% of the polls",
        "  slot 1: busy in 0% of the polls",
    ]


def test_it_watches_a_llama_servers_slots_for_the_time_given(capsys):
    mock = MockProcess()
    try:
        assert main(["watch", mock.url, "--for", "1", "--interval", "0.05"]) == 0
    finally:
        mock.stop()
    out = capsys.readouterr().out
    assert f"watching {mock.url} (/slots every 0.05 s; for 1 s)" in out
    assert "polls answered; 0 tasks ended, 0 running" in out


def test_an_address_it_cannot_watch_is_one_line(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    assert main(["watch", url, "--for", "1"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert f"nothing answers at {url}" in line
