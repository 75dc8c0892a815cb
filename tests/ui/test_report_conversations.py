"""The report carries a conversations session's verdict beside the others, each
configuration's sentence on its caches, and the conversation figures with their
definitions; a session without conversations gets none of it."""

from __future__ import annotations

from tests.made_sessions import write_conversations, write_session
from workbench.engine.figures.metrics import figure
from workbench.engine.store import open_session
from workbench.ui.exports.report import ChartOptions, write_report

SMALL = ChartOptions(400, 250, 72)


def test_the_report_carries_the_conversation_verdict_and_figures(tmp_path, qapp):
    path = write_conversations(tmp_path / "chats.session.sqlite")
    with open_session(path) as session:
        md = write_report([session], tmp_path / "report", SMALL).read_text(encoding="utf-8")
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    verdicts = md[md.index("## Verdicts") : md.index("## Sessions")]
    assert "- **supported**: a slot per conversation holds each conversation" in verdicts
    assert "  - np=1: the conversations lost their caches: 4 of 4 later turns" in verdicts
    reprefilled = figure("reprefilled_tokens")
    assert f"| {figure('later_ttft_p50_s').heading} |" in verdicts
    assert "| np=1 | 0.200 | 0.200 | 0.400 | 0.400 | 0.19 | 456 |" in verdicts
    assert f"- **{reprefilled.title}** (tokens; over repeats: sum over repeats)" in md
    assert "<td>np=2</td><td>0.200</td>" in page and "the slots held the conversations" in page


def test_a_report_without_conversations_has_no_conversation_figures(tmp_path, qapp):
    with open_session(write_session(tmp_path / "made.session.sqlite")) as session:
        md = write_report([session], tmp_path / "report", SMALL).read_text(encoding="utf-8")
    assert figure("reprefilled_tokens").title not in md and "conversation" not in md


def test_the_report_carries_the_steady_state_and_reasoning_figures_a_session_has(tmp_path, qapp):
    """TTFO and the steady state are in the report as in ``workbench show``: a table each
    beside the verdicts, their definitions in the list; none for a plain burst."""
    from tests.made_sessions import Config, build_session, request, startup_facts

    closed = "[server]\nslots = 2\n[workload]\nrequests = 4\nconcurrency = 2\n"
    path = build_session(
        tmp_path / "steady.session.sqlite",
        closed,
        [
            Config(
                [request(k, submit_s=1.2 * (k // 2), slot=k % 2, reasoning=3) for k in range(4)],
                startup_facts(2, 8192),
            )
        ],
    )
    with open_session(path) as session:
        md = write_report([session], tmp_path / "report", SMALL).read_text(encoding="utf-8")
    verdicts = md[md.index("## Verdicts") : md.index("## Sessions")]
    for title, key in (("Steady state", "steady_agg_tok_s"), ("Reasoning", "ttfo_p50_s")):
        assert f"**{title}**" in verdicts
        assert f"| {figure(key).heading} |" in verdicts
        assert f"- **{figure(key).title}** (" in md
    assert "**Conversations**" not in verdicts
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    assert "<p><b>Steady state</b></p>" in page and "<p><b>Reasoning</b></p>" in page
    with open_session(write_session(tmp_path / "made.session.sqlite")) as session:
        plain = write_report([session], tmp_path / "plain", SMALL).read_text(encoding="utf-8")
    assert "**Steady state**" not in plain and "**Reasoning**" not in plain
