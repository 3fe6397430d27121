"""Opening a database: the engine for a URL (SQLite's pragmas, PostgreSQL's stall bounds) and
the Alembic migrations, applied under a lock."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")

# How long a PostgreSQL transaction may sit idle, and a statement wait for a lock, before the
# server gives up on it (see make_engine): far above any write of ours, far below a Lease.
STALL_SECONDS = 30.0


def make_engine(url: str, stall_seconds: float = 0) -> Engine:
    if url.startswith("sqlite"):
        database = url.split(":///", 1)[-1]
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        # The pool hands one connection to one thread at a time (a Lease is renewed from a
        # thread of its own), so sqlite3's same-thread check only gets in the way.
        engine = sa.create_engine(url, connect_args={"timeout": 30, "check_same_thread": False})

        @sa.event.listens_for(engine, "connect")
        def _pragmas(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        # psycopg 3 is the driver we ship; a bare postgresql:// URL means it.
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    engine = sa.create_engine(url, pool_pre_ping=True)
    if stall_seconds > 0:
        # A process paused (SIGSTOP, a frozen VM) between a write and its commit keeps its row
        # locks: every other daemon's write to that row (a Lease it is taking over) would wait
        # for it forever. The server ends a transaction left idle this long, and no statement
        # waits longer than this for a lock (it fails, and its poll or renewal tries again).
        stall_ms = max(1, round(stall_seconds * 1000))

        @sa.event.listens_for(engine, "connect")
        def _timeouts(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute(f"SET idle_in_transaction_session_timeout = {stall_ms}")
            cursor.execute(f"SET lock_timeout = {stall_ms}")
            cursor.close()
            connection.commit()

    return engine


SCHEMA_HEAD = "0012"
"""The newest migration's revision (a unit test holds it to Alembic's own head): a database
already there is opened without loading Alembic and every migration script, which would cost
each thirdshift process a fifth of a second of CPU."""


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config  # loaded only to migrate: see SCHEMA_HEAD

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest migration, under a lock: several processes opening one
    new database at once migrate it once (the others find it done)."""
    if _revision(engine) == SCHEMA_HEAD:
        return
    from alembic import command

    with _migration_lock(engine):
        command.upgrade(alembic_config(engine), "head")


def _revision(engine: Engine) -> str | None:
    """The revision the schema is at; None when it cannot be read (no migration has touched
    the database, or it cannot be reached: Alembic then meets the same and says why)."""
    try:
        with engine.connect() as connection:
            found = connection.execute(sa.text("SELECT version_num FROM alembic_version"))
            return next((str(row[0]) for row in found), None)
    except sa.exc.DBAPIError:
        return None


_MIGRATION_LOCK_KEY = 0x7468697264  # "third", for pg_advisory_lock


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[None]:
    """PostgreSQL: a session advisory lock. SQLite: an exclusive lock on a file beside the
    database (the database's own locks are released between statements)."""
    if engine.dialect.name == "postgresql":
        key = {"key": _MIGRATION_LOCK_KEY}
        # Outside any transaction, and waiting as long as another process's migration takes:
        # the stall bounds are for a Run's short writes, not for this lock.
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(sa.text("SET lock_timeout = 0"))
            connection.execute(sa.text("SELECT pg_advisory_lock(:key)"), key)
            try:
                yield
            finally:
                connection.execute(sa.text("SELECT pg_advisory_unlock(:key)"), key)
                connection.invalidate()  # its session settings are not the pool's
        return
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    with open(f"{database}.migrating", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
