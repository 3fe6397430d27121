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

from thirdshift.run_states import RunEnd
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
class DaySpend:
    """What the Runs that ended on one UTC day about one pull request (or about none) cost;
    ``pull_request`` (repository id, number) when one of them made it ready or merged it."""

    day: date
    pull_request: tuple[int, int] | None
    cost_usd: float


_MADE = run_outcome.in_([RunEnd.READY.value, RunEnd.MERGED.value])
"""A Run that made its pull request ready, or merged one."""


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
            run_outcome == RunEnd.READY.value,
            col(RunRow.ready_labelled_at).is_not(None),
        )
        with self._session() as session:
            rows = session.execute(query).all()
        return tuple(
            LabelToReady(ended, max((ended - labelled).total_seconds(), 0.0))
            for labelled, ended in rows
        )

    def day_spend(self, since: datetime) -> tuple[DaySpend, ...]:
        """Per UTC day and pull request (or none), what the Runs ended at or after ``since``
        cost, every Run counted (a failed one too, as ``thirdshift report`` counts it), and
        whether one of them made it ready or merged it."""
        day = sa.func.date(col(RunRow.ended_at)).label("day")
        made = sa.func.max(sa.case((_MADE, 1), else_=0))
        query = (
            sa.select(
                day,
                col(RunRow.repository_id),
                col(RunRow.pull_request_number),
                made,
                sa.func.coalesce(sa.func.sum(col(SessionRow.cost_usd)), 0.0),
            )
            .select_from(RunRow)
            .outerjoin(SessionRow, col(SessionRow.run_id) == col(RunRow.id))
            .where(col(RunRow.ended_at) >= since)
            .group_by(day, col(RunRow.repository_id), col(RunRow.pull_request_number))
        )
        with self._session() as session:
            rows = session.execute(query).all()
        return tuple(
            DaySpend(
                _day(when),
                (int(repository), int(pull)) if made and pull is not None else None,
                float(cost or 0.0),
            )
            for when, repository, pull, made, cost in rows
        )
