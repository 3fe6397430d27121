"""Review feedback: each comment or review taken once, by the next Run (ADR 0020)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlmodel import col, select

from thirdshift.records import Repository
from thirdshift.store.base import StoreBase, insert_for
from thirdshift.store.tables import ReviewFeedbackRow


class ReviewFeedback(StoreBase):
    """The ``review_feedback`` rows."""

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
                    insert_for(self.dialect, ReviewFeedbackRow)
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
