"""Activity: the lines the daemon and the commands leave for the status page and
``thirdshift activity``."""

from __future__ import annotations

from sqlmodel import col, select

from thirdshift.records import Activity, Repository
from thirdshift.store.base import StoreBase
from thirdshift.store.rows import activity_record as _activity
from thirdshift.store.tables import ActivityRow, RepositoryRow


class ActivityStore(StoreBase):
    """The ``activity`` rows."""

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
