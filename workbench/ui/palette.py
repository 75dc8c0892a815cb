"""The theme file (``workbench/resources/theme.json``) as plain data, without Qt: the window's
themes and the exported Gantt page take their colours from the same file."""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any


@cache
def theme_data() -> dict[str, Any]:
    return json.loads(resources.files("workbench.resources").joinpath("theme.json").read_text())
