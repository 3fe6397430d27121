"""Leases: taken, renewed and given up in one conditional statement each, matched on owner
and fencing token (ADR 0003)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import col, select

from thirdshift.records import Lease, Repository, Run
from thirdshift.store.base import RELEASED, StoreBase, held_by, insert_for
from thirdshift.store.rows import issue_key
from thirdshift.store.rows import lease_record as _lease
from thirdshift.store.tables import ClaimRow

_LONG_AGO = datetime(1970, 1, 1, tzinfo=UTC)


class Leases(StoreBase):
    """The ``claims`` rows."""

    def acquire_lease(
        self,
        repository: Repository,
        issue_number: int | None,
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
            insert = insert_for(self.dialect, ClaimRow).values(
                repository_id=repository.id,
                issue_number=issue_key(issue_number),
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
                .where(*held_by(lease), col(ClaimRow.expires_at) > now)
                .values(expires_at=now + ttl)
                .returning(*ClaimRow.__table__.c)  # type: ignore[attr-defined]
            )
            row = result.mappings().first()
            session.commit()
            return None if row is None else _lease(row)

    def attach_run_to_lease(self, lease: Lease, run_id: int) -> bool:
        with self._session() as session:
            result = session.execute(
                sa.update(ClaimRow).where(*held_by(lease)).values(run_id=run_id)
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
                .where(*held_by(lease))
                .values(owner=RELEASED, run_id=None, expires_at=_LONG_AGO)
            )
            session.commit()
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def lease_held(self, lease: Lease, *, now: datetime | None = None) -> bool:
        """Whether ``lease`` is still its holder's: same owner and fencing token, not expired."""
        with self._session() as session:
            now = now or self._lease_now(session)
            row = session.exec(
                select(ClaimRow).where(*held_by(lease), col(ClaimRow.expires_at) > now)
            ).first()
            return row is not None

    def holds_lease(self, run: Run) -> bool:
        """Whether ``run`` holds its issue's Lease now (a Run that died stops renewing it)."""
        lease = self.lease_of(run.repository, run.issue_number)
        return lease is not None and lease.run_id == run.id and self.lease_held(lease)

    def lease_of(self, repository: Repository, issue_number: int | None) -> Lease | None:
        with self._session() as session:
            row = session.exec(
                select(ClaimRow).where(
                    ClaimRow.repository_id == repository.id,
                    ClaimRow.issue_number == issue_key(issue_number),
                    ClaimRow.owner != RELEASED,
                )
            ).first()
            return None if row is None else _lease(row.model_dump())

    def unrecorded_claim(
        self, repository: Repository, issue_number: int | None, *, now: datetime | None = None
    ) -> Lease | None:
        """The issue's Lease when its holder died between taking it and recording a Run (never
        released, run out, no Run attached): its Claim on GitHub may be half made."""
        with self._session() as session:
            now = now or self._lease_now(session)
            row = session.exec(
                select(ClaimRow).where(
                    ClaimRow.repository_id == repository.id,
                    ClaimRow.issue_number == issue_key(issue_number),
                    ClaimRow.owner != RELEASED,
                    col(ClaimRow.run_id).is_(None),
                    col(ClaimRow.expires_at) <= now,
                )
            ).first()
            return None if row is None else _lease(row.model_dump())

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
