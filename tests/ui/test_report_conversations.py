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
