"""Tables of agent configuration."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..model_base import Base


class ConfigVersion(Base):
    """An accepted configuration of an agent. The newest one is in force; invalid
    submissions are not stored here (they are `config_invalid` events)."""

    __tablename__ = "agent_config_versions"
    __table_args__ = (
        # Numbers count per agent (1, 2, …); also the "newest first" index.
        Index("uq_agent_config_versions_number", "agent_id", "number", unique=True),
        # A commit's content is stored once, however many pods report it.
        # Commit-less rows (NULL) may repeat: going back to older content is a new version.
        Index("uq_agent_config_versions_commit", "agent_id", "commit_sha", "digest",
              unique=True),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    agent_id: Mapped[int] = mapped_column(ForeignKey("agents.id", ondelete="CASCADE"))
    number: Mapped[int]
    text: Mapped[str] = mapped_column(Text)
    # sha256 of the normalized text (see validate.normalize).
    digest: Mapped[str] = mapped_column(String(64))
    commit_sha: Mapped[str | None] = mapped_column(String(64))
    source: Mapped[str] = mapped_column(String(8))  # ui / cli / api
    # The user (ui), the agent token's name (api), or nobody (cli).
    created_by: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime]
    # The parsed text, so readers need no YAML parsing.
    document: Mapped[dict[str, Any]] = mapped_column(JSON)
