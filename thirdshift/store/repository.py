"""``Store``: the one face of the store, composed of one part per thing it keeps.

Callers get frozen records, never table rows, so nothing outside the store can lazily touch the
database. The schema is owned by the Alembic migrations in ``thirdshift/store/migrations``;
``Store.open`` brings a database up to date before handing it out.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.exc import SQLAlchemyError

from thirdshift.clock import Clock
from thirdshift.errors import StoreError
from thirdshift.records import DatabaseRole, Run, SessionHistory
from thirdshift.run_states import RunState
from thirdshift.store.activity import ActivityStore
from thirdshift.store.architect import ArchitectResults
from thirdshift.store.base import first_line, redact_url
from thirdshift.store.engine import STALL_SECONDS, make_engine, upgrade
from thirdshift.store.feedback import ReviewFeedback
from thirdshift.store.figures import ReportFigures
from thirdshift.store.leases import Leases
from thirdshift.store.ledger import UsageLedger
from thirdshift.store.repositories import Repositories
from thirdshift.store.runs import Runs
from thirdshift.store.series import ChartSeries
from thirdshift.store.sessions import SessionStore
from thirdshift.store.spec import SpecRecords


class Store(
    Repositories,
    Runs,
    SessionStore,
    UsageLedger,
    Leases,
    ActivityStore,
    ReviewFeedback,
    ArchitectResults,
    SpecRecords,
    ChartSeries,
    ReportFigures,
):
    """All persistence. Build one with ``Store.open(url)`` and ``close()`` it when done.
    Every time it writes comes from ``clock`` (the system's unless told otherwise).

    Each base holds the statements for one thing kept; what reads across them (an issue's
    session history, from its Runs and their sessions) is here."""

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
            engine = make_engine(url, stall_seconds)
            if migrate:
                upgrade(engine)
        except SQLAlchemyError as exc:
            raise StoreError(
                f"cannot open the database {redact_url(url)}: {exc.__class__.__name__}: "
                f"{first_line(exc)}; check THIRDSHIFT_DATABASE_URL and that the server runs"
            ) from exc
        return cls(engine, clock, database_time=database_time)

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


def _outcome_of(run: Run) -> str:
    """How a Run ended, for a preamble: ``ended failed: <cause>``, or that it stopped without
    recording an ending (its process died)."""
    if run.state in (RunState.RUNNING, RunState.CRASHED):
        return "stopped without recording how it ended (its process died)"
    return f"ended {run.state}" + (f": {run.cause}" if run.cause else "")
