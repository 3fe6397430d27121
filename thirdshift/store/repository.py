"""The store: the one class that issues SQL, on SQLite (WAL) or PostgreSQL.

Callers get frozen records, never table rows, so nothing outside this module can lazily touch
the database. The schema is owned by the Alembic migrations in ``thirdshift/store/migrations``;
``Store.open`` brings a database up to date before handing it out.
"""

from __future__ import annotations

import fcntl
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from thirdshift.clock import Clock, SystemClock
from thirdshift.errors import StoreError
from thirdshift.records import (
    Activity,
    DatabaseRole,
    KeptResult,
    Lease,
    Repository,
    Run,
    SessionEvent,
    SessionHistory,
    SessionRecord,
    Usage,
    UsageTotal,
    add_usage,
)
from thirdshift.store.rows import activity_record as _activity
from thirdshift.store.rows import lease_record as _lease
from thirdshift.store.rows import repository_record as _repository
from thirdshift.store.rows import run_record as _run
from thirdshift.store.rows import session_record as _session_record
from thirdshift.store.tables import (
    ActivityRow,
    ClaimRow,
    RepositoryRow,
    ReviewFeedbackRow,
    RunRow,
    SessionEventRow,
    SessionRow,
)

MIGRATIONS = Path(__file__).with_name("migrations")


RELEASED = ""
"""The owner of a Lease given up: the row stays, so fencing tokens only ever go up."""
_LONG_AGO = datetime(1970, 1, 1, tzinfo=UTC)


# How long a PostgreSQL transaction may sit idle, and a statement wait for a lock, before the
# server gives up on it (see _engine): far above any write of ours, far below a Lease.
STALL_SECONDS = 30.0


def utcnow() -> datetime:
    return datetime.now(UTC)


def redact_url(url: str) -> str:
    """The URL with any password replaced, fit for an error message."""
    return re.sub(r"(://[^:/@]+):[^@/]*@", r"\1:***@", url)


