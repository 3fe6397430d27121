"""A Run's sessions and their Session events."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sqlalchemy as sa
from sqlmodel import col, select

from thirdshift.errors import StoreError
from thirdshift.records import SessionEvent, SessionRecord, Usage
from thirdshift.store.base import StoreBase
from thirdshift.store.rows import session_record as _session_record
from thirdshift.store.tables import SessionEventRow, SessionRow


class SessionStore(StoreBase):
    """The ``sessions`` and ``session_events`` rows."""

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

    def session_event_count(self, session_id: int) -> int:
        """How many Session events the session has recorded."""
        with self._session() as session:
            query = select(sa.func.count()).where(SessionEventRow.session_id == session_id)
            return int(session.exec(query).one())
