"""A conversations session read through the commands: ``show`` prints the conversation
figures and one sentence per configuration on its caches, ``show --requests`` each request's
conversation and turn, ``export`` the figures as concurrency.csv's last columns and each later
turn's re-prefilled tokens, ``verdicts`` the hypothesis. A session without conversations,
reasoning or a steady state gets none of those columns; one with them gets theirs."""

from __future__ import annotations

import csv

import pytest

from tests.cli.test_tables import header_of, tables_of
from tests.made_sessions import Config, build_session, request, startup_facts, write_conversations
from workbench.cli.main import main
from workbench.engine.figures.metrics import Part, View, figure, in_part, shown_in


@pytest.fixture
def conversations(tmp_path):
    return write_conversations(tmp_path / "chats.session.sqlite")


def show(capsys, *args: str) -> str:
    assert main(["show", *map(str, args)]) == 0
    return capsys.readouterr().out


def headers(text: str) -> list[str]:
    return [h for table in tables_of(text) for h in header_of(table)]


@pytest.fixture(autouse=True)
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # each table on one line, its headers unwrapped


def test_show_prints_the_conversation_figures_and_a_sentence_per_configuration(
    conversations, capsys
):
    text = show(capsys, conversations)
    shown = headers(text)
    for f in shown_in(View.TERMINAL, having=[]):
        assert f.header in shown
    for key in ("turn1_ttft_p50_s", "later_ttft_p50_s", "later_cache_share", "reprefilled_tokens"):
        assert figure(key).header in shown
    flat = " ".join(text.split())
    assert (
        "caches: np=1: the conversations lost their caches: 4 of 4 later turns re-prefilled, "
        "456 history tokens processed again; later turns' TTFT p50 0.400 s vs 0.050 s at np=2"
    ) in flat
    assert "caches: np=2: the slots held the conversations' caches" in flat


def test_show_requests_names_each_turn(conversations, capsys):
    text = show(capsys, conversations, "--requests")
    requests = tables_of(text)[-1]
    assert header_of(requests)[:6] == [
        "config", "repeat", "request", "conversation", "turn", "re-prefilled"
    ]  # fmt: skip
    rows = [[c.strip() for c in line.strip("│").split("│")] for line in requests if "r1u" in line]
    assert [row[3:6] for row in rows[:6]] == [
        ["r1u1", "1", "-"], ["r1u2", "1", "-"], ["r1u1", "2", "74"], ["r1u2", "2", "74"],
        ["r1u1", "3", "154"], ["r1u2", "3", "154"],
    ]  # fmt: skip


def test_export_writes_the_figures_last_and_each_later_turns_re_prefilled_tokens(
    conversations, tmp_path, capsys
):
    table, requests = tmp_path / "c.csv", tmp_path / "r.csv"
    assert (
        main(["export", str(conversations), "--csv", str(table), "--requests-csv", str(requests)])
        == 0
    )
    with table.open() as fh:
        reader = csv.DictReader(fh)
        one, two = list(reader)
    names = list(reader.fieldnames or [])
    # Up to E2E p99; columns added later still (cancelled, machine_busy) come after it.
    assert names[names.index("e2e_p99_s") - 7 : names.index("e2e_p99_s") + 1] == [
        "lost_turns",
        "lost_turn_share",
        "conversations_per_slot",
        *(f.column for f in in_part(Part.SPECULATIVE)),  # the newest part, after them
        "e2e_p99_s",  # a figure added to an older part later, after every column
    ]
    assert (one["reprefilled_tokens"], one["lost_turns"], one["later_turns"]) == ("456", "4", "4")
    assert (two["reprefilled_tokens"], two["later_cache_share"], two["conversations_per_slot"]) == (
        "0", "1.0", "1.0"
    )  # fmt: skip
    assert one["ttfo_p50_s"] == "" and one["steady_s"] == ""  # neither applies
    with requests.open() as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
    assert list(reader.fieldnames or [])[-10:] == [
        "conversation", "turn", "reprefilled_tokens", "worker", "trace_line",
        "stalls", "stall_max_s", "stalled_s", "stalled_by", "ttft_held_s",  # the latest last
    ]  # fmt: skip
    assert [row["reprefilled_tokens"] for row in rows[:6]] == ["", "", "74", "74", "154", "154"]


def test_verdicts_judge_the_slots_on_the_conversations(conversations, capsys):
    assert main(["verdicts", str(conversations)]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    assert "SUPPORTED a slot per conversation holds each conversation's cache" in flat
    assert "np=2: the slots held the conversations' caches: later turns took 100%" in flat


def test_a_plain_burst_gets_no_empty_columns_and_a_reasoning_or_steady_run_gets_its_own(
    tmp_path, capsys
):
    burst = "[server]\nslots = 1\n[workload]\nrequests = 2\n"
    plain = build_session(
        tmp_path / "plain.session.sqlite",
        burst,
        [Config([request(0), request(1)], startup_facts(1, 8192))],
    )
    text = show(capsys, plain)
    assert "caches:" not in text
    optional = {f.header for f in in_part(*Part) if f.optional}
    assert not optional & set(headers(text))
    assert "re-prefilled" not in " ".join(
        header_of(tables_of(show(capsys, plain, "--requests"))[-1])
    )

    reasoned = build_session(
        tmp_path / "reasoned.session.sqlite",
        burst,
        [Config([request(0, reasoning=3), request(1, reasoning=3)], startup_facts(1, 8192))],
    )
    assert {"TTFO p50 s", "TTFO p90 s"} <= set(headers(show(capsys, reasoned)))

    # Two at a time of four, each 1.2 s long: in flight reach 2 at once, the last is sent at
    # 1.2 s, and that is the steady state.
    closed = "[server]\nslots = 2\n[workload]\nrequests = 4\nconcurrency = 2\n"
    steady = build_session(
        tmp_path / "steady.session.sqlite",
        closed,
        [
            Config(
                [request(k, submit_s=1.2 * (k // 2), slot=k % 2) for k in range(4)],
                startup_facts(2, 8192),
            )
        ],
    )
    assert {"steady tok/s", "steady TTFT p50 s"} <= set(headers(show(capsys, steady)))


def test_the_new_figures_can_be_chosen_by_their_columns(conversations, capsys):
    text = show(capsys, conversations, "--columns", "reprefilled_tokens,ttfo_p50_s")
    assert header_of(tables_of(text)[0]) == ["config", "re-prefilled tok", "TTFO p50 s"]
