"""The figures the status page's charts are drawn from, per UTC day: each one query whose
grouping the database does (the page reads them once a minute at most).

Times are kept as naive UTC, so ``date(...)`` is the UTC day on SQLite (text) and PostgreSQL
(a date) alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import col

from thirdshift.run_states import RunKind, RunState
from thirdshift.store.base import StoreBase
from thirdshift.store.figures import run_outcome
from thirdshift.store.tables import RepositoryRow, RunRow, SessionRow


@dataclass(frozen=True)
class DayCost:
    """What one repository's sessions started on one UTC day cost (priced ones only)."""

    day: date
    repository: str
    cost_usd: float


@dataclass(frozen=True)
class DayOutcome:
    """How many Runs ended on one UTC day with one outcome (a Run end for a Run that reached
    its goal, else its Run state)."""

    day: date
    outcome: str
    runs: int


@dataclass(frozen=True)
class LabelToReady:
    """One Run that made its pull request ready: when, and how long after the Ready label."""

    ready_at: datetime
    seconds: float


@dataclass(frozen=True)
class PullSpend:
    """The Runs that ended on one UTC day making a pull request ready or merging it: what
    their sessions cost and how many pull requests they name."""

    day: date
    cost_usd: float
    pull_requests: int


_SUCCEEDED = col(RunRow.state) == RunState.SUCCEEDED
_READY_OR_MERGED = sa.and_(
    _SUCCEEDED,
    col(RunRow.kind).in_([RunKind.DELIVERY, RunKind.SPEC, RunKind.MERGE]),
    col(RunRow.pull_request_number).is_not(None),
)


def _day(value: Any) -> date:
    """A ``date(...)`` as the database hands it back."""
    return value if isinstance(value, date) else date.fromisoformat(str(value))


class ChartSeries(StoreBase):
    """What the status page's charts read."""

    def day_costs(self, since: datetime) -> tuple[DayCost, ...]:
        """Cost per UTC day and repository of the sessions started at or after ``since``."""
        day = sa.func.date(col(SessionRow.started_at)).label("day")
        query = (
            sa.select(
                day,
                col(RepositoryRow.owner),
                col(RepositoryRow.name),
                sa.func.sum(col(SessionRow.cost_usd)),
            )
            .join(RunRow, col(RunRow.id) == col(SessionRow.run_id))
            .join(RepositoryRow, col(RepositoryRow.id) == col(RunRow.repository_id))
            .where(col(SessionRow.started_at) >= since, col(SessionRow.cost_usd).is_not(None))
            .group_by(day, col(RepositoryRow.owner), col(RepositoryRow.name))
        )
        with self._session() as session:
            rows = session.execute(query).all()
        return tuple(
            DayCost(_day(when), f"{owner}/{name}", float(cost or 0.0))
            for when, owner, name, cost in rows
        )

    def day_outcomes(self, since: datetime) -> tuple[DayOutcome, ...]:
        """Runs ended at or after ``since`` per UTC day and outcome."""
        outcome = run_outcome.label("outcome")
        day = sa.func.date(col(RunRow.ended_at)).label("day")
        query = (
            sa.select(day, outcome, sa.func.count())
            .where(col(RunRow.ended_at) >= since)
            .group_by(day, outcome)
        )
        with self._session() as session:
            rows = session.execute(query).all()
        return tuple(DayOutcome(_day(when), str(end), int(runs)) for when, end, runs in rows)

    def labels_to_ready(self, since: datetime) -> tuple[LabelToReady, ...]:
        """Each Run ended at or after ``since`` that made its pull request ready and knows
        when its Ready label was added: when it ended, and how long after the label."""
        query = sa.select(col(RunRow.ready_labelled_at), col(RunRow.ended_at)).where(
            col(RunRow.ended_at) >= since,
            _READY_OR_MERGED,
            col(RunRow.ready_labelled_at).is_not(None),
        )
        with self._session() as session:
            rows = session.execute(query).all()
        return tuple(
            LabelToReady(ended, max((ended - labelled).total_seconds(), 0.0))
            for labelled, ended in rows
        )

    def pull_spend(self, since: datetime) -> tuple[PullSpend, ...]:
        """Per UTC day, the Runs ended at or after ``since`` that made a pull request ready or
        merged it: their sessions' cost and the pull requests they name."""
        day = sa.func.date(col(RunRow.ended_at)).label("day")
        # A pull request is counted once a day, however many of its Runs ended that day.
        per_pull = (
            sa.select(
                day,
                sa.func.coalesce(sa.func.sum(col(SessionRow.cost_usd)), 0.0).label("cost"),
            )
            .select_from(RunRow)
            .outerjoin(SessionRow, col(SessionRow.run_id) == col(RunRow.id))
            .where(col(RunRow.ended_at) >= since, _READY_OR_MERGED)
            .group_by(day, col(RunRow.repository_id), col(RunRow.pull_request_number))
            .subquery()
        )
        query = sa.select(per_pull.c.day, sa.func.sum(per_pull.c.cost), sa.func.count()).group_by(
            per_pull.c.day
        )
        with self._session() as session:
            rows = session.execute(query).all()
        return tuple(PullSpend(_day(when), float(cost or 0.0), int(n)) for when, cost, n in rows)
