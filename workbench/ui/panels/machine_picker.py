"""The Machine picker: which machines a run goes to. This machine, the hosts of
``~/.ssh/config`` and hosts added by hand, any of them ticked; a model per remote host; each
host's check said in one line under it (ok, or each problem in red). What is ticked and what
was added are remembered in the preferences.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.base.errors import WorkbenchError
from workbench.engine.config.preferences import MAX_MACHINES, load_preferences, remember
from workbench.engine.remote.host_check import facts_line
from workbench.engine.remote.protocol import HostFacts
from workbench.engine.remote.ssh import check_dest
from workbench.ui.controllers.hosts_controller import (
    LOCAL,
    HostsController,
    facts_brief,
    machine_name,
)
from workbench.ui.theme.qt_theme import text_style


def dest_problem(dest: str) -> str | None:
    """Why ``dest`` is no host to hand ssh (ssh's own check), or None."""
    try:
        check_dest(dest)
    except WorkbenchError as exc:
        return str(exc)
    return None


class MachineRow(QWidget):
    """One machine: its tick, its model field (a remote host's) and its check's line."""

    def __init__(self, host: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self.box = QCheckBox(machine_name(host))
        self.box.setToolTip("run here" if host == LOCAL else f"run on {host} over SSH")
        self.model: QLineEdit | None = None
        self.line = QLabel()
        self.line.setTextFormat(Qt.TextFormat.PlainText)  # a host's words: never rich text
        self.line.setWordWrap(True)
        self.line.hide()
        layout = QGridLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.box, 0, 0)
        if host != LOCAL:
            self.model = QLineEdit()
            self.model.setPlaceholderText("model: the experiment's")
            self.model.setToolTip(
                f"the GGUF file on {host} to run; empty: the experiment's model as {host} "
                "resolves it"
            )
            layout.addWidget(self.model, 0, 1)
        layout.addWidget(self.line, 1, 0, 1, 2)
        layout.setColumnStretch(1, 1)

    def say(self, text: str, signal: str) -> None:
        self.line.setText(text)
        self.line.setStyleSheet(text_style(signal))
        self.line.show()


class MachinePicker(QWidget):
    """Emits ``ticked`` with a host just ticked (the window checks it), ``check_requested``
    for the Check button, ``trust_requested`` when the user trusts a host's key."""

    ticked = Signal(str)
    check_requested = Signal()
    trust_requested = Signal(str, object)  # host, the fingerprints trusted

    def __init__(self, aliases: list[str], parent: QWidget | None = None) -> None:
        """``aliases``: the hosts of the user's SSH config, listed after this machine."""
        super().__init__(parent)
        self.setObjectName("machinePicker")
        heading = QLabel("Machines")
        heading.setStyleSheet("font-weight:bold;")
        heading.setToolTip("where a run goes: tick several to run on them at once, side by side")
        self.key_dialog: QMessageBox | None = None  # the open "Trust this host?" question
        remembered, _ = load_preferences()
        self.added = list(remembered.machines)
        self.rows: dict[str, MachineRow] = {}
        self._rows = QVBoxLayout()
        self._rows.setSpacing(2)
        self.dest = QLineEdit()
        self.dest.setPlaceholderText("user@host")
        self.dest.setToolTip("a host ssh reaches: an alias, user@host or ssh://user@host:port")
        self.dest.returnPressed.connect(self.add_typed)
        add = QPushButton("Add…")
        add.setToolTip("add a host that ssh reaches (an alias, user@host, ssh://user@host:port)")
        add.clicked.connect(self.add_typed)
        self.check_button = QPushButton("Check")
        self.check_button.setToolTip("check each ticked machine: reachable, llama-server, model")
        self.check_button.clicked.connect(self.check_requested)
        self.error = QLabel()
        self.error.setObjectName("machineError")
        self.error.setWordWrap(True)
        self.error.setStyleSheet(text_style("error"))
        self.error.hide()
        adding = QHBoxLayout()
        adding.addWidget(self.dest, 1)
        adding.addWidget(add)
        adding.addWidget(self.check_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 0, 4)
        layout.addWidget(heading)
        layout.addLayout(self._rows)
        layout.addLayout(adding)
        layout.addWidget(self.error)
        hosts = [LOCAL, *aliases[:MAX_MACHINES], *self.added]
        for host in dict.fromkeys(hosts):
            self._add_row(host)
        for host in remembered.machines_ticked or (LOCAL,):
            if host in self.rows:
                self.rows[host].box.setChecked(True)

    def _add_row(self, host: str) -> MachineRow:
        row = MachineRow(host)
        row.box.toggled.connect(lambda on, host=host: self._toggled(host, on))
        self.rows[host] = row
        self._rows.addWidget(row)
        return row

    def _toggled(self, host: str, on: bool) -> None:
        self._save(machines_ticked=tuple(self.ticked_hosts()))
        if on:
            self.ticked.emit(host)

    def _save(self, **changes: tuple[str, ...]) -> None:
        try:
            remember(**changes)
        except WorkbenchError as exc:
            self._say_error(str(exc))

    def _say_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.setVisible(bool(text))

    def attach(self, hosts: HostsController) -> None:
        """Checks go to ``hosts`` (a host ticked, the Check button, a key trusted); what
        they find comes back to each host's line."""
        self.ticked.connect(lambda host: hosts.check(host, self.model_for(host)))
        self.check_requested.connect(
            lambda: [hosts.check(host, self.model_for(host)) for host in self.ticked_hosts()]
        )
        self.trust_requested.connect(
            lambda host, fingerprints: hosts.trust(host, fingerprints, self.model_for(host))
        )
        hosts.checking.connect(self.show_checking)
        hosts.checked.connect(self.show_facts)
        hosts.failed.connect(self.show_failed)
        hosts.key_unknown.connect(self.ask_trust)
        hosts.key_changed.connect(self.refuse)

    # -- what the window asks ------------------------------------------------------------------
    def ticked_hosts(self) -> list[str]:
        """The machines ticked, in the picker's order ("local": this machine)."""
        return [host for host, row in self.rows.items() if row.box.isChecked()]

    def model_for(self, host: str) -> str | None:
        """The model typed for ``host``; None: the experiment's, as the host resolves it."""
        field = self.rows[host].model
        text = field.text().strip() if field is not None else ""
        return text or None

    def tick_only(self, hosts: list[str]) -> None:
        """Tick ``hosts`` alone (destinations ``check_dest`` passed), for this window only
        (``gui --host``): none is remembered, and none is checked until Check or Run."""
        for host in hosts:
            if host not in self.rows:
                self._add_row(host)
        for host, row in self.rows.items():
            row.box.blockSignals(True)
            row.box.setChecked(host in hosts)
            row.box.blockSignals(False)

    def add_typed(self) -> None:
        """The host typed by hand, listed, remembered and ticked (a bad one is refused with
        its reason)."""
        dest = self.dest.text().strip()
        problem = dest_problem(dest)
        if problem is None and dest not in self.rows and len(self.added) >= MAX_MACHINES:
            problem = f"at most {MAX_MACHINES} hosts can be added"
        self._say_error(problem or "")
        if problem is not None:
            return
        self.dest.clear()
        if dest not in self.rows:
            self.added.append(dest)
            self._save(machines=tuple(self.added))
            self._add_row(dest)
        self.rows[dest].box.setChecked(True)

    # -- what a check found --------------------------------------------------------------------
    def show_checking(self, host: str) -> None:
        if host in self.rows:
            self.rows[host].say("checking…", "quiet")

    def show_facts(self, host: str, facts: HostFacts) -> None:
        if host in self.rows:
            problems = "\n".join(facts.problems)
            self.rows[host].say(problems or facts_brief(facts), "error" if problems else "ok")
            self.rows[host].line.setToolTip(facts_line(host, facts))

    def show_failed(self, host: str, text: str) -> None:
        if host in self.rows:
            self.rows[host].say(text, "error")

    def refuse(self, host: str, text: str) -> None:
        """A host that must not run (its key changed, or it was not trusted): unticked,
        with the reason."""
        if host in self.rows:
            self.rows[host].box.setChecked(False)
            self.rows[host].say(text, "error")

    def ask_trust(self, host: str, fingerprints: tuple[str, ...]) -> QMessageBox:
        """The question for a host whose key is not known yet: its fingerprints, and "Trust
        this host?". Yes asks for the key to be stored (``trust_requested``); No unticks it."""
        shown = "\n".join(fingerprints) or "(the host sent no key)"
        dialog = QMessageBox(
            QMessageBox.Icon.Question,
            "Trust this host?",
            f"{host} is not in your known hosts. Its key's fingerprints:\n\n{shown}\n\n"
            "Compare them with what the host's owner says. Trust this host?",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            self,
        )
        dialog.setTextFormat(Qt.TextFormat.PlainText)
        dialog.setDefaultButton(QMessageBox.StandardButton.No)
        dialog.finished.connect(lambda _: self._answered(host, fingerprints, dialog))
        self.key_dialog = dialog
        dialog.open()
        return dialog

    def _answered(self, host: str, fingerprints: tuple[str, ...], dialog: QMessageBox) -> None:
        self.key_dialog = None
        answer = dialog.standardButton(dialog.clickedButton())
        dialog.deleteLater()
        if answer == QMessageBox.StandardButton.Yes:
            self.trust_requested.emit(host, fingerprints)
        else:
            self.refuse(host, "its key was not trusted: left unticked")
