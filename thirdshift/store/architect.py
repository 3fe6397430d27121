"""What Architect runs keep: their checked result, under the repository's Lease (ADR 0022),
and when their plans and ideas were published."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import col, select

from thirdshift.records import KeptResult, Lease, Repository
from thirdshift.run_states import RunKind
from thirdshift.store.base import StoreBase, check_run_columns, held_by
from thirdshift.store.tables import ClaimRow, RunRow


class ArchitectResults(StoreBase):
    """The Architect columns of the ``runs`` rows."""

    def architect_result(self, run_id: int) -> str | None:
        """The result an Architect run kept (``thirdshift.runs.rules.plans.result_to_json``)."""
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
        check_run_columns(fields)
        with self._session() as session:
            now = self._lease_now(session)
            held = session.execute(
                sa.update(ClaimRow)
                .where(
                    *held_by(lease),
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
                    RunRow.kind == RunKind.ARCHITECT,
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
