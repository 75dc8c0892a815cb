"""The lab's lessons judged on what the run measured (the same verdicts as the CLI)."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from workbench.engine.analysis.verdicts import lab_verdicts
from workbench.engine.figures.summaries import ConfigSummary
from workbench.ui.theme.qt_theme import text_style
from workbench.ui.widgets.shown_late import DrawnWhenShown

SIGNALS = {"supported": "ok", "not supported": "error", "inconclusive": "warning"}


class VerdictsView(DrawnWhenShown, QScrollArea):
    """Judged while the tab shows: most windows stay on the results table, and judging every
    configuration's end on the GUI thread served nobody."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.text = QLabel("Verdicts appear when a slots sweep has run.")
        self.text.setWordWrap(True)
        self.text.setTextFormat(self.text.textFormat().RichText)
        inner = QWidget()
        layout = QVBoxLayout(inner)
        layout.addWidget(self.text)
        layout.addStretch(1)
        self.setWidget(inner)
        self.verdicts: list = []
        self._summaries: list[ConfigSummary] = []

    def sync(self, summaries: list[ConfigSummary]) -> None:
        """The verdicts on ``summaries``: now if the tab shows, else when it is shown."""
        self._summaries = list(summaries)
        self.content_changed()

    def draw_content(self) -> None:
        summaries = self._summaries
        if not summaries:
            self.verdicts = []
            self.text.setText("Verdicts appear when a slots sweep has run.")
            return
        self.verdicts = lab_verdicts(summaries)
        parts = []
        for v in self.verdicts:
            numbers = "<br>".join(f"&nbsp;&nbsp;{n}" for n in v.numbers)
            parts.append(
                f"<p><b style='{text_style(SIGNALS[v.verdict])}'>{v.verdict.upper()}</b> "
                f"{v.hypothesis}<br><small>{numbers}</small></p>"
            )
        self.text.setText("".join(parts))
