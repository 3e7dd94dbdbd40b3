"""The results store: every result record of every run, queryable for trends, reports and
threshold tuning. SQLite file by default; a PostgreSQL URL for a lab's shared database.

    store = open_store("sqlite:///results.db")   # or postgresql+psycopg://user@host/db
    with store.session() as session: ...

Opening a store brings its schema up to date (alembic), so every rtlab version reads every
older database.
"""

import os
import random
import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import attr
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from rtlab.store import migrate
from rtlab.store.ingest import IngestReport, Inputs, ingest, read_folder, read_inputs

DEFAULT_URL = "sqlite:///results.db"
URL_VARIABLE = "RTLAB_RESULTS_DB"
# how long a SQLite writer waits for another one's transaction (two CI jobs ingesting
# into one file); the driver's 5 s is shorter than a large ingest
SQLITE_TIMEOUT_S = 60
# an ingest that lost a race with another one for the same run or case is done again
INGEST_ATTEMPTS = 5


def default_url() -> str:
    """``RTLAB_RESULTS_DB`` (a lab's shared database; in CI a masked variable), else a
    ``results.db`` file in the current folder."""
    return os.environ.get(URL_VARIABLE) or DEFAULT_URL


@attr.frozen
class Store:
    engine: Engine
    sessions: sessionmaker[Session]

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose work is committed at the end of the block, or rolled back
        whole if the block raises."""
        with self.sessions() as session, session.begin():
            yield session

    def close(self) -> None:
        self.engine.dispose()


def open_store(url: str | None = None) -> Store:
    engine = connect(url)
    return Store(engine, sessionmaker(engine, expire_on_commit=False))


def connect(url: str | None = None, *, upgrade: bool = True) -> Engine:
    """The engine of the store at ``url`` (default: :func:`default_url`), its schema
    brought to the newest revision unless ``upgrade`` is false (a check that must not
    change the database)."""
    url = url or default_url()
    try:
        parsed = make_url(url)
    except ArgumentError as error:
        # the URL may hold a password: say what is wrong without repeating it
        scheme = url.split(":", 1)[0] if ":" in url else "(no scheme)"
        raise ValueError(f"results database URL (scheme {scheme!r}) is not a database URL "
                         "(e.g. sqlite:///results.db, postgresql+psycopg://user@host/db)"
                         ) from error
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    if parsed.get_backend_name() == "postgresql" and parsed.drivername == "postgresql":
        # psycopg 3 is the driver rtlab installs; a plain postgresql:// URL means it
        parsed = parsed.set(drivername="postgresql+psycopg")
    connect_args: dict[str, object] = {}
    if parsed.get_backend_name() == "sqlite" and "timeout" not in parsed.query:
        connect_args["timeout"] = SQLITE_TIMEOUT_S
    if parsed.get_backend_name() == "postgresql":
        # psycopg prepares a statement run five times, and the server then plans it once
        # for any parameters: a series' newest runs, read along its index in 2 ms with
        # its own values, took 100 ms as a generic plan (3 s per report at 100 000 runs)
        connect_args["prepare_threshold"] = None
    engine = create_engine(parsed, connect_args=connect_args)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    if upgrade:
        migrate.upgrade(engine)
    return engine


WAL_ATTEMPTS = 20


def _sqlite_pragmas(connection, _record) -> None:  # noqa: ANN001 - DB-API objects
    cursor = connection.cursor()
    # cascades need foreign keys on; WAL lets a report read while an ingest writes
    cursor.execute("PRAGMA foreign_keys=ON")
    # Switching a new file to WAL needs it to itself, and SQLite answers "database is
    # locked" at once, without its busy timeout, while another process does the same
    # (two ingests into a new file; seen in CI). WAL only helps readers: a connection
    # that cannot switch goes on in the file's current mode, and the next one switches.
    for attempt in range(WAL_ATTEMPTS):
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or attempt == WAL_ATTEMPTS - 1:
                if "locked" not in str(error):
                    raise
                break
            time.sleep(0.05 * (attempt + 1))
    cursor.close()


def ingest_folder(store: Store, folder: Path) -> IngestReport:
    """All records and JUnit files under ``folder`` in one transaction: all of them, or
    none."""
    return ingest_paths(store, [folder])


def ingest_paths(store: Store, paths: Sequence[Path]) -> IngestReport:
    """Records and JUnit files from folders and files, in one transaction. Everything is
    read and checked before the database is touched."""
    return ingest_inputs(store, read_inputs(paths))


def ingest_inputs(store: Store, inputs: Inputs) -> IngestReport:
    for attempt in range(1, INGEST_ATTEMPTS + 1):
        try:
            with store.session() as session:
                return ingest(session, inputs.records, inputs.junit)
        except DBAPIError as error:
            if attempt == INGEST_ATTEMPTS or not _lost_race(error):
                raise
            # another ingest added the same run or case after this one looked: done
            # again, this one finds them stored (the whole transaction, so that a
            # folder still goes in whole)
            time.sleep(random.uniform(0.05, 0.2) * attempt)
    raise AssertionError("unreachable")


def _lost_race(error: DBAPIError) -> bool:
    sqlstate = getattr(error.orig, "sqlstate", None)
    if sqlstate is not None:
        # unique_violation, serialization_failure, deadlock_detected
        return sqlstate in ("23505", "40001", "40P01")
    text = str(error.orig)
    if isinstance(error, IntegrityError):
        return "UNIQUE constraint failed" in text
    return isinstance(error, OperationalError) and "database is locked" in text


__all__ = ["DEFAULT_URL", "IngestReport", "Inputs", "Store", "default_url", "ingest",
           "ingest_folder", "ingest_inputs", "ingest_paths", "open_store", "read_folder",
           "read_inputs"]
