"""Schema upgrades with Alembic, on the app's own engine."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

_SCRIPTS = str(Path(__file__).parent / "migrations")


class Refused(Exception):
    """A migration that will not run over what the database holds; says what to do."""


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", _SCRIPTS)
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    with engine.begin() as connection:
        config = _config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(engine: Engine, revision: str) -> None:
    with engine.begin() as connection:
        config = _config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    return ScriptDirectory.from_config(_config()).get_current_head()


def autogenerate(engine: Engine, message: str) -> None:
    """Write a new revision from the difference between the models and the database."""
    with engine.begin() as connection:
        config = _config()
        config.attributes["connection"] = connection
        command.revision(config, message=message, autogenerate=True)
