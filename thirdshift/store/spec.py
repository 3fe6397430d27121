"""Spec runs' records (adr/0032): a Spec run is a Run of kind ``spec`` whose ``issue_branch``
is its Spec branch, pinned at its Claim; each Ticket Run is a Merge run with the Spec run as
its parent and the Spec branch as its ``base_branch``; a Ticket landed once its Ticket Run
recorded the head it merged into the Spec branch (``landed_sha``). Why a Ticket Run failed is
its ``cause``."""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import col, select

from thirdshift.errors import StoreError
from thirdshift.records import Repository, Run
from thirdshift.run_states import RunKind, RunState
from thirdshift.store.base import StoreBase
from thirdshift.store.rows import run_record as _run
from thirdshift.store.tables import RunRow


class SpecRecords(StoreBase):
    """The Ticket Runs of Spec runs, and their landings in Spec branches."""

    def record_landing(self, run_id: int, merge_sha: str) -> Run:
        """Record that Ticket Run ``run_id`` landed its Ticket in the Spec branch, merging
        ``merge_sha`` (its pull request's head). Only a Ticket Run lands; a landing is never
        moved or taken back (a second call with another commit raises)."""
        with self._session() as session:
            row = session.get(RunRow, run_id)
            if row is None:
                raise StoreError(f"no run {run_id}")
            if row.parent_run_id is None:
                raise StoreError(f"run {run_id} is no Ticket Run: only a Ticket Run lands")
            if row.landed_sha is not None and row.landed_sha != merge_sha:
                raise StoreError(
                    f"run {run_id} already landed as {row.landed_sha}, not {merge_sha}"
                )
            if row.landed_sha is None:
                row.landed_sha, row.landed_at = merge_sha, self._clock.now()
                session.add(row)
                session.commit()
            return _run(row, self._repository(session, row.repository_id))

    def ticket_runs(self, spec_run_id: int) -> list[Run]:
        """The Ticket Runs of Spec run ``spec_run_id``, oldest first."""
        with self._session() as session:
            parent = session.get(RunRow, spec_run_id)
            if parent is None:
                return []
            repository = self._repository(session, parent.repository_id)
            rows = session.exec(
                select(RunRow).where(RunRow.parent_run_id == spec_run_id).order_by(col(RunRow.id))
            ).all()
            return [_run(row, repository) for row in rows]

    def landed_tickets(self, repository: Repository, spec_branch: str) -> dict[int, Run]:
        """Each Ticket landed in ``spec_branch`` by any Spec run (a Spec run run again
        continues where the last one stopped), by Ticket number: the Ticket Run that landed
        it (the first, should two ever have)."""
        with self._session() as session:
            rows = session.exec(
                select(RunRow)
                .where(
                    RunRow.repository_id == repository.id,
                    RunRow.base_branch == spec_branch,
                    col(RunRow.parent_run_id).is_not(None),
                    col(RunRow.landed_sha).is_not(None),
                )
                .order_by(col(RunRow.id).desc())
            ).all()
            return {row.issue_number: _run(row, repository) for row in rows}

    def spec_run_of(self, ticket_run_id: int) -> Run | None:
        """The Spec run a Ticket Run is part of (None for a Run that is no Ticket Run)."""
        with self._session() as session:
            parent = session.execute(
                sa.select(col(RunRow.parent_run_id)).where(col(RunRow.id) == ticket_run_id)
            ).scalar()
            if parent is None:
                return None
            row = session.get(RunRow, parent)
            return None if row is None else _run(row, self._repository(session, row.repository_id))

    def unlanded_ticket_runs(
        self, repository: Repository, spec_branch: str, *, besides: int | None = None
    ) -> list[Run]:
        """The Ticket Runs into ``spec_branch`` that recorded no landing though they may have
        merged: succeeded (a Merge run succeeds only merged), crashed, or still ``running``
        (dead or not), with a pull request; not those of Spec run ``besides`` (a Spec run
        records its own). A crash between GitHub's merge and the record leaves one, oldest
        first."""
        parent = col(RunRow.parent_run_id)
        with self._session() as session:
            rows = session.exec(
                select(RunRow)
                .where(
                    RunRow.repository_id == repository.id,
                    RunRow.base_branch == spec_branch,
                    parent.is_not(None) if besides is None else parent != besides,
                    col(RunRow.landed_sha).is_(None),
                    col(RunRow.pull_request_number).is_not(None),
                    col(RunRow.state).in_((RunState.SUCCEEDED, RunState.CRASHED, RunState.RUNNING)),
                )
                .order_by(col(RunRow.id))
            ).all()
            return [_run(row, repository) for row in rows]

    def held_specs(self, repository: Repository) -> list[Run]:
        """The Spec runs that hold their Spec now: each Spec whose newest Run is a Spec run
        still running, or crashed (its Rescue continues it). Their Tickets are theirs to run."""
        with self._session() as session:
            newest = (
                sa.select(sa.func.max(col(RunRow.id)))
                .where(col(RunRow.repository_id) == repository.id)
                .group_by(col(RunRow.issue_number))
            )
            rows = session.exec(
                select(RunRow)
                .where(
                    col(RunRow.id).in_(newest),
                    RunRow.kind == RunKind.SPEC,
                    col(RunRow.state).in_((RunState.RUNNING, RunState.CRASHED)),
                )
                .order_by(col(RunRow.issue_number))
            ).all()
            return [_run(row, repository) for row in rows]
