"""Tables of notifications."""

from __future__ import annotations

from ..models import Base  # noqa: F401  (tables defined here register on the shared Base)
