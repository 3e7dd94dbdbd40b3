"""Schema migrations with alembic, run from the package (no alembic.ini to find): opening
a store upgrades it to the newest revision, in one transaction. Two processes opening a new
or old database at once (two CI jobs ingesting) take turns: the second finds it migrated."""

from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine

MIGRATIONS = Path(__file__).with_name("migrations")
# pg_advisory_xact_lock key of rtlab's migrations ("rtlabmig")
_PG_LOCK = 0x72746C61626D6967


def config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def head() -> str:
    return ScriptDirectory.from_config(config()).get_current_head() or ""


def known() -> set[str]:
    """Every revision this rtlab's migrations know."""
    return {script.revision for script in ScriptDirectory.from_config(config()).walk_revisions()}


def current(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine) -> None:
    if current(engine) == head():
        return
    _migrate(engine, command.upgrade, "head")


def downgrade(engine: Engine, revision: str) -> None:
    """Back to ``revision`` (a lab going back to an older rtlab), as an upgrade runs."""
    _migrate(engine, command.downgrade, revision)


def _migrate(engine: Engine, step: Callable[[Config, str], None], revision: str) -> None:
    cfg = config()
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            # alembic's batch mode rebuilds a SQLite table by dropping the old one, which
            # with foreign keys on deletes the rows that point at it (their cascade)
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        try:
            with connection.begin():
                _exclusive(connection)
                # alembic reads the revision again, now that no one else is migrating
                cfg.attributes["connection"] = connection
                step(cfg, revision)
        finally:
            if sqlite:
                connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                connection.commit()


def _exclusive(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK})")
    elif connection.dialect.name == "sqlite":
        # Python's sqlite3 starts no transaction for DDL by itself: without this the
        # tables would be created one by one, outside any transaction and any lock
        connection.exec_driver_sql("BEGIN IMMEDIATE")
