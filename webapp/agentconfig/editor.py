"""What the configuration editor on the Settings tab shows: the history, the text, the
problems of a refused save.

Apart from the editor's routes (views.py), which draw the Settings tab again after a refusal:
the tab (webapp/views/settings.py) builds its editor from here without importing them.
"""

from __future__ import annotations

from typing import Any

from ..models import Agent
from ..watch.access import for_agent
from . import edit, reading
from .user_access import user_access_section
from .validate import MAX_BYTES, Problem

HISTORY_LIMIT = 20


def editor_context(agent: Agent, text: str | None = None,
                   problems: tuple[Problem, ...] = ()) -> dict[str, Any]:
    """What the Settings tab needs to draw the editor; `text` and `problems` after a refusal."""
    versions = reading.history(agent, HISTORY_LIMIT)
    return {
        "in_force": versions[0] if versions else None,
        "versions": versions,
        "text": reading.editor_text(agent) if text is None else text,
        "problems": problems,
        "max_bytes": MAX_BYTES,
        # What "Edit access" adds when the text has no `user_access` yet: today's access.
        "access_section": edit.section_text(
            "user_access", user_access_section(for_agent(agent))),
    }
