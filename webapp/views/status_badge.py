"""The agent's connection badge in the header of every agent tab (agents/_status.html): the
key that tells a poll whether it changed. Every tab draws the badge, so none owns it.
"""

from __future__ import annotations

from ..agents import ConnectionStatus


def status_key(status: ConnectionStatus) -> str:
    """What the badge shows, coarse enough that an unchanged badge is not re-sent."""
    minute = status.last_contact.strftime("%Y%m%d%H%M") if status.last_contact else "-"
    return f"{status.state}.{minute}"
