"""The theme file (``workbench/resources/theme.json``) as plain data, without Qt: the window's
themes, the exported Gantt page and the ``gui`` command's flags read the same file."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

DEFAULT_FONT_PT = 11  # the window's base font size, in points


@cache
def theme_data() -> dict[str, Any]:
    return json.loads(resources.files("workbench.resources").joinpath("theme.json").read_text())


THEMES = tuple(theme_data()["themes"])  # dark, light, projector: the names `--theme` takes