class Store:
    """All persistence. Build one with ``Store.open(url)`` and ``close()`` it when done.
    Every time it writes comes from ``clock`` (the system's unless told otherwise)."""

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

    # -- opening -----------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        url: str,
        *,
        migrate: bool = True,
        clock: Clock | None = None,
        database_time: bool | None = None,
        stall_seconds: float = STALL_SECONDS,
    ) -> Store:
        """Connect to ``url`` and, unless told not to, upgrade the schema to the newest
        migration. SQLite gets WAL, foreign keys and a busy timeout on every connection.
        Without ``clock``, times come from the system and Lease expiry from the database
        server's clock (``database_time``, default: when no ``clock`` is given); a test passes a
        ``ManualClock`` to drive both. On PostgreSQL, ``stall_seconds`` bounds how long one
        process may sit in an open transaction and how long a statement waits for a lock."""
        try:
            engine = _engine(url, stall_seconds)
            if migrate:
                upgrade(engine)
        except SQLAlchemyError as exc:
            raise StoreError(
                f"cannot open the database {redact_url(url)}: {exc.__class__.__name__}: "
                f"{_first_line(exc)}; check THIRDSHIFT_DATABASE_URL and that the server runs"
            ) from exc
        return cls(engine, clock, database_time=database_time)

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def revision(self) -> str | None:
        """The Alembic revision the schema is at (``thirdshift doctor`` reports it), or None
        for a database no migration has touched."""
        with self._session() as session:
            found = session.connection().execute(sa.text("SELECT version_num FROM alembic_version"))
            return next((str(row[0]) for row in found), None)

    def role(self) -> DatabaseRole | None:
        """The PostgreSQL role this store connects as (``thirdshift doctor`` warns of a
        superuser), or None on SQLite, which has no roles."""
        if self.dialect != "postgresql":
            return None
        with self._session() as session:
            found = session.connection().execute(
                sa.text("SELECT rolname, rolsuper FROM pg_roles WHERE rolname = current_user")
            )
            name, superuser = found.one()
            return DatabaseRole(str(name), bool(superuser))

    def close(self) -> None:
        self._engine.dispose()

    @contextmanager
    def _session(self) -> Iterator[Session]:
        try:
            with Session(self._engine, expire_on_commit=False) as session:
                yield session
        except SQLAlchemyError as exc:
            raise StoreError(f"database error: {_first_line(exc)}") from exc

    # -- repositories ------------------------------------------------------------------------

    def ensure_repository(self, owner: str, name: str) -> Repository:
        """The repository's record, created on first sight, found whatever the case of
        ``owner`` and ``name`` (as GitHub finds it). Safe under concurrent callers."""
        with self._session() as session:
            statement = _insert(self.dialect, RepositoryRow).values(
                owner=owner, name=name, created_at=self._clock.now()
            )
            # Any uniqueness conflict (the exact spelling, or another case of it) means found.
            session.execute(statement.on_conflict_do_nothing())
            session.commit()
            row = session.exec(
                select(RepositoryRow).where(
                    sa.func.lower(RepositoryRow.owner) == owner.lower(),
                    sa.func.lower(RepositoryRow.name) == name.lower(),
                )
            ).one()
            return _repository(row)

    # -- runs --------------------------------------------------------------------------------

    def start_run(self, repository: Repository, issue_number: int, **fields: Any) -> Run:
        """Record a new Run (``kind``, ``base_branch``, ``issue_branch``, ``harness``,
        ``model``) with no Lease."""
        started = self._start_run(repository, issue_number, None, **fields)
        assert started is not None
        return started

    def start_run_under(
        self, lease: Lease, repository: Repository, issue_number: int, **fields: Any
    ) -> Run | None:
        """Record a new Run and attach it to ``lease`` in one transaction, only while the
        Lease is still held: None (nothing recorded) when it was lost, so a Run paused past
        its Lease never leaves a record newer than its successor's."""
        return self._start_run(repository, issue_number, lease, **fields)

    def _start_run(
        self,
        repository: Repository,
        issue_number: int,
        lease: Lease | None,
        *,
        kind: str = "run",
        base_branch: str | None = None,
        issue_branch: str | None = None,
        harness: str | None = None,
        model: str | None = None,
        architect_result: str | None = None,
        text_sha256: str | None = None,
    ) -> Run | None:
        with self._session() as session:
            row = RunRow(
                text_sha256=text_sha256,
                architect_result=architect_result,
                # A result recorded with the Run is kept under the Lease it is attached to.
                architect_fencing_token=(
                    lease.fencing_token if lease is not None and architect_result else None
                ),
                repository_id=repository.id,
                issue_number=issue_number,
                kind=kind,
                state="running",
                base_branch=base_branch,
                issue_branch=issue_branch,
                harness=harness,
                model=model,
                started_at=self._clock.now(),
            )
            session.add(row)
            session.flush()
            if lease is not None:
                now = self._lease_now(session)
                attached = session.execute(
                    sa.update(ClaimRow)
                    .where(*_held_by(lease), col(ClaimRow.expires_at) > now)
                    .values(run_id=row.id)
                )
                if not attached.rowcount:  # type: ignore[attr-defined]
                    session.rollback()
                    return None
            session.commit()
            return _run(row, repository)

    def update_run(self, run_id: int, **fields: Any) -> Run:
        """Set the named columns of a Run (state, head_sha, cause, ...). Unknown names raise."""
        allowed = set(RunRow.model_fields) - {"id", "repository_id", "started_at"}
        unknown = set(fields) - allowed
        if unknown:
            raise StoreError(f"runs have no column(s) {', '.join(sorted(unknown))}")
        with self._session() as session:
            row = session.get(RunRow, run_id)
            if row is None:
                raise StoreError(f"no run {run_id}")
            for key, value in fields.items():
                setattr(row, key, value)
            session.add(row)
            session.commit()
            return _run(row, self._repository(session, row.repository_id))

    def finish_run(self, run_id: int, state: str, **fields: Any) -> Run:
        return self.update_run(run_id, state=state, ended_at=self._clock.now(), **fields)

    def get_run(self, run_id: int) -> Run | None:
        with self._session() as session:
            row = session.get(RunRow, run_id)
            if row is None:
                return None
            return _run(row, self._repository(session, row.repository_id))

    def list_runs(
        self, *, limit: int = 50, state: str | None = None, repository: str | None = None
    ) -> list[Run]:
        """The newest Runs first; only those in ``state`` and of ``repository`` (OWNER/NAME,
        whatever its case) when given."""
        with self._session() as session:
            query = select(RunRow).order_by(col(RunRow.id).desc()).limit(limit)
            if state is not None:
                query = query.where(RunRow.state == state)
            if repository is not None:
                owner, _, name = repository.partition("/")
                query = query.join(
                    RepositoryRow, col(RepositoryRow.id) == col(RunRow.repository_id)
                ).where(
                    sa.func.lower(RepositoryRow.owner) == owner.lower(),
                    sa.func.lower(RepositoryRow.name) == name.lower(),
                )
            rows = session.exec(query).all()
            repositories = {
                r.id: _repository(r)
                for r in session.exec(
                    select(RepositoryRow).where(
                        col(RepositoryRow.id).in_({row.repository_id for row in rows})
                    )
                )
            }
            return [_run(row, repositories[row.repository_id]) for row in rows]

    # -- sessions and their events -----------------------------------------------------------

    def start_session(
        self,
        run_id: int,
        kind: str,
        *,
        harness: str,
        log_path: str,
        prompt: str,
        model: str | None = None,
        harness_session_id: str | None = None,
        resumed_from_id: int | None = None,
    ) -> SessionRecord:
        with self._session() as session:
            row = SessionRow(
                run_id=run_id,
                kind=kind,
                harness=harness,
                model=model,
                harness_session_id=harness_session_id,
                resumed_from_id=resumed_from_id,
                log_path=log_path,
                prompt=prompt,
                state="running",
                started_at=self._clock.now(),
            )
            session.add(row)
            session.commit()
            return _session_record(row)

    def end_session(
        self,
        session_id: int,
        *,
        state: str,
        harness_session_id: str | None = None,
        final_message: str | None = None,
        killed_work: Sequence[str] = (),
        error: str | None = None,
        usage: Usage | None = None,
    ) -> SessionRecord:
        """Record how a session ended and, with ``usage``, its line of the usage ledger (a
        failed session's too: what it spent counts against the budgets)."""
        with self._session() as session:
            row = session.get(SessionRow, session_id)
            if row is None:
                raise StoreError(f"no session {session_id}")
            row.state = state
            row.ended_at = self._clock.now()
            row.final_message = final_message
            row.killed_work = "\n".join(killed_work) or None
            row.error = error
            if harness_session_id is not None:
                row.harness_session_id = harness_session_id
            if usage is not None:
                row.model = usage.model or row.model
                row.cli_version = usage.cli_version
                row.turns = usage.turns
                row.input_tokens = usage.input_tokens
                row.cached_input_tokens = usage.cached_input_tokens
                row.cache_write_tokens = usage.cache_write_tokens
                row.output_tokens = usage.output_tokens
                row.cost_usd = usage.cost_usd
                row.cost_source = usage.cost_source
            session.add(row)
            session.commit()
            return _session_record(row)

    def run_cost(self, run_id: int) -> float:
        """What the Run's ended sessions cost, in USD (sessions without a cost figure add 0)."""
        with self._session() as session:
            total = session.exec(
                select(sa.func.coalesce(sa.func.sum(SessionRow.cost_usd), 0.0)).where(
                    SessionRow.run_id == run_id
                )
            ).one()
        return float(total or 0.0)

    def repository_cost(self, owner: str, name: str, since: datetime, until: datetime) -> float:
        """What the sessions of one repository's Runs that started in [since, until) cost."""
        with self._session() as session:
            total = session.exec(
                select(sa.func.coalesce(sa.func.sum(SessionRow.cost_usd), 0.0))
                .join(RunRow, col(RunRow.id) == col(SessionRow.run_id))
                .join(RepositoryRow, col(RepositoryRow.id) == col(RunRow.repository_id))
                .where(
                    sa.func.lower(RepositoryRow.owner) == owner.lower(),
                    sa.func.lower(RepositoryRow.name) == name.lower(),
                    col(SessionRow.started_at) >= since,
                    col(SessionRow.started_at) < until,
                )
            ).one()
        return float(total or 0.0)

    def usage_ledger(
        self,
        by: str,
        *,
        since: datetime | None = None,
        repository: str | None = None,
        runs: Collection[int] | None = None,
    ) -> list[UsageTotal]:
        """The ledger's totals ``by`` ``run``, ``repository`` or ``day`` (UTC), newest first,
        over the sessions started at or after ``since``, of ``repository`` (OWNER/NAME) and of
        the Runs ``runs`` when given."""
        if by not in ("run", "repository", "day"):
            raise StoreError(f"the usage ledger has no totals by {by!r}")
        # Only the ledger's columns: prompts and final messages stay in the database.
        query = (
            sa.select(
                col(SessionRow.harness),
                col(SessionRow.model),
                col(SessionRow.cli_version),
                col(SessionRow.turns),
                col(SessionRow.input_tokens),
                col(SessionRow.cached_input_tokens),
                col(SessionRow.cache_write_tokens),
                col(SessionRow.output_tokens),
                col(SessionRow.cost_usd),
                col(SessionRow.cost_source),
                col(SessionRow.started_at),
                col(SessionRow.ended_at),
                col(RunRow.id),
                col(RunRow.issue_number),
                col(RepositoryRow.owner),
                col(RepositoryRow.name),
            )
            .join(RunRow, col(RunRow.id) == col(SessionRow.run_id))
            .join(RepositoryRow, col(RepositoryRow.id) == col(RunRow.repository_id))
            .order_by(col(SessionRow.id))
        )
        if since is not None:
            query = query.where(col(SessionRow.started_at) >= since)
        if repository is not None:
            owner, _, name = repository.partition("/")
            query = query.where(
                sa.func.lower(RepositoryRow.owner) == owner.lower(),
                sa.func.lower(RepositoryRow.name) == name.lower(),
            )
        if runs is not None:
            query = query.where(col(RunRow.id).in_(set(runs)))
        totals: dict[str, UsageTotal] = {}
        with self._session() as session:
            for row in session.execute(query).all():
                (harness, model, version, turns, fresh, cached, written, out, cost, source) = row[
                    :10
                ]
                started_at, ended_at, run_id, issue_number, repo_owner, repo_name = row[10:]
                place = f"{repo_owner}/{repo_name}"
                if by == "run":
                    key = f"{run_id}"
                    what = "Architect run" if issue_number == 0 else f"#{issue_number}"
                    label = f"Run {run_id} ({place}{' ' if issue_number == 0 else ''}{what})"
                elif by == "repository":
                    key = label = place
                else:
                    key = label = started_at.date().isoformat()
                usage = Usage(
                    turns=turns,
                    input_tokens=fresh,
                    cached_input_tokens=cached,
                    cache_write_tokens=written,
                    output_tokens=out,
                    cost_usd=cost,
                    cost_source=source,
                    model=model,
                    cli_version=version,
                )
                totals[key] = add_usage(
                    totals.get(key), key, label, harness, usage, started_at, ended_at
                )
        return sorted(totals.values(), key=lambda total: total.first_started, reverse=True)

    def run_sessions(self, run_id: int) -> list[SessionRecord]:
        """The Run's sessions, oldest first."""
        with self._session() as session:
            rows = session.exec(
                select(SessionRow).where(SessionRow.run_id == run_id).order_by(col(SessionRow.id))
            ).all()
            return [_session_record(row) for row in rows]

    def add_session_events(self, session_id: int, events: Iterable[SessionEvent]) -> None:
        """Append events; ``seq`` orders them within the session and must not repeat. The
        very event recorded already (same ``seq``, kind and summary) is left out: a write tried
        again after a commit whose answer was lost (the database went away meanwhile) records
        each event once."""
        now = self._clock.now()
        events = list(events)
        with self._session() as session:
            recorded = {
                row.seq: (row.kind, row.summary)
                for row in session.exec(
                    select(SessionEventRow).where(
                        SessionEventRow.session_id == session_id,
                        col(SessionEventRow.seq).in_([event.seq for event in events]),
                    )
                ).all()
            }
            for event in events:
                if recorded.get(event.seq, (event.kind, event.summary)) != (
                    event.kind,
                    event.summary,
                ):
                    raise StoreError(f"session {session_id} has an event {event.seq} already")
            session.add_all(
                SessionEventRow(
                    session_id=session_id,
                    seq=event.seq,
                    kind=event.kind,
                    tool=event.tool,
                    target=event.target,
                    exit_status=event.exit_status,
                    summary=event.summary,
                    created_at=event.created_at or now,
                )
                for event in events
                if event.seq not in recorded
            )
            session.commit()

    def session_events(self, session_id: int, *, last: int | None = None) -> list[SessionEvent]:
        """The session's events in order; with ``last``, only that many from the end."""
        with self._session() as session:
            query = select(SessionEventRow).where(SessionEventRow.session_id == session_id)
            if last is not None:
                query = query.order_by(col(SessionEventRow.seq).desc()).limit(last)
            rows = sorted(session.exec(query).all(), key=lambda row: row.seq)
            return [
                SessionEvent(
                    seq=row.seq,
                    kind=row.kind,
                    summary=row.summary,
                    tool=row.tool,
                    target=row.target,
                    exit_status=row.exit_status,
                    created_at=row.created_at,
                )
                for row in rows
            ]

    # -- Leases ------------------------------------------------------------------------------

    def session_event_count(self, session_id: int) -> int:
        """How many Session events the session has recorded."""
        with self._session() as session:
            query = select(sa.func.count()).where(SessionEventRow.session_id == session_id)
            return int(session.exec(query).one())

    def issue_history(
        self, run: Run, *, last_events: int, sessions: int = 5
    ) -> list[SessionHistory]:
        """The last ``sessions`` sessions on ``run``'s issue, oldest first, as a preamble takes
        them: ``run``'s own ended sessions, then those of the Runs before it on the issue. Each
        carries its brief, final message, newest ``last_events`` step summaries and step count;
        the last session of an earlier Run carries how that Run ended."""
        found: list[SessionHistory] = []
        for earlier in [run, *self.earlier_runs(run, limit=sessions)]:
            rows = self.run_sessions(earlier.id)
            if earlier.id == run.id:
                rows = [row for row in rows if row.state == "ended"]
            for position, row in enumerate(reversed(rows)):
                last_of_earlier = earlier.id != run.id and position == 0
                found.append(
                    SessionHistory(
                        kind=row.kind,
                        final_message=row.final_message,
                        steps=tuple(
                            event.summary for event in self.session_events(row.id, last=last_events)
                        ),
                        run_id=earlier.id,
                        prompt=row.prompt,
                        step_count=self.session_event_count(row.id),
                        run_outcome=_outcome_of(earlier) if last_of_earlier else None,
                        pull_request=earlier.pull_request_number if last_of_earlier else None,
                        head=earlier.head_sha if last_of_earlier else None,
                    )
                )
                if len(found) == sessions:
                    return found[::-1]
        return found[::-1]

    def acquire_lease(
        self,
        repository: Repository,
        issue_number: int,
        owner: str,
        ttl: timedelta,
        *,
        now: datetime | None = None,
    ) -> Lease | None:
        """Take the issue's Lease for ``owner`` in one conditional statement: granted when no
        Lease exists, when the existing one has expired (the fencing token goes up), or when
        ``owner`` already holds it (extended, same token). None when someone else holds it."""
        table = ClaimRow.__table__  # type: ignore[attr-defined]

        def statement(now: datetime) -> Any:
            insert = _insert(self.dialect, ClaimRow).values(
                repository_id=repository.id,
                issue_number=issue_number,
                owner=owner,
                fencing_token=1,
                acquired_at=now,
                expires_at=now + ttl,
            )
            same_owner = table.c.owner == insert.excluded.owner
            return insert.on_conflict_do_update(
                index_elements=["repository_id", "issue_number"],
                set_={
                    "owner": insert.excluded.owner,
                    "expires_at": insert.excluded.expires_at,
                    "run_id": sa.case((same_owner, table.c.run_id), else_=None),
                    "acquired_at": sa.case(
                        (same_owner, table.c.acquired_at), else_=insert.excluded.acquired_at
                    ),
                    "fencing_token": sa.case(
                        (same_owner, table.c.fencing_token), else_=table.c.fencing_token + 1
                    ),
                },
                where=sa.or_(
                    table.c.expires_at <= sa.bindparam("now_", now, type_=table.c.expires_at.type),
                    same_owner,
                ),
            ).returning(*table.c)

        with self._session() as session:
            row = session.execute(statement(now or self._lease_now(session))).mappings().first()
            session.commit()
            return None if row is None else _lease(row)

    def renew_lease(
        self, lease: Lease, ttl: timedelta, *, now: datetime | None = None
    ) -> Lease | None:
        """Extend a Lease still held under the same fencing token and not expired; None when
        it was lost."""
        with self._session() as session:
            now = now or self._lease_now(session)
            result = session.execute(
                sa.update(ClaimRow)
                .where(*_held_by(lease), col(ClaimRow.expires_at) > now)
                .values(expires_at=now + ttl)
                .returning(*ClaimRow.__table__.c)  # type: ignore[attr-defined]
            )
            row = result.mappings().first()
            session.commit()
            return None if row is None else _lease(row)

    def attach_run_to_lease(self, lease: Lease, run_id: int) -> bool:
        with self._session() as session:
            result = session.execute(
                sa.update(ClaimRow).where(*_held_by(lease)).values(run_id=run_id)
            )
            session.commit()
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def release_lease(self, lease: Lease) -> bool:
        """Give the Lease up; False when it had already passed to someone else (matched on
        owner and fencing token). The row stays, empty and expired, so the next acquire goes
        on from this fencing token and never hands out one a late holder may still carry."""
        with self._session() as session:
            result = session.execute(
                sa.update(ClaimRow)
                .where(*_held_by(lease))
                .values(owner=RELEASED, run_id=None, expires_at=_LONG_AGO)
            )
            session.commit()
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def lease_held(self, lease: Lease, *, now: datetime | None = None) -> bool:
        """Whether ``lease`` is still its holder's: same owner and fencing token, not expired."""
        with self._session() as session:
            now = now or self._lease_now(session)
            row = session.exec(
                select(ClaimRow).where(*_held_by(lease), col(ClaimRow.expires_at) > now)
            ).first()
            return row is not None

    def holds_lease(self, run: Run) -> bool:
        """Whether ``run`` holds its issue's Lease now (a Run that died stops renewing it)."""
        lease = self.lease_of(run.repository, run.issue_number)
        return lease is not None and lease.run_id == run.id and self.lease_held(lease)

    def lease_of(self, repository: Repository, issue_number: int) -> Lease | None:
        with self._session() as session:
            row = session.exec(
                select(ClaimRow).where(
                    ClaimRow.repository_id == repository.id,
                    ClaimRow.issue_number == issue_number,
                    ClaimRow.owner != RELEASED,
                )
            ).first()
            return None if row is None else _lease(row.model_dump())

    def unrecorded_claim(
        self, repository: Repository, issue_number: int, *, now: datetime | None = None
    ) -> Lease | None:
        """The issue's Lease when its holder died between taking it and recording a Run (never
        released, run out, no Run attached): its Claim on GitHub may be half made."""
        with self._session() as session:
            now = now or self._lease_now(session)
            row = session.exec(
                select(ClaimRow).where(
                    ClaimRow.repository_id == repository.id,
                    ClaimRow.issue_number == issue_number,
                    ClaimRow.owner != RELEASED,
                    col(ClaimRow.run_id).is_(None),
                    col(ClaimRow.expires_at) <= now,
                )
            ).first()
            return None if row is None else _lease(row.model_dump())

    def earlier_runs(self, run: Run, *, limit: int = 5) -> list[Run]:
        """The Runs on the same issue of the same repository before ``run``, newest first."""
        with self._session() as session:
            rows = session.exec(
                select(RunRow)
                .where(
                    RunRow.repository_id == run.repository.id,
                    RunRow.issue_number == run.issue_number,
                    col(RunRow.id) < run.id,
                )
                .order_by(col(RunRow.id).desc())
                .limit(limit)
            ).all()
            return [_run(row, run.repository) for row in rows]

    def record_branch_head(self, run_id: int, sha: str) -> None:
        """Keep ``sha`` as the head thirdshift itself last left the Run's Issue branch at."""
        with self._session() as session:
            session.execute(
                sa.update(RunRow).where(col(RunRow.id) == run_id).values(branch_head=sha)
            )
            session.commit()

    def recorded_heads(
        self, repository: Repository, issue_number: int, branch: str
    ) -> frozenset[str]:
        """Every head thirdshift recorded for ``branch`` of the issue: each Run's last head
        along the way and the head it ended at. Only these are adopted from a kept Worktree."""
        with self._session() as session:
            rows = session.execute(
                sa.select(col(RunRow.branch_head), col(RunRow.head_sha)).where(
                    col(RunRow.repository_id) == repository.id,
                    col(RunRow.issue_number) == issue_number,
                    col(RunRow.issue_branch) == branch,
                )
            ).all()
            return frozenset(sha for row in rows for sha in row if sha)

    def latest_run(self, repository: Repository, issue_number: int) -> Run | None:
        """The newest Run on the issue, or None."""
        with self._session() as session:
            row = session.exec(
                select(RunRow)
                .where(RunRow.repository_id == repository.id, RunRow.issue_number == issue_number)
                .order_by(col(RunRow.id).desc())
                .limit(1)
            ).first()
            return None if row is None else _run(row, repository)

    # -- the daemon's view ---------------------------------------------------------------------

    def dead_runs(self, repository: Repository, *, now: datetime | None = None) -> list[Run]:
        """Runs still recorded ``running`` whose Claim is gone: the issue's Lease expired or
        was given up, or a later Run holds it. Their process died (or is paused past its
        Lease, and will find that out at its next write). A Run between taking its Lease and
        attaching itself to it still has a live Lease, so it is never among them."""
        with self._session() as session:
            now = now or self._lease_now(session)
            claim = aliased(ClaimRow)
            rows = session.exec(
                select(RunRow)
                .outerjoin(
                    claim,
                    sa.and_(
                        col(claim.repository_id) == RunRow.repository_id,
                        col(claim.issue_number) == RunRow.issue_number,
                    ),
                )
                .where(
                    RunRow.repository_id == repository.id,
                    RunRow.state == "running",
                    sa.or_(
                        col(claim.id).is_(None),
                        col(claim.expires_at) <= now,
                        col(claim.owner) == RELEASED,
                        sa.and_(col(claim.run_id).is_not(None), col(claim.run_id) != RunRow.id),
                    ),
                )
                .order_by(col(RunRow.id))
            ).all()
            return [_run(row, repository) for row in rows]

    def record_crash(self, run_id: int, cause: str) -> bool:
        """End a dead Run as ``crashed`` unless it recorded an ending meanwhile (only a Run
        still ``running`` changes), and with it its sessions still ``running`` (as ``failed``,
        saying so): nothing is left running for a Rescue to take for live. True when this call
        ended it."""
        with self._session() as session:
            now = self._clock.now()
            result = session.execute(
                sa.update(RunRow)
                .where(col(RunRow.id) == run_id, col(RunRow.state) == "running")
                .values(state="crashed", cause=cause, ended_at=now)
            )
            ended = bool(result.rowcount)  # type: ignore[attr-defined]
            if ended:
                session.execute(
                    sa.update(SessionRow)
                    .where(col(SessionRow.run_id) == run_id, col(SessionRow.state) == "running")
                    .values(
                        state="failed",
                        ended_at=now,
                        error="its Run crashed before the session's end was recorded",
                    )
                )
            session.commit()
            return ended

    def repositories(self) -> list[Repository]:
        """Every repository the database knows, by name."""
        with self._session() as session:
            rows = session.exec(
                select(RepositoryRow).order_by(col(RepositoryRow.owner), col(RepositoryRow.name))
            ).all()
            return [_repository(row) for row in rows]

    # -- review feedback -------------------------------------------------------------------

    def handled_feedback(self, repository: Repository, pull_number: int) -> frozenset[str]:
        """The keys of the pull request's review feedback that Runs took already."""
        with self._session() as session:
            keys = session.exec(
                select(ReviewFeedbackRow.key).where(
                    ReviewFeedbackRow.repository_id == repository.id,
                    ReviewFeedbackRow.pull_number == pull_number,
                )
            ).all()
            return frozenset(keys)

    def take_feedback(
        self,
        repository: Repository,
        pull_number: int,
        keys: Sequence[str],
        run_id: int,
        *,
        from_run: int | None = None,
    ) -> tuple[str, ...]:
        """Record ``keys`` as taken by Run ``run_id``; the ones this call recorded (a key taken
        before stays that Run's, but for ``from_run``'s: a Rescue takes over the feedback of
        the Run that crashed)."""
        taken: list[str] = []
        with self._session() as session:
            if from_run is not None and keys:
                moved = session.execute(
                    sa.update(ReviewFeedbackRow)
                    .where(
                        col(ReviewFeedbackRow.repository_id) == repository.id,
                        col(ReviewFeedbackRow.pull_number) == pull_number,
                        col(ReviewFeedbackRow.run_id) == from_run,
                        col(ReviewFeedbackRow.key).in_(list(keys)),
                    )
                    .values(run_id=run_id)
                    .returning(col(ReviewFeedbackRow.key))
                )
                taken.extend(str(row[0]) for row in moved)
            for key in keys:
                if key in taken:
                    continue
                statement = (
                    _insert(self.dialect, ReviewFeedbackRow)
                    .values(
                        repository_id=repository.id,
                        pull_number=pull_number,
                        key=key,
                        run_id=run_id,
                        handled_at=self._clock.now(),
                    )
                    .on_conflict_do_nothing(index_elements=["repository_id", "pull_number", "key"])
                    .returning(col(ReviewFeedbackRow.key))
                )
                if session.execute(statement).first() is not None:
                    taken.append(key)
            session.commit()
        return tuple(taken)

    def feedback_of_run(self, run_id: int) -> frozenset[str]:
        """The review feedback Run ``run_id`` took."""
        with self._session() as session:
            keys = session.exec(
                select(ReviewFeedbackRow.key).where(ReviewFeedbackRow.run_id == run_id)
            ).all()
            return frozenset(keys)

    def review_repairs(self, repository: Repository, pull_number: int) -> int:
        """How many Runs took review feedback on the pull request (its review Repairs)."""
        with self._session() as session:
            count = session.exec(
                select(sa.func.count(sa.distinct(col(ReviewFeedbackRow.run_id)))).where(
                    ReviewFeedbackRow.repository_id == repository.id,
                    ReviewFeedbackRow.pull_number == pull_number,
                )
            ).one()
            return int(count or 0)

    # -- Architect runs --------------------------------------------------------------------

    def architect_result(self, run_id: int) -> str | None:
        """The result an Architect run kept (``thirdshift.runs.plans.result_to_json``)."""
        with self._session() as session:
            row = session.get(RunRow, run_id)
            return None if row is None else row.architect_result

    def kept_result(self, run_id: int) -> KeptResult | None:
        """The result an Architect run kept, with the fencing token it was kept under."""
        with self._session() as session:
            row = session.get(RunRow, run_id)
            if row is None or row.architect_result is None:
                return None
            return KeptResult(row.architect_result, row.architect_fencing_token)

    def keep_architect_result(self, lease: Lease, run_id: int, result: str, **fields: Any) -> bool:
        """Keep an Architect run's result (and set ``fields`` of its Run) only while ``lease``
        is held by that Run, with its fencing token; False (nothing written) when the Lease was
        lost. The claims row is touched first, in the same transaction, as ``start_run_under``
        does: a takeover waits for this write or this write sees the takeover."""
        allowed = set(RunRow.model_fields) - {"id", "repository_id", "started_at"}
        unknown = set(fields) - allowed
        if unknown:
            raise StoreError(f"runs have no column(s) {', '.join(sorted(unknown))}")
        with self._session() as session:
            now = self._lease_now(session)
            held = session.execute(
                sa.update(ClaimRow)
                .where(
                    *_held_by(lease),
                    col(ClaimRow.expires_at) > now,
                    col(ClaimRow.run_id) == run_id,
                )
                .values(run_id=run_id)
            )
            if not held.rowcount:  # type: ignore[attr-defined]
                session.rollback()
                return False
            session.execute(
                sa.update(RunRow)
                .where(col(RunRow.id) == run_id)
                .values(
                    architect_result=result,
                    architect_fencing_token=lease.fencing_token,
                    **fields,
                )
            )
            session.commit()
            return True

    def architect_publications(self, repository: Repository, since: datetime) -> list[datetime]:
        """When each plan or idea of the repository's Architect runs since ``since`` was
        first published, oldest first: the weekly cap counts these, whichever daemon or command
        ran them. A plan published in parts (a run that failed half way, the run that completed
        it) counts once, by its first issue and from its first part; one left half published
        counts too."""
        with self._session() as session:
            rows = session.exec(
                select(RunRow.started_at, RunRow.published)
                .where(
                    RunRow.repository_id == repository.id,
                    RunRow.kind == "architect",
                    col(RunRow.published).is_not(None),
                    RunRow.published != "",
                    # A plan is completed within days of its first part, never a month later.
                    col(RunRow.started_at) >= since - timedelta(days=30),
                )
                .order_by(col(RunRow.started_at))
            ).all()
        first_seen: dict[str, datetime] = {}
        for started_at, published in rows:
            first = (published or "").split()[0]
            when = started_at if started_at.tzinfo else started_at.replace(tzinfo=UTC)
            first_seen.setdefault(first, when)
        return sorted(when for when in first_seen.values() if when >= since)

    def claim_notice(self, run_id: int) -> bool:
        """Take the one right to announce the Run's end: True for the first call on an ended
        Run, False ever after (and while it still runs). One conditional statement, so two
        processes that both record the end cannot both announce it."""
        with self._session() as session:
            result = session.execute(
                sa.update(RunRow)
                .where(
                    col(RunRow.id) == run_id,
                    col(RunRow.state) != "running",
                    col(RunRow.notified_at).is_(None),
                )
                .values(notified_at=self._clock.now())
            )
            session.commit()
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def live_leases(self, repository: Repository, *, now: datetime | None = None) -> list[Lease]:
        """The repository's Leases held now."""
        with self._session() as session:
            now = now or self._lease_now(session)
            rows = session.exec(
                select(ClaimRow).where(
                    ClaimRow.repository_id == repository.id,
                    ClaimRow.owner != RELEASED,
                    col(ClaimRow.expires_at) > now,
                )
            ).all()
            return [_lease(row.model_dump()) for row in rows]

    def add_activity(
        self,
        kind: str,
        message: str,
        *,
        daemon: str,
        repository: Repository | None = None,
        issue_number: int | None = None,
        run_id: int | None = None,
    ) -> Activity:
        with self._session() as session:
            row = ActivityRow(
                repository_id=repository.id if repository else None,
                issue_number=issue_number,
                run_id=run_id,
                kind=kind,
                daemon=daemon,
                message=message,
                created_at=self._clock.now(),
            )
            session.add(row)
            session.commit()
            return _activity(row, repository.full_name if repository else None)

    def activity(
        self,
        *,
        limit: int = 100,
        repository: Repository | None = None,
        run_id: int | None = None,
    ) -> list[Activity]:
        """The newest Activity lines (of ``repository``, of the Run ``run_id``, when given),
        oldest of them first."""
        with self._session() as session:
            query = select(ActivityRow).order_by(col(ActivityRow.id).desc()).limit(limit)
            if repository is not None:
                query = query.where(ActivityRow.repository_id == repository.id)
            if run_id is not None:
                query = query.where(ActivityRow.run_id == run_id)
            rows = list(reversed(session.exec(query).all()))
            names = {
                r.id: f"{r.owner}/{r.name}"
                for r in session.exec(
                    select(RepositoryRow).where(
                        col(RepositoryRow.id).in_({row.repository_id for row in rows})
                    )
                )
            }
            return [
                _activity(row, names.get(row.repository_id) if row.repository_id else None)
                for row in rows
            ]

    # -- helpers -----------------------------------------------------------------------------

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


