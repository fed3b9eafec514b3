"""The declarative base every table registers on, and the column types tables share.

Apart from `models.py` so that feature tables (agentconfig, hooks, notify) can build on it
while `models.py` imports them to gather every table on one metadata.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer
from sqlalchemy.orm import DeclarativeBase

# SQLite only makes INTEGER PRIMARY KEY an alias of the rowid (fast, auto-assigned).
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    pass
