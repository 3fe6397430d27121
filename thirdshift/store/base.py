"""What every part of the store shares: its engine and clock, one database session at a time
(SQLAlchemy's errors become ``StoreError``), the time Leases are judged by, and the conditions
every write under a Lease matches on."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session, col

from thirdshift.clock import Clock, SystemClock
from thirdshift.errors import StoreError
from thirdshift.records import Lease, Repository
from thirdshift.store.rows import issue_key
from thirdshift.store.rows import repository_record as _repository
from thirdshift.store.tables import ClaimRow, RepositoryRow, RunRow

RELEASED = ""
"""The owner of a Lease given up: the row stays, so fencing tokens only ever go up."""


def utcnow() -> datetime:
    return datetime.now(UTC)


def redact_url(url: str) -> str:
    """The URL with any password replaced, fit for an error message."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


class StoreBase:
    """The engine, the clock and the session helpers each part of ``Store`` builds on."""

    def __init__(
        self, engine: Engine, clock: Clock | None = None, *, database_time: bool | None = None
    ) -> None:
        self._engine = engine
        self._clock: Clock = clock or SystemClock()
        # Lease expiry is judged by the database server's clock unless a test drives time:
        # daemons on several hosts share one PostgreSQL, and a host whose clock runs ahead must
        # not take over live Leases. (SQLite runs in this process: its clock is the machine's.)
        if database_time is None:
            database_time = clock is None
        self._database_time = database_time and engine.dialect.name == "postgresql"

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with Session(self._engine, expire_on_commit=False) as session:
                yield session
        except SQLAlchemyError as exc:
            raise StoreError(f"database error: {first_line(exc)}") from exc

    def _lease_now(self, session: Session) -> datetime:
        """The time Leases are judged by: the database server's, or this Store's clock."""
        if not self._database_time:
            return self._clock.now()
        value = session.execute(sa.text("SELECT timezone('UTC', clock_timestamp())")).scalar()
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC)

    @staticmethod
    def _repository(session: Session, repository_id: int) -> Repository:
        row = session.get(RepositoryRow, repository_id)
        if row is None:
            raise StoreError(f"no repository {repository_id}")
        return _repository(row)


def held_by(lease: Lease) -> tuple[Any, ...]:
    """The claims row of ``lease`` while its holder still has it: same owner, same fencing
    token. Every write made under a Lease matches on both (ADR 0003)."""
    return (
        col(ClaimRow.repository_id) == lease.repository_id,
        col(ClaimRow.issue_number) == issue_key(lease.issue_number),
        col(ClaimRow.owner) == lease.owner,
        col(ClaimRow.fencing_token) == lease.fencing_token,
    )


def insert_for(dialect: str, table: Any) -> Any:
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise StoreError(f"unsupported database {dialect}; use SQLite or PostgreSQL")


def check_run_columns(fields: Mapping[str, Any]) -> None:
    """Refuse a name that is no column of a Run a caller may set."""
    allowed = set(RunRow.model_fields) - {"id", "repository_id", "started_at"}
    unknown = set(fields) - allowed
    if unknown:
        raise StoreError(f"runs have no column(s) {', '.join(sorted(unknown))}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return redact_url(text[0]) if text else exc.__class__.__name__
