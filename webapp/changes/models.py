"""What the changes recorder compares against, kept across restarts and lease hand-overs.

`change_baselines`: one row per (agent, followed resource) whose first list was taken, with
when it was last followed (an outage's start for the next process; a week unfollowed and
it is pruned). `change_states`: per object of it, the encoded desired state last recorded
(webapp/changes/tracked.py: spec or data, labels, annotations; a Secret's keys only).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from ..model_base import Base


class ChangeBaseline(Base):
    __tablename__ = "change_baselines"

    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"),
                                          primary_key=True)
    resource: Mapped[str] = mapped_column(String(300), primary_key=True)  # group/version/plural
    kind: Mapped[str] = mapped_column(String(100))
    seen_at: Mapped[datetime] = mapped_column(index=True)


class ChangeState(Base):
    __tablename__ = "change_states"

    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"),
                                          primary_key=True)
    resource: Mapped[str] = mapped_column(String(300), primary_key=True)
    key: Mapped[str] = mapped_column(String(600), primary_key=True)  # the uid (as the hub)
    namespace: Mapped[str] = mapped_column(String(253))
    name: Mapped[str] = mapped_column(String(253))
    state: Mapped[bytes] = mapped_column(LargeBinary)
