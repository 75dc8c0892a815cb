"""The experiment panel: open a file, edit its fields, validate them, save a new file.

Validation is the engine's own (the form writes TOML and parses it back), so the window and
the CLI accept and refuse exactly the same experiments; errors are shown on the field.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.base.errors import ExperimentError, WorkbenchError
from workbench.engine.config.experiment import (
    SETTINGS,
    ConversationsWorkload,
    Experiment,
    RunConfig,
    experiment_to_toml,
    load_experiment,
    of_its_kinds,
    parse_experiment,
)
from workbench.engine.config.settings import Field, fields_of
from workbench.ui.panels.machine_picker import MachinePicker
from workbench.ui.panels.pickers import ChoiceDialog, model_picker
from workbench.ui.theme.qt_theme import signal_color, text_style

SERVER_DEFAULT = "server default"
BOTH = "on and off"
CONVERSATIONS = "conversations"  # the workload kind whose own fields have a box of their own


def parse_values(f: Field, text: str) -> Any:
    """'1, 2, 4' -> [1, 2, 4]; '8192' -> 8192; '' -> None: each part converted from text as a
    flag's is (``Field.from_text``). Raises ValueError with the reason."""
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    if not parts:
        return None
    values = [f.from_text(part) for part in parts]
    return values[0] if len(values) == 1 else values


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def combo_items(f: Field) -> dict[str, Any]:
    """A choice field's entries and the value each stands for: a boolean also offers both
    (a sweep), an optional field offers leaving it to the server."""
    items: dict[str, Any] = {SERVER_DEFAULT: None} if f.optional else {}
    if f.kind is bool:
        items.update({"on": True, "off": False, BOTH: [True, False]})
    else:
        items.update({choice: choice for choice in f.choices})
    return items


def form_fields() -> list[Field]:
    """The schema's fields that the form shows, server first."""
    return [f for cls in SETTINGS for f in fields_of(cls) if f.setting.in_form]


def form_box(f: Field) -> str:
    """The box a field is in: its table's, or for a field of conversations workloads only,
    the conversations' box, shown only while the kind is conversations: a short form for
    the other runs, on a small screen."""
    return CONVERSATIONS if f.kinds == (ConversationsWorkload,) else f.table


def show_choice(combo: QComboBox, f: Field, value: Any) -> None:
    combo.setCurrentText(next((text for text, v in combo_items(f).items() if v == value), ""))


def ran_value(config: RunConfig, f: Field) -> Any:
    """What a configuration runs with for a field (the file's, its default or its rule);
    of a field another kind of workload has, its default."""
    return getattr(config.server if f.table == "server" else config.workload, f.name, f.default)


def error_style() -> str:
    """A field's mark when what it holds is wrong."""
    return f"border: 2px solid {signal_color('error').name()};"


