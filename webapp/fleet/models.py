"""Agents' labels: a few key=value pairs admins set (environment, region, team); the fleet's
last known state of each cluster."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..model_base import Base


class AgentLabel(Base):
    __tablename__ = "agent_labels"

    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"),
                                          primary_key=True)
    key: Mapped[str] = mapped_column(String(63), primary_key=True)
    value: Mapped[str] = mapped_column(String(63))


class FleetLastKnown(Base):
    """The fleet's last known state of a cluster as an identity read it (last_known.py),
    so that a cluster cut off still shows it after a restart."""

    __tablename__ = "fleet_last_known"

    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"),
                                          primary_key=True)
    identity: Mapped[str] = mapped_column(String(2000), primary_key=True)  # Identity.key
    state: Mapped[str] = mapped_column(Text)  # ClusterState as JSON
    known_at: Mapped[datetime]  # when it was last true (UTC)
