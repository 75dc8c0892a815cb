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
    ARRIVALS,
    KV_CACHE_TYPES,
    Experiment,
    experiment_to_toml,
    load_experiment,
    parse_experiment,
)

ERROR_STYLE = "border: 2px solid #e5484d;"
TRI_STATE = {"server default": None, "on": True, "off": False, "on and off": [True, False]}
NUMBER_FIELDS = {
    ("server", "slots"): int,
    ("server", "ctx"): int,
    ("server", "threads"): int,
    ("workload", "requests"): int,
    ("workload", "concurrency"): int,
    ("workload", "rate"): float,
    ("workload", "max_tokens"): int,
    ("workload", "repeats"): int,
    ("workload", "warmup"): int,
}


def parse_number_list(text: str, kind: type) -> Any:
    """'1, 2, 4' -> [1, 2, 4]; '8192' -> 8192; '' -> None. Raises ValueError with the reason."""
    parts = [p for p in re.split(r"[,\s]+", text.strip()) if p]
    if not parts:
        return None
    values = []
    for part in parts:
        try:
            values.append(kind(part))
        except ValueError:
            noun = "a whole number" if kind is int else "a number"
            raise ValueError(f"'{part}' is not {noun}") from None
    return values[0] if len(values) == 1 else values


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


class ExperimentForm(QWidget):
    """Emits ``changed`` whenever a field changes (the planner and the Run button listen)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.experiment: Experiment | None = None
        self._kept: dict[tuple[str, str], Any] = {}
        self.path_label = QLabel("(no file)")
        self.path_label.setWordWrap(True)
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

        self.fields: dict[tuple[str, str], QWidget] = {}
        self.model = self._line(("server", "model"), "default = SmolLM2-135M from the wheel")
        model_pick = QPushButton("…")
        model_pick.setMaximumWidth(32)
        model_pick.clicked.connect(self._pick_model)
        model_row = QHBoxLayout()
        model_row.addWidget(self.model)
        model_row.addWidget(model_pick)
        self._line(("server", "slots"), "1, 2, 4 (a list sweeps; -1 = auto)")
        self._line(("server", "ctx"), "8192")
        self._combo(("server", "cont_batching"), ["on", "off", "on and off"])
        self._combo(("server", "kv_unified"), list(TRI_STATE))
        self._combo(("server", "cache_type_k"), ["server default", *KV_CACHE_TYPES])
        cores = os.cpu_count() or 1
        threads = self._line(("server", "threads"), f"server default (all {cores} cores)")
        threads.setToolTip(
            "llama-server -t. The window itself takes a little CPU while it draws a run; on a\n"
            f"machine with few cores, {max(1, cores - 1)} thread(s) leave it a core, so the "
            "numbers match a headless run\n(bench/gui_vs_headless.py measures the difference)."
        )
        self._line(("server", "extra_args"), "--flag value …")
        self._line(("workload", "requests"), "8")
        self._line(("workload", "concurrency"), "0 = all at once")
        self._combo(("workload", "arrival"), list(ARRIVALS))
        self._line(("workload", "rate"), "requests/s for poisson or fixed")
        self._line(("workload", "max_tokens"), "64")
        self.prompts = self._line(("workload", "prompts"), "builtin, or a .jsonl / .txt file")
        self._line(("workload", "repeats"), "1")
        self._line(("workload", "warmup"), "1")

        server_box = QGroupBox("Server")
        server_form = QFormLayout(server_box)
        server_form.addRow("model", model_row)
        for key, title in (
            ("slots", "slots (-np)"),
            ("ctx", "context (-c)"),
            ("cont_batching", "cont. batching"),
            ("kv_unified", "unified KV"),
            ("cache_type_k", "KV cache type"),
            ("threads", "threads"),
            ("extra_args", "extra args"),
        ):
            server_form.addRow(title, self.fields[("server", key)])
        workload_box = QGroupBox("Workload")
        workload_form = QFormLayout(workload_box)
        for key, title in (
            ("requests", "requests"),
            ("concurrency", "concurrency"),
            ("arrival", "arrival"),
            ("rate", "rate"),
            ("max_tokens", "max tokens"),
            ("prompts", "prompts"),
            ("repeats", "repeats"),
            ("warmup", "warm-up"),
        ):
            workload_form.addRow(title, self.fields[("workload", key)])
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setObjectName("formError")
        self.error.setStyleSheet("color:#e5484d;")
        files = QHBoxLayout()
        files.addWidget(open_button)
        files.addWidget(save_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.path_label)
        layout.addLayout(files)
        top = QFormLayout()
        top.addRow("name", self.name)
        layout.addLayout(top)
        layout.addWidget(self.external)
        external = QFormLayout()
        external.addRow("address", self.base_url)
        external.addRow("API key var", self.api_key_env)
        layout.addLayout(external)
        layout.addWidget(server_box)
        layout.addWidget(workload_box)
        layout.addWidget(self.error)
        layout.addStretch(1)

    # -- building ------------------------------------------------------------------------------
    def _line(self, key: tuple[str, str], hint: str) -> QLineEdit:
        edit = QLineEdit()
        edit.setPlaceholderText(hint)
        edit.textChanged.connect(self.changed)
        self.fields[key] = edit
        return edit

    def _combo(self, key: tuple[str, str], items: list[str]) -> QComboBox:
        combo = QComboBox()
        combo.addItems(items)
        combo.currentIndexChanged.connect(self.changed)
        self.fields[key] = combo
        return combo

    # -- loading and saving --------------------------------------------------------------------
    def load(self, experiment: Experiment) -> None:
        self.experiment = experiment
        self._kept = {}
        for widget in self.fields.values():
            widget.setEnabled(True)
        self.path_label.setText(experiment.path or "(unsaved)")
        self.name.setText(experiment.name)
        for (table, key), widget in self.fields.items():
            values = experiment.server if table == "server" else experiment.workload
            value = values.get(key)
            if self._cannot_show(key, value):
                # A sweep this widget cannot show (e.g. KV cache types): keep it as it is.
                self._kept[(table, key)] = value
                widget.setEnabled(False)
                widget.setToolTip(f"swept in the file: {value}; edit the file to change it")
                if isinstance(widget, QLineEdit):
                    widget.setText(" | ".join(shlex.join(v) for v in value))
            elif isinstance(widget, QComboBox):
                widget.setCurrentText(self._combo_text(key, value))
            elif key == "extra_args":
                widget.setText(shlex.join(value) if value and isinstance(value[0], str) else "")
            else:
                default = "default" if key == "model" else "builtin" if key == "prompts" else ""
                widget.setText(format_value(value) if value is not None else default)
        self._clear_errors()

    def _cannot_show(self, key: str, value: Any) -> bool:
        if not isinstance(value, list):
            return False
        if key == "extra_args":
            return bool(value) and isinstance(value[0], list)
        widget = self.fields.get(("server", key)) or self.fields.get(("workload", key))
        return isinstance(widget, QComboBox) and key not in ("cont_batching", "kv_unified")

    @staticmethod
    def _combo_text(key: str, value: Any) -> str:
        if key == "cont_batching":
            return "on and off" if isinstance(value, list) else "off" if value is False else "on"
        if key == "kv_unified":
            return next((k for k, v in TRI_STATE.items() if v == value), "server default")
        if key == "cache_type_k":
            return value if isinstance(value, str) else "server default"
        return str(value) if value is not None else "burst"

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

    def _pick_model(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Model file", "", "GGUF models (*.gguf)")
        if path:
            self.model.setText(path)

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
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value
        return server, workload

    def _widget_value(self, table: str, key: str, widget: QWidget) -> Any:
        if isinstance(widget, QComboBox):
            text = widget.currentText()
            if key in ("cont_batching", "kv_unified"):
                return TRI_STATE[text]
            return None if text == "server default" else text
        assert isinstance(widget, QLineEdit)
        text = widget.text().strip()
        if key == "extra_args":
            return shlex.split(text) if text else None
        if (table, key) in NUMBER_FIELDS:
            return parse_number_list(text, NUMBER_FIELDS[(table, key)])
        return text or None

    def build(self) -> Experiment:
        """A validated experiment from the form, or ExperimentError shown on its field."""
        self._clear_errors()
        try:
            server, workload = self.values()
            base = self.experiment
            text = experiment_to_toml(
                self.name.text().strip() or "experiment",
                base.description if base else "",
                server,
                workload,
            )
            path = base.path if base else None
            experiment = parse_experiment(text, path=path)
        except ExperimentError as exc:
            self.show_error(str(exc))
            raise
        if self.external.isChecked() and not self.base_url.text().strip():
            self.base_url.setStyleSheet(ERROR_STYLE)
            self.show_error("external mode needs a base URL, e.g. http://127.0.0.1:8080")
            raise ExperimentError("external mode needs a base URL")
        return experiment

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
            widget.setStyleSheet(ERROR_STYLE)
            widget.setToolTip(message)

    def _clear_errors(self) -> None:
        self.error.setText("")
        self.base_url.setStyleSheet("")
        for key, widget in self.fields.items():
            widget.setStyleSheet("")
            if key not in self._kept:
                widget.setToolTip("")