class ExperimentForm(QWidget):
    """Emits ``changed`` whenever a field changes (the planner and the Run button listen).

    Every field, its label, hint, tooltip and widget come from the settings schema."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None, ssh_hosts: list[str] | None = None) -> None:
        """``ssh_hosts``: the hosts of the user's SSH config, for the Machine picker."""
        super().__init__(parent)
        self.experiment: Experiment | None = None
        self._kept: dict[tuple[str, str], Any] = {}
        # What each field the file leaves out showed when loaded: left out again unless
        # changed, so the file's own rules still decide it (a conversations run's cache).
        self._unset: dict[tuple[str, str], Any] = {}
        self._loading = False
        self._last_parsed: tuple[tuple[str, str | None], Experiment] | None = None
        self.changed.connect(self._show_derived)
        self.path_label = QLabel("(no file)")
        self.path_label.setWordWrap(True)
        # A reopened session's experiment is shown as it ran, not as editable fields.
        self.session_note = QLabel()
        self.session_note.setWordWrap(True)
        self.session_note.hide()
        self.edit_button = QPushButton("Edit a copy")
        self.edit_button.setToolTip("change the session's experiment and run it as a new one")
        self.edit_button.clicked.connect(self.edit_copy)
        self.edit_button.hide()
        self._session_name: str | None = None
        self.picker: ChoiceDialog | None = None  # the model picker, while it is open
        open_button = QPushButton("Open…")
        save_button = QPushButton("Save as…")
        open_button.clicked.connect(self._open_dialog)
        save_button.clicked.connect(self._save_dialog)
        self.name = QLineEdit()
        self.external = QCheckBox("External server (no lifecycle)")
        self.base_url = QLineEdit()
        self.base_url.setPlaceholderText("http://127.0.0.1:8080")
        self.base_url.setEnabled(False)
        self.external.toggled.connect(self.base_url.setEnabled)
        # The name of a variable holding the key, never the key: the form can be screenshot.
        self.api_key_env = QLineEdit()
        self.api_key_env.setPlaceholderText("optional, e.g. OPENAI_API_KEY")
        self.api_key_env.setToolTip(
            "the name of an environment variable that holds a bearer token for the server; "
            "its value is read when the run starts and is never stored"
        )
        self.api_key_env.setEnabled(False)
        self.external.toggled.connect(self.api_key_env.setEnabled)

        self.schema = {(f.table, f.name): f for f in form_fields()}
        self.fields: dict[tuple[str, str], QWidget] = {}
        boxes: dict[str, QGroupBox] = {}
        for key, f in self.schema.items():
            widget = self._combo(f) if f.kind is bool or f.choices else self._line(f)
            widget.setToolTip(f.setting.help)
            self.fields[key] = widget
            box = form_box(f)
            if box not in boxes:
                boxes[box] = QGroupBox(box.capitalize())
                QFormLayout(boxes[box])
            rows = boxes[box].layout()
            assert isinstance(rows, QFormLayout)
            rows.addRow(f.setting.label, self._with_picker(f, widget))
        self.conversations_box = boxes.get(CONVERSATIONS)
        kind = self.fields.get(("workload", "kind"))
        if isinstance(kind, QComboBox):
            kind.currentTextChanged.connect(self._kind_changed)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setObjectName("formError")
        self.error.setStyleSheet(text_style("error"))
        files = QHBoxLayout()
        files.addWidget(open_button)
        files.addWidget(save_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.path_label)
        layout.addWidget(self.session_note)
        layout.addWidget(self.edit_button)
        layout.addLayout(files)
        top = QFormLayout()
        top.addRow("name", self.name)
        layout.addLayout(top)
        layout.addWidget(self.external)
        external = QFormLayout()
        external.addRow("address", self.base_url)
        external.addRow("API key var", self.api_key_env)
        layout.addLayout(external)
        self.machines = MachinePicker(ssh_hosts or [])  # where a run goes: one or several
        layout.addWidget(self.machines)
        for box in boxes.values():
            layout.addWidget(box)
        layout.addWidget(self.error)
        layout.addStretch(1)
        self._show_conversations()  # once in the layout: a box without a parent is a window

    def _show_conversations(self) -> None:
        kind = self.fields.get(("workload", "kind"))
        if self.conversations_box is not None and isinstance(kind, QComboBox):
            self.conversations_box.setVisible(kind.currentText() == CONVERSATIONS)

    def _kind_changed(self) -> None:
        self._show_conversations()
        if not self._loading:
            self._show_left_out()

    def _show_left_out(self) -> None:
        """Each choice the file leaves out, still as loaded, shows what the run will get
        now: a kind changed to conversations turns the prompt cache on."""
        try:
            first = self._parsed().configs()[0]
        except ExperimentError:
            return
        for key, shown in self._unset.items():
            widget = self.fields[key]
            if isinstance(widget, QComboBox) and self._widget_value(*key, widget) == shown:
                show_choice(widget, self.schema[key], ran_value(first, self.schema[key]))
                self._unset[key] = self._widget_value(*key, widget)

    # -- building ------------------------------------------------------------------------------
    def _line(self, f: Field) -> QLineEdit:
        edit = QLineEdit()
        edit.setPlaceholderText(f.setting.hint.format(cores=os.cpu_count() or 1))
        edit.textChanged.connect(self.changed)
        return edit

    def _combo(self, f: Field) -> QComboBox:
        combo = QComboBox()
        combo.addItems(list(combo_items(f)))
        combo.currentIndexChanged.connect(self.changed)
        return combo

    def _with_picker(self, f: Field, widget: QWidget) -> QWidget | QHBoxLayout:
        """A file field gets a '…' button that opens a file dialog with its filter."""
        if not f.setting.file_filter:
            return widget
        pick = QPushButton("…")
        pick.setMaximumWidth(32)
        pick.clicked.connect(lambda: self._pick_file(f, widget))
        row = QHBoxLayout()
        row.addWidget(widget)
        row.addWidget(pick)
        return row

    # -- loading and saving --------------------------------------------------------------------
    def show_session(
        self, experiment: Experiment, session_name: str, external_url: str | None = None
    ) -> None:
        """The experiment a reopened session ran, read-only, against the server it ran
        against (``external_url``: a server started elsewhere, at that address): Run runs
        it again as it was; "Edit a copy" makes the fields editable."""
        self.load(experiment)
        self.external.setChecked(external_url is not None)
        if external_url is not None:
            self.base_url.setText(external_url)
        for widget in (self.external, self.base_url, self.api_key_env):
            widget.setEnabled(False)
        self._session_name = session_name
        self.path_label.setText(f"the experiment of {session_name}")
        self.session_note.setText("As the session ran it (read-only). Run runs it again.")
        self.session_note.show()
        self.edit_button.show()
        self.name.setEnabled(False)
        for widget in self.fields.values():
            widget.setEnabled(False)

    def edit_copy(self) -> None:
        """The shown session's experiment, editable, as a new unsaved experiment."""
        if self._session_name is None or self.experiment is None:
            return
        name = self._session_name
        self.load(self.experiment)
        self.path_label.setText(f"(unsaved copy of the experiment of {name})")

    @property
    def read_only(self) -> bool:
        return self._session_name is not None

    def load(self, experiment: Experiment) -> None:
        self._session_name = None
        self.session_note.hide()
        self.edit_button.hide()
        self.name.setEnabled(True)
        self.external.setEnabled(True)
        self.base_url.setEnabled(self.external.isChecked())
        self.api_key_env.setEnabled(self.external.isChecked())
        self.experiment = experiment
        self._kept = {}
        self._loading = True
        for widget in self.fields.values():
            widget.setEnabled(True)
        self.path_label.setText(experiment.path or "(unsaved)")
        self.name.setText(experiment.name)
        first = experiment.configs()[0]  # what a field the file leaves out comes to
        for key, widget in self.fields.items():
            f = self.schema[key]
            values = experiment.server if f.table == "server" else experiment.workload
            value = values.get(f.name)
            if self._cannot_show(f, value):
                # A sweep this widget cannot show (e.g. KV cache types): keep it as it is.
                self._kept[key] = value
                widget.setEnabled(False)
                widget.setToolTip(f"swept in the file: {value}; edit the file to change it")
                if isinstance(widget, QLineEdit):
                    widget.setText(" | ".join(shlex.join(v) for v in value))
            elif isinstance(widget, QComboBox):
                show_choice(widget, f, ran_value(first, f) if value is None else value)
            elif f.is_args:
                widget.setText(shlex.join(value) if value else "")
            else:
                shown = value if value is not None else f.default if f.kind is str else None
                widget.setText(format_value(shown))
        self._unset = {
            key: self._widget_value(*key, widget)
            for key, widget in self.fields.items()
            if key[1] not in (experiment.server if key[0] == "server" else experiment.workload)
        }
        self._loading = False
        self._show_derived()
        self._clear_errors()

    def _show_derived(self) -> None:
        """An empty number field shows what the run will get where a rule sets it from other
        fields (``ctx`` is slots x ``kv_unified_per_slot``), else its hint: a left-out
        context must not read as the default's 8192 when the run's is 4096."""
        if self._loading or (experiment := self.quietly_built()) is None:
            return
        first = experiment.configs()[0]
        for key, widget in self.fields.items():
            f = self.schema[key]
            if isinstance(widget, QLineEdit) and f.kind in (int, float) and not f.is_args:
                ran = ran_value(first, f)
                derived = ran is not None and ran != f.default
                hint = f.setting.hint.format(cores=os.cpu_count() or 1)
                widget.setPlaceholderText(format_value(ran) if derived else hint)

    def _cannot_show(self, f: Field, value: Any) -> bool:
        if f.is_args:
            return f.is_axis(value)
        if not isinstance(value, list):
            return False
        widget = self.fields[(f.table, f.name)]
        return isinstance(widget, QComboBox) and value not in combo_items(f).values()

    def use_settings(self, server: dict[str, Any], workload: dict[str, Any]) -> None:
        """Settings found elsewhere (a tune's recommendation) over what the form holds, as
        an unsaved experiment; the form's own fields stay where those leave them, but for a
        setting given as None, left out (its default), and the fields of another kind of
        workload than the one given, which its runs do not have."""
        try:
            own_server, own_workload = self.values()
        except ExperimentError:  # a field being edited is wrong: the loaded file's, then
            base = self.experiment
            own_server, own_workload = (base.server, base.workload) if base else ({}, {})
        name = self.name.text().strip() or "experiment"
        server = {k: v for k, v in {**own_server, **server}.items() if v is not None}
        given = {k: v for k, v in {**own_workload, **workload}.items() if v is not None}
        workload = of_its_kinds(given)
        try:
            self.load(parse_experiment(experiment_to_toml(name, "", server, workload)))
        except ExperimentError as exc:
            self.show_error(str(exc))
            return
        self.path_label.setText("(unsaved: the settings a tune recommended)")

    def load_file(self, path: str | Path) -> None:
        self.load(load_experiment(path))

    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open experiment", "experiments", "Experiments (*.toml)"
        )
        if path:
            try:
                self.load_file(path)
            except WorkbenchError as exc:
                self.show_error(str(exc))

    def _save_dialog(self) -> None:
        try:
            experiment = self.build()
        except ExperimentError:
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Save experiment as", "experiments", "Experiments (*.toml)"
        )
        if path:
            self.save(Path(path), experiment)

    def save(self, path: Path, experiment: Experiment) -> None:
        try:
            path.write_text(experiment.source, encoding="utf-8")
        except OSError as exc:
            self.show_error(f"cannot save {path}: {exc.strerror or exc}")
            return
        self.load(parse_experiment(experiment.source, path.stem, str(path)))

    def _pick_file(self, f: Field, widget: QWidget) -> None:
        """The model from the models found on the machine; other files from a file dialog."""
        if not isinstance(widget, QLineEdit):
            return
        if f.name == "model":
            self.picker = model_picker(self)
            self.picker.chosen.connect(lambda path, _: widget.setText(path))
            self.picker.open()
            return
        path, _ = QFileDialog.getOpenFileName(self, f.setting.label, "", f.setting.file_filter)
        if path:
            widget.setText(path)

    # -- validation ----------------------------------------------------------------------------
    def values(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """The form's server and workload tables, on top of the loaded experiment's other
        fields (temperature, ignore_eos, ...). Raises ExperimentError naming the field."""
        base = self.experiment
        server = dict(base.server) if base else {}
        workload = dict(base.workload) if base else {}
        for (table, key), widget in self.fields.items():
            target = server if table == "server" else workload
            if (table, key) in self._kept:
                target[key] = self._kept[(table, key)]
                continue
            try:
                value = self._widget_value(table, key, widget)
            except ValueError as exc:
                raise ExperimentError(f"[{table}] {key}: {exc}") from None
            if (table, key) in self._unset and value == self._unset[(table, key)]:
                continue  # left out by the file, and unchanged: still left out
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value
        return server, workload

    def _widget_value(self, table: str, key: str, widget: QWidget) -> Any:
        f = self.schema[(table, key)]
        if isinstance(widget, QComboBox):
            return combo_items(f).get(widget.currentText())
        assert isinstance(widget, QLineEdit)
        text = widget.text().strip()
        if f.is_args:
            return shlex.split(text) if text else None
        if f.kind in (int, float):
            return parse_values(f, text)
        return text or None

    def build(self) -> Experiment:
        """A validated experiment from the form, or ExperimentError shown on its field."""
        self._clear_errors()
        try:
            experiment = self._parsed()
        except ExperimentError as exc:
            self.show_error(str(exc))
            raise
        if self.external.isChecked() and not self.base_url.text().strip():
            self.base_url.setStyleSheet(error_style())
            self.show_error("external mode needs a base URL, e.g. http://127.0.0.1:8080")
            raise ExperimentError("external mode needs a base URL")
        return experiment

    def quietly_built(self) -> Experiment | None:
        """The form's experiment where it validates, no field marked (for what is checked
        as the user types: whether its settings are calibrated); None where it does not."""
        try:
            return self._parsed()
        except ExperimentError:
            return None

    def _parsed(self) -> Experiment:
        """The form's experiment, by the engine's own rules (ExperimentError if not)."""
        server, workload = self.values()
        base = self.experiment
        text = experiment_to_toml(
            self.name.text().strip() or "experiment",
            base.description if base else "",
            server,
            of_its_kinds(workload),  # a hidden box of another kind's fields is not written
            base.zipped if base else (),
        )
        path = base.path if base else None
        # Each edit is read by several listeners (the placeholders, the Capacity panel, the
        # calibration check): the same text is parsed once. An experiment is immutable.
        if self._last_parsed is None or self._last_parsed[0] != (text, path):
            self._last_parsed = ((text, path), parse_experiment(text, path=path))
        return self._last_parsed[1]

    def external_url(self) -> str | None:
        return self.base_url.text().strip() if self.external.isChecked() else None

    def external_api_key_env(self) -> str | None:
        name = self.api_key_env.text().strip()
        return name if self.external.isChecked() and name else None

    def show_error(self, message: str) -> None:
        self.error.setText(message)
        match = re.search(r"\[(server|workload)\] (\w+)", message)
        if match and (match.group(1), match.group(2)) in self.fields:
            widget = self.fields[(match.group(1), match.group(2))]
            widget.setStyleSheet(error_style())
            widget.setToolTip(message)

    def _clear_errors(self) -> None:
        self.error.setText("")
        self.base_url.setStyleSheet("")
        for key, widget in self.fields.items():
            widget.setStyleSheet("")
            if key not in self._kept:
                widget.setToolTip(self.schema[key].setting.help)
