"""The small step before a watch from the window: "Watch…" opens it over the main window,
with the address and the API key variable of the External server fields shown, and asks
what ``workbench watch`` takes on its flags (the interval, how long, the SLOs, the server's
own endpoints behind a proxy), each field read by ``watch_settings``. **Watch** starts the
watch only where every field is right; what is wrong is one line under the fields, and
the dialog stays open with what was typed.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from workbench.engine.config.settings import TIME_FORMS, as_typed
from workbench.engine.tune.records import METRICS, PERCENTILES
from workbench.engine.watch.watcher import INTERVAL_S, MAX_INTERVAL_S, MIN_INTERVAL_S
from workbench.ui.theme.qt_theme import text_style
from workbench.ui.watch_settings import (
    FIELDS,
    SLO_EXAMPLE,
    WatchSettings,
    WatchSettingsError,
    WatchTexts,
    read_settings,
)

FIELD_WIDTH = 460  # px: an SLO list or a proxy's URL in full


def _field(text: str, placeholder: str, tip: str) -> QLineEdit:
    field = QLineEdit(text)
    field.setPlaceholderText(placeholder)
    field.setToolTip(tip)
    field.setMinimumWidth(FIELD_WIDTH)
    field.setClearButtonEnabled(True)
    return field


def _hint(text: str) -> QLabel:
    hint = QLabel(text)
    hint.setTextFormat(Qt.TextFormat.PlainText)  # one line: a wrapped one left a gap above
    hint.setStyleSheet(text_style("quiet"))
    return hint


class WatchSettingsDialog(QDialog):
    """The settings of one watch of ``url``; ``chosen`` tells them, read, and the texts
    typed (for the next watch to start from), once **Watch** finds them right."""

    chosen = Signal(object, object)  # WatchTexts, WatchSettings

    def __init__(
        self,
        url: str,
        api_key_env: str | None,
        texts: WatchTexts,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Watch a server — Concurrency Workbench")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        where = QLabel(
            f"Watch {url}"
            + (f" (API key from ${api_key_env})" if api_key_env else "")
            + ": its /slots and /metrics polled, no load sent. The address and the key "
            "are the External server's (Experiment tab)."
        )
        where.setTextFormat(Qt.TextFormat.PlainText)
        where.setWordWrap(True)
        where.setObjectName("watchWhere")

        least, most = f"{MIN_INTERVAL_S:g}", as_typed(MAX_INTERVAL_S)
        self.interval = _field(
            texts.interval,
            f"{INTERVAL_S:g}",
            f"seconds between polls, from {least} to {most} (--interval); a slow server is "
            "polled less often",
        )
        self.duration = _field(
            texts.duration,
            "until Stop",
            f"stop after this long: {TIME_FORMS} (--for); empty: until Stop",
        )
        self.slos = _field(
            texts.slos,
            SLO_EXAMPLE,
            "judged on the watch when it ends, as workbench watch --slo judges them: "
            f"METRIC_PCT:MS, metrics {', '.join(METRICS)}, apart by spaces",
        )
        self.slots_url = _field(
            texts.slots_url,
            "at the address",
            "the server's own /slots where a proxy stands at the address (--slots-url)",
        )
        self.metrics_url = _field(
            texts.metrics_url,
            "at the address",
            "the server's own /metrics where a proxy stands at the address (--metrics-url)",
        )
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Interval", self.interval)
        form.addRow("", _hint(f"seconds between polls, {least} to {most}"))
        form.addRow("For", self.duration)
        form.addRow("", _hint(f"{TIME_FORMS}; empty: until Stop"))
        form.addRow("SLOs", self.slos)
        percentiles = ", ".join(f"p{p}" for p in PERCENTILES)
        form.addRow(
            "", _hint(f"judged when it ends: METRIC_PCT:MS ({', '.join(METRICS)}; {percentiles})")
        )
        form.addRow("/slots URL", self.slots_url)
        form.addRow("/metrics URL", self.metrics_url)
        form.addRow(
            "",
            _hint("behind a proxy (llama-swap, LiteLLM): the server's own; empty: at the address"),
        )

        self.error = QLabel()
        self.error.setObjectName("watchSettingsError")
        self.error.setTextFormat(Qt.TextFormat.PlainText)
        self.error.setWordWrap(True)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setStyleSheet(text_style("error") + "font-weight:bold;")
        self.error.hide()

        self.watch_button = QPushButton("Watch")
        self.watch_button.setDefault(True)
        self.watch_button.clicked.connect(self.take)
        cancel = QPushButton("Cancel")
        cancel.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(cancel)
        buttons.addWidget(self.watch_button)
        layout = QVBoxLayout(self)
        layout.addWidget(where)
        layout.addLayout(form)
        layout.addWidget(self.error)
        layout.addLayout(buttons)
        fields = (self.interval, self.duration, self.slos, self.slots_url, self.metrics_url)
        self.fields = dict(zip(FIELDS, fields, strict=True))  # by the name an error says

    def texts(self) -> WatchTexts:
        return WatchTexts(
            self.interval.text(),
            self.duration.text(),
            self.slos.text(),
            self.slots_url.text(),
            self.metrics_url.text(),
        )

    def take(self) -> WatchSettings | None:
        """The fields read: the settings told and the dialog closed, or one line of what
        is wrong, its field focused, and nothing started."""
        texts = self.texts()
        try:
            settings = read_settings(texts)
        except WatchSettingsError as exc:
            self.error.setText(str(exc))
            self.error.show()
            field = self.fields[exc.field]
            field.setFocus()
            field.selectAll()
            return None
        self.error.hide()
        self.accept()
        self.chosen.emit(texts, settings)
        return settings
