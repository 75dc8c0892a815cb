"""Colours and fonts, from ``workbench/resources/theme.json``: ``palette`` as plain data (no
Qt, for the Gantt page and the command line), ``qt_theme`` as Qt colours, palette and fonts."""
