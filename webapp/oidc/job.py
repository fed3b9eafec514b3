"""The scheduler's re-check of sessions signed in through a provider: a person who opens
no page (an open Cluster tab lives on its socket) is checked as often as one who does, so a
removed group or user takes effect within OIDC_RECHECK_SECONDS and a tick."""

from __future__ import annotations

from datetime import timedelta

from flask import Flask
from sqlalchemy import select

from .. import clock, db
from ..models import User, UserSession
from . import recheck
from .models import ProviderSession


def run(app: Flask) -> int:
    """Re-check every session that is due; how many were checked."""
    with app.app_context():
        due = clock.now() - timedelta(seconds=app.config["OIDC_RECHECK_SECONDS"])
        rows = db.session().execute(
            select(ProviderSession.session_id, User)
            .join(UserSession, UserSession.id == ProviderSession.session_id)
            .join(User, User.id == UserSession.user_id)
            .where(ProviderSession.checked_at <= due)).all()
        for session_id, user in rows:
            recheck.recheck(session_id, user)
        return len(rows)
