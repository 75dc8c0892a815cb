"""The desktop workbench: PySide6 + pyqtgraph views over engine events. No measurement here."""
