"""Runs: recorded, changed, ended, found again; the heads they left their Issue branch at;
the one right to announce an end; and the dead ones the daemon rescues."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import aliased
from sqlmodel import col, select

from thirdshift.errors import StoreError
from thirdshift.records import Lease, Repository, Run
from thirdshift.run_states import RunKind, RunState
from thirdshift.store.base import RELEASED, StoreBase, check_run_columns, held_by
from thirdshift.store.rows import issue_key
from thirdshift.store.rows import repository_record as _repository
from thirdshift.store.rows import run_record as _run
from thirdshift.store.tables import ClaimRow, RepositoryRow, RunRow, SessionRow


class Runs(StoreBase):
    """The ``runs`` rows, but for what an Architect run keeps (``architect``)."""

    def start_run(self, repository: Repository, issue_number: int | None, **fields: Any) -> Run:
        """Record a new Run (``kind``, ``base_branch``, ``issue_branch``, ``harness``,
        ``model``; a Ticket Run's ``parent_run_id``; ``ready_labelled_at``, when the Ready label
        it answers was added) with no Lease."""
        started = self._start_run(repository, issue_number, None, **fields)
        assert started is not None
        return started

    def start_run_under(
        self, lease: Lease, repository: Repository, issue_number: int | None, **fields: Any
    ) -> Run | None:
        """Record a new Run and attach it to ``lease`` in one transaction, only while the
        Lease is still held: None (nothing recorded) when it was lost, so a Run paused past
        its Lease never leaves a record newer than its successor's."""
        return self._start_run(repository, issue_number, lease, **fields)

    def _start_run(
        self,
        repository: Repository,
        issue_number: int | None,
        lease: Lease | None,
        *,
        kind: RunKind = RunKind.DELIVERY,
        base_branch: str | None = None,
        issue_branch: str | None = None,
        harness: str | None = None,
        model: str | None = None,
        architect_result: str | None = None,
        text_sha256: str | None = None,
        parent_run_id: int | None = None,
        ready_labelled_at: datetime | None = None,
    ) -> Run | None:
        with self._session() as session:
            row = RunRow(
                text_sha256=text_sha256,
                parent_run_id=parent_run_id,
                ready_labelled_at=ready_labelled_at,
                architect_result=architect_result,
                # A result recorded with the Run is kept under the Lease it is attached to.
                architect_fencing_token=(
                    lease.fencing_token if lease is not None and architect_result else None
                ),
                repository_id=repository.id,
                issue_number=issue_key(issue_number),
                kind=kind,
                state=RunState.RUNNING,
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
                    .where(*held_by(lease), col(ClaimRow.expires_at) > now)
                    .values(run_id=row.id)
                )
                if not attached.rowcount:  # type: ignore[attr-defined]
                    session.rollback()
                    return None
            session.commit()
            return _run(row, repository)

    def update_run(self, run_id: int, **fields: Any) -> Run:
        """Set the named columns of a Run (state, head_sha, cause, ...). Unknown names raise."""
        check_run_columns(fields)
        with self._session() as session:
            row = session.get(RunRow, run_id)
            if row is None:
                raise StoreError(f"no run {run_id}")
            for key, value in fields.items():
                setattr(row, key, value)
            session.add(row)
            session.commit()
            return _run(row, self._repository(session, row.repository_id))

    def finish_run(self, run_id: int, state: RunState, **fields: Any) -> Run:
        return self.update_run(run_id, state=state, ended_at=self._clock.now(), **fields)

    def get_run(self, run_id: int) -> Run | None:
        with self._session() as session:
            row = session.get(RunRow, run_id)
            if row is None:
                return None
            return _run(row, self._repository(session, row.repository_id))

    def list_runs(
        self, *, limit: int = 50, state: RunState | None = None, repository: str | None = None
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

    def earlier_runs(self, run: Run, *, limit: int = 5) -> list[Run]:
        """The Runs on the same issue of the same repository before ``run``, newest first."""
        with self._session() as session:
            rows = session.exec(
                select(RunRow)
                .where(
                    RunRow.repository_id == run.repository.id,
                    RunRow.issue_number == issue_key(run.issue_number),
                    col(RunRow.id) < run.id,
                )
                .order_by(col(RunRow.id).desc())
                .limit(limit)
            ).all()
            return [_run(row, run.repository) for row in rows]

    def latest_run(self, repository: Repository, issue_number: int | None) -> Run | None:
        """The newest Run on the issue, or None."""
        with self._session() as session:
            row = session.exec(
                select(RunRow)
                .where(
                    RunRow.repository_id == repository.id,
                    RunRow.issue_number == issue_key(issue_number),
                )
                .order_by(col(RunRow.id).desc())
                .limit(1)
            ).first()
            return None if row is None else _run(row, repository)

    def record_branch_head(self, run_id: int, sha: str) -> None:
        """Keep ``sha`` as the head thirdshift itself last left the Run's Issue branch at."""
        with self._session() as session:
            session.execute(
                sa.update(RunRow).where(col(RunRow.id) == run_id).values(branch_head=sha)
            )
            session.commit()

    def recorded_heads(
        self, repository: Repository, issue_number: int | None, branch: str
    ) -> frozenset[str]:
        """Every head thirdshift recorded for ``branch`` of the issue: each Run's last head
        along the way and the head it ended at. Only these are adopted from a kept Worktree."""
        with self._session() as session:
            rows = session.execute(
                sa.select(col(RunRow.branch_head), col(RunRow.head_sha)).where(
                    col(RunRow.repository_id) == repository.id,
                    col(RunRow.issue_number) == issue_key(issue_number),
                    col(RunRow.issue_branch) == branch,
                )
            ).all()
            return frozenset(sha for row in rows for sha in row if sha)

    def claim_notice(self, run_id: int) -> bool:
        """Take the one right to announce the Run's end: True for the first call on an ended
        Run, False ever after (and while it still runs). One conditional statement, so two
        processes that both record the end cannot both announce it."""
        with self._session() as session:
            result = session.execute(
                sa.update(RunRow)
                .where(
                    col(RunRow.id) == run_id,
                    col(RunRow.state) != RunState.RUNNING,
                    col(RunRow.notified_at).is_(None),
                )
                .values(notified_at=self._clock.now())
            )
            session.commit()
            return bool(result.rowcount)  # type: ignore[attr-defined]

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
                    RunRow.state == RunState.RUNNING,
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
                .where(col(RunRow.id) == run_id, col(RunRow.state) == RunState.RUNNING)
                .values(state=RunState.CRASHED, cause=cause, ended_at=now)
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
