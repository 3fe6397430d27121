"""The repositories the store knows: found whatever the case of their name, as GitHub
finds them."""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import col, select

from thirdshift.records import Repository
from thirdshift.store.base import StoreBase, insert_for
from thirdshift.store.rows import repository_record as _repository
from thirdshift.store.tables import RepositoryRow


class Repositories(StoreBase):
    """The ``repositories`` rows."""

    def ensure_repository(self, owner: str, name: str) -> Repository:
        """The repository's record, created on first sight, found whatever the case of
        ``owner`` and ``name`` (as GitHub finds it). Safe under concurrent callers."""
        with self._session() as session:
            statement = insert_for(self.dialect, RepositoryRow).values(
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

    def repositories(self) -> list[Repository]:
        """Every repository the database knows, by name."""
        with self._session() as session:
            rows = session.exec(
                select(RepositoryRow).order_by(col(RepositoryRow.owner), col(RepositoryRow.name))
            ).all()
            return [_repository(row) for row in rows]
