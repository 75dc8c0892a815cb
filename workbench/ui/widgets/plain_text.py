"""Text that came from a server or a session file, shown as written.

Qt reads a tooltip that looks like HTML as rich text: an error quoting ``<img src=...>`` or a
label from someone else's session would be rendered (and could fetch nothing, but show
anything). Every tooltip that carries such text goes through here.
"""

from __future__ import annotations

import html


def tooltip(text: str) -> str:
    """``text`` as a tooltip that shows it literally (line breaks kept)."""
    if not text:
        return ""
    return "<p style='white-space:pre-wrap'>" + html.escape(text) + "</p>"