def _engine(url: str, stall_seconds: float = 0) -> Engine:
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


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest migration, under a lock: several processes opening one
    new database at once migrate it once (the others find it done)."""
    with _migration_lock(engine):
        command.upgrade(alembic_config(engine), "head")


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


def _held_by(lease: Lease) -> tuple[Any, ...]:
    """The claims row of ``lease`` while its holder still has it: same owner, same fencing
    token. Every write made under a Lease matches on both (ADR 0003)."""
    return (
        col(ClaimRow.repository_id) == lease.repository_id,
        col(ClaimRow.issue_number) == lease.issue_number,
        col(ClaimRow.owner) == lease.owner,
        col(ClaimRow.fencing_token) == lease.fencing_token,
    )


def _insert(dialect: str, table: Any) -> Any:
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise StoreError(f"unsupported database {dialect}; use SQLite or PostgreSQL")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return redact_url(text[0]) if text else exc.__class__.__name__


def _outcome_of(run: Run) -> str:
    """How a Run ended, for a preamble: ``ended failed: <cause>``, or that it stopped without
    recording an ending (its process died)."""
    if run.state in ("running", "crashed"):
        return "stopped without recording how it ended (its process died)"
    return f"ended {run.state}" + (f": {run.cause}" if run.cause else "")
