"""The experiment form is built from the settings schema and writes what it shows."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QComboBox, QFormLayout, QGroupBox, QLabel, QLineEdit

from workbench.engine.base.errors import ExperimentError
from workbench.engine.config.experiment import parse_experiment
from workbench.ui.panels.experiment_form import ExperimentForm, form_box, form_fields


def labels(form: ExperimentForm) -> dict[str, str]:
    """Row label -> the field's widget type, read from the form's own layouts."""
    out = {}
    for box in form.findChildren(QGroupBox):
        rows = box.layout()
        assert isinstance(rows, QFormLayout)
        for row in range(rows.rowCount()):
            label = rows.itemAt(row, QFormLayout.ItemRole.LabelRole).widget()
            assert isinstance(label, QLabel)
            out[label.text()] = box.title()
    return out


def test_every_form_field_of_the_schema_has_its_row(qtbot) -> None:
    form = ExperimentForm()
    qtbot.addWidget(form)
    shown = labels(form)
    for f in form_fields():
        assert shown[f.setting.label] == form_box(f).capitalize()
        widget = form.fields[(f.table, f.name)]
        expected = QComboBox if f.kind is bool or f.choices else QLineEdit
        assert isinstance(widget, expected), f.name
        assert widget.toolTip() == f.setting.help


def test_a_sweep_the_widget_cannot_show_is_kept_as_written(qtbot) -> None:
    form = ExperimentForm()
    qtbot.addWidget(form)
    text = '[server]\nkv_unified = [false, true]\ncache_type_k = ["f16", "q8_0"]\nslots = [1, 2]\n'
    form.load(parse_experiment(text))
    assert not form.fields[("server", "kv_unified")].isEnabled()
    assert not form.fields[("server", "cache_type_k")].isEnabled()
    built = form.build()
    assert built.server["kv_unified"] == [False, True]
    assert built.server["cache_type_k"] == ["f16", "q8_0"]
    assert [c.label for c in built.configs()][:2] == [
        "np=1 kvu=off cache_type_k=f16",
        "np=1 kvu=off cache_type_k=q8_0",
    ]


def test_defaults_show_as_the_schema_declares_them(qtbot) -> None:
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(parse_experiment("name = 'x'\n"))
    assert form.fields[("server", "model")].text() == "default"
    assert form.fields[("server", "cont_batching")].currentText() == "on"
    assert form.fields[("server", "kv_unified")].currentText() == "server default"
    assert form.fields[("workload", "arrival")].currentText() == "burst"
    assert form.fields[("server", "slots")].text() == ""  # the placeholder says 1
    assert form.build().server == {}  # left out as the file left them, unless changed


def test_flash_attention_is_in_the_form_because_the_schema_says_so(qtbot) -> None:
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(parse_experiment("name = 'x'\n"))
    combo = form.fields[("server", "flash_attn")]
    assert isinstance(combo, QComboBox)
    assert [combo.itemText(i) for i in range(combo.count())] == [
        "server default",
        "on",
        "off",
        "auto",
    ]
    combo.setCurrentText("auto")
    assert form.build().server["flash_attn"] == "auto"


def test_concurrency_following_the_slots_is_shown_and_kept(qtbot) -> None:
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(parse_experiment('[server]\nslots = [1, 2]\n[workload]\nconcurrency = "slots"\n'))
    field = form.fields[("workload", "concurrency")]
    assert isinstance(field, QLineEdit) and field.text() == "slots"
    built = form.build()
    assert built.workload["concurrency"] == "slots"
    assert [c.workload.concurrency for c in built.configs()] == [1, 2]


def test_zipped_axes_survive_the_form_and_are_checked(qtbot) -> None:
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(
        parse_experiment(
            'zip = ["server.slots", "workload.concurrency"]\n'
            "[server]\nslots = [1, 2]\n[workload]\nconcurrency = [1, 2]\n"
        )
    )
    assert form.build().zipped == ("server.slots", "workload.concurrency")
    form.fields[("server", "slots")].setText("1, 2, 4")
    with pytest.raises(ExperimentError, match="as many values each"):
        form.build()


def test_a_per_slot_limit_is_a_form_field_and_a_context_beside_it_is_marked(qtbot) -> None:
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(parse_experiment("[server]\nslots = 2\n"))
    form.fields[("server", "kv_unified_per_slot")].setText("512, 1024")
    built = form.build()
    assert built.server == {"slots": 2, "kv_unified_per_slot": [512, 1024]}
    assert [(c.label, c.server.ctx) for c in built.configs()] == [
        ("kvus=512", 1024),
        ("kvus=1024", 2048),
    ]
    form.fields[("server", "ctx")].setText("8192")
    with pytest.raises(ExperimentError, match="ctx and kv_unified_per_slot cannot both"):
        form.build()
    assert form.fields[("server", "ctx")].styleSheet()  # the field to change is marked


def test_a_context_a_rule_sets_shows_what_the_run_gets(qtbot) -> None:
    """Left out beside ``kv_unified_per_slot``, the context is slots x N, not the default
    8192 its hint would show; with the limit gone the hint is back."""
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(parse_experiment("[server]\nslots = 2\nkv_unified_per_slot = 2048\n"))
    ctx = form.fields[("server", "ctx")]
    assert ctx.text() == "" and ctx.placeholderText() == "4096"
    form.fields[("server", "slots")].setText("4")
    assert ctx.placeholderText() == "8192"  # 4 x 2048: the run's, the default's too
    form.fields[("server", "kv_unified_per_slot")].setText("1024")
    assert ctx.placeholderText() == "4096"
    form.fields[("server", "kv_unified_per_slot")].setText("")
    assert ctx.placeholderText() == "8192"


def test_one_edit_is_parsed_once_whoever_asks(qtbot) -> None:
    """The placeholders, the Capacity panel and the calibration check each ask for the form's
    experiment after an edit: the same text is one parse, an edit a new one."""
    form = ExperimentForm()
    qtbot.addWidget(form)
    form.load(parse_experiment("[server]\nslots = 2\n"))
    first = form.quietly_built()
    assert first is not None and form.quietly_built() is first
    form.fields[("server", "slots")].setText("4")
    again = form.quietly_built()
    assert again is not first and again.configs()[0].server.slots == 4


def test_settings_used_from_elsewhere_leave_out_what_they_say_none_and_other_kinds(qtbot):
    """A tune's settings over the form: a None is left out (its default), and a field of
    another kind than theirs, which their runs do not have, goes (not an error)."""
    form = ExperimentForm()
    qtbot.addWidget(form)
    text = "[workload]\nrequests = 8\nconcurrency = 4\ninput_tokens = 512\nrate = 2.0\n"
    form.load(parse_experiment(text))
    traced = {"arrival": "trace", "trace": "t.jsonl", "concurrency": None, "requests": None}
    form.use_settings({"ctx": 4096, "slots": None}, traced)
    assert form.error.text() == ""
    server, workload = form.values()
    assert server["ctx"] == 4096 and "slots" not in server
    assert workload == {"arrival": "trace", "trace": "t.jsonl"}
    assert form.build().configs()[0].workload.concurrency == 0
