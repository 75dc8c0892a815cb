"""The experiment form's conversations fields, and a replayed session's server as it ran."""

from __future__ import annotations

from PySide6.QtWidgets import QGroupBox, QLineEdit, QPushButton

from tests.made_sessions import Config, build_session, request, startup_facts
from tests.ui.conversation_sessions import write_conversations
from workbench.engine.config.experiment import parse_experiment
from workbench.ui.panels.experiment_form import ExperimentForm, form_fields

CONVERSATION_FIELDS = ("users", "turns", "think_time_s", "user_tokens", "system_prompt_tokens")
CHAT = """name = "chat"
[workload]
kind = "conversations"
users = 6
turns = 3
think_time_s = 0.5
user_tokens = 32
system_prompt_tokens = 16
"""


def box_of(form: ExperimentForm, name: str) -> QGroupBox:
    widget = form.fields[("workload", name)]
    box = widget.parentWidget()
    assert isinstance(box, QGroupBox)
    return box


def test_the_conversations_fields_are_in_a_box_shown_for_a_conversations_run(qtbot):
    form = ExperimentForm()
    qtbot.addWidget(form)
    assert ("workload", "kind") in form.fields
    boxes = {box_of(form, name).title() for name in CONVERSATION_FIELDS}
    assert boxes == {"Conversations"}
    assert box_of(form, "kind").title() == "Workload"
    form.load(parse_experiment("[workload]\nrequests = 4\n"))
    assert box_of(form, "users").isHidden()  # a short form for independent requests
    form.load(parse_experiment(CHAT))
    assert not box_of(form, "users").isHidden()
    form.fields[("workload", "kind")].setCurrentText("requests")
    assert box_of(form, "users").isHidden()


def test_the_conversations_fields_round_trip_through_the_experiment_file(qtbot):
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(parse_experiment(CHAT))
    shown = {name: form.fields[("workload", name)].text() for name in CONVERSATION_FIELDS}
    assert shown == {
        "users": "6",
        "turns": "3",
        "think_time_s": "0.5",
        "user_tokens": "32",
        "system_prompt_tokens": "16",
    }
    assert form.fields[("workload", "kind")].currentText() == "conversations"
    form.fields[("workload", "users")].setText("7")
    built = form.build()
    assert "users = 7" in built.source
    workload = built.configs()[0].workload
    assert (workload.kind, workload.users, workload.turns) == ("conversations", 7, 3)
    assert (workload.think_time_s, workload.user_tokens, workload.system_prompt_tokens) == (
        0.5,
        32,
        16,
    )
    form.fields[("workload", "kind")].setCurrentText("requests")
    assert form.build().workload["kind"] == "requests"


def test_a_field_the_file_leaves_out_is_shown_as_it_runs_and_left_to_the_file(qtbot):
    """A conversations run gets the prompt cache unless the file says otherwise: the form
    shows it on, and leaves it out (written as "off", it turned the cache off)."""
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(parse_experiment(CHAT))
    assert form.fields[("workload", "cache_prompt")].currentText() == "on"
    built = form.build()
    assert "cache_prompt" not in built.workload
    assert built.configs()[0].workload.cache_prompt
    form.fields[("workload", "cache_prompt")].setCurrentText("off")  # changed: written
    assert form.build().workload["cache_prompt"] is False


def test_every_file_field_has_its_picker(qtbot):
    form = ExperimentForm()
    qtbot.addWidget(form)
    for f in form_fields():
        if f.setting.file_filter:
            widget = form.fields[(f.table, f.name)]
            assert isinstance(widget, QLineEdit)
            row = widget.parentWidget().findChildren(QPushButton)
            assert any(b.text() == "…" for b in row), f.name


def test_a_replayed_external_session_shows_the_server_it_ran_against(window, loop, tmp_path):
    url = "http://127.0.0.1:18999"
    external = build_session(
        tmp_path / "external.session.sqlite",
        "[workload]\nrequests = 1\n",
        [Config([request(0)], startup_facts(1, 8192))],
        base_url=url,
    )
    form = window.form
    assert loop.run_until_complete(window.replay.open(external))
    assert form.read_only
    assert form.external.isChecked() and form.base_url.text() == url
    assert not form.external.isEnabled() and not form.base_url.isEnabled()
    assert window.form.external_url() == url  # Run runs it again against that server
    form.edit_copy()
    assert form.external.isEnabled() and form.base_url.isEnabled()
    assert form.external.isChecked() and form.base_url.text() == url
    assert loop.run_until_complete(
        window.replay.open(write_conversations(tmp_path / "managed.session.sqlite"))
    )
    assert not form.external.isChecked() and not form.base_url.isEnabled()


def test_choosing_conversations_shows_the_prompt_cache_it_turns_on(qtbot):
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(parse_experiment("[workload]\nrequests = 4\n"))
    cache, kind = form.fields[("workload", "cache_prompt")], form.fields[("workload", "kind")]
    assert cache.currentText() == "off"
    kind.setCurrentText("conversations")
    assert cache.currentText() == "on"
    built = form.build()
    assert "cache_prompt" not in built.workload and built.configs()[0].workload.cache_prompt
    kind.setCurrentText("requests")
    assert cache.currentText() == "off"
    cache.setCurrentText("on")  # chosen: kept whatever the kind
    kind.setCurrentText("conversations")
    kind.setCurrentText("requests")
    assert cache.currentText() == "on" and form.build().workload["cache_prompt"] is True


def test_a_kind_changed_in_the_form_writes_only_that_kinds_fields(qtbot):
    """The conversations box keeps its values while hidden, but a requests experiment made
    of the form holds none of them (a file that mixed kinds would be refused)."""
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(parse_experiment(CHAT))
    form.fields[("workload", "kind")].setCurrentText("requests")
    built = form.build()
    assert not set(CONVERSATION_FIELDS) & set(built.workload)
    assert type(built.configs()[0].workload).__name__ == "RequestsWorkload"
