"""The figures of ``thirdshift report``: the Runs started in a period, added up per repository
and per Harness by the database, one query each (never a loop over rows here).

Medians and 90th percentiles are computed in SQL too, the same on SQLite and PostgreSQL: a
window numbers each group's durations in order (``ROW_NUMBER``, ``COUNT`` over the group) and
the group keeps the one at the nearest rank. ``percentile_cont`` is PostgreSQL's alone, and
window functions (SQLite 3.25 and later) are what both share. Only the seconds between two
times are said differently (``julianday`` against ``EXTRACT(EPOCH ...)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlmodel import col

from thirdshift.figures import (
    FAILED_STATES,
    CauseCount,
    OutcomeCount,
    Period,
    PeriodFigures,
    RunSpend,
    Spread,
)
from thirdshift.run_states import RunEnd, RunKind, RunState
from thirdshift.store.base import StoreBase
from thirdshift.store.tables import RepositoryRow, RunRow, SessionRow

_SUCCEEDED = col(RunRow.state) == RunState.SUCCEEDED

run_outcome = sa.case(
    (sa.and_(_SUCCEEDED, col(RunRow.kind) == RunKind.MERGE), sa.literal(RunEnd.MERGED.value)),
    (
        sa.and_(
            _SUCCEEDED,
            col(RunRow.kind) == RunKind.ARCHITECT,
            sa.func.coalesce(col(RunRow.published), "") != "",
        ),
        sa.literal(RunEnd.PUBLISHED.value),
    ),
    (
        sa.and_(_SUCCEEDED, col(RunRow.kind) == RunKind.ARCHITECT),
        sa.literal(RunEnd.COVERED.value),
    ),
    (_SUCCEEDED, sa.literal(RunEnd.READY.value)),
    else_=col(RunRow.state),
)
"""A Run's outcome (``thirdshift.figures.OUTCOMES``) from its recorded kind and state."""

_REPAIR = sa.and_(
    sa.or_(col(SessionRow.kind).like("repair-%"), col(SessionRow.kind).like("review-%")),
    col(SessionRow.kind).not_like("%-resume"),
)
"""A Repair's session: a CI fix or conflict (``repair-<i>``) or review feedback
(``review-<i>``); its Resume is the same Repair, not another."""


class ReportFigures(StoreBase):
    """What ``thirdshift report`` reads: each figure one query, grouped by the database. Each
    groups the period's Runs by ``repository_id`` and Harness first and names the repositories
    of its few groups last, so the rows the database sorts stay narrow."""

    def period_figures(self, period: Period) -> PeriodFigures:
        """Every figure of the report over ``period``."""
        return PeriodFigures(
            period,
            outcomes=self.outcome_counts(period),
            causes=self.failure_causes(period),
            spend=self.run_spend(period),
            session_times=self.session_times(period),
            label_to_ready=self.label_to_ready(period),
        )

    def outcome_counts(self, period: Period) -> tuple[OutcomeCount, ...]:
        """The Runs by outcome, with the pull requests they name, per repository and Harness."""
        runs = self._runs(
            period,
            col(RunRow.harness),
            run_outcome.label("outcome"),
            col(RunRow.pull_request_number),
        ).subquery()
        grouped = sa.select(
            runs.c.repository_id,
            runs.c.harness,
            runs.c.outcome,
            sa.func.count().label("runs"),
            sa.func.count(sa.distinct(runs.c.pull_request_number)).label("pulls"),
        ).group_by(runs.c.repository_id, runs.c.harness, runs.c.outcome)
        return tuple(
            OutcomeCount(f"{owner}/{name}", harness, str(outcome), int(count), int(pulls))
            for owner, name, harness, outcome, count, pulls in self._named(grouped)
        )

    def failure_causes(self, period: Period) -> tuple[CauseCount, ...]:
        """The Failed runs by their recorded cause, most frequent first, per repository and
        Harness."""
        failed = (
            self._runs(period, col(RunRow.harness), col(RunRow.cause))
            .where(col(RunRow.state).in_(FAILED_STATES))
            .subquery()
        )
        grouped = sa.select(
            failed.c.repository_id, failed.c.harness, failed.c.cause, sa.func.count().label("runs")
        ).group_by(failed.c.repository_id, failed.c.harness, failed.c.cause)
        rows = self._named(grouped, lambda named: (named.c.runs.desc(), named.c.cause))
        return tuple(
            CauseCount(f"{owner}/{name}", harness, cause, int(runs))
            for owner, name, harness, cause, runs in rows
        )

    def run_spend(self, period: Period) -> tuple[RunSpend, ...]:
        """Runs, sessions, Repairs and cost per repository and Harness: each Run's sessions
        added up in a subquery, then its group's Runs."""
        unpriced = sa.and_(col(SessionRow.id).is_not(None), col(SessionRow.cost_usd).is_(None))
        per_run = (
            self._runs(
                period,
                col(RunRow.harness),
                sa.func.count(col(SessionRow.id)).label("sessions"),
                sa.func.sum(sa.case((_REPAIR, 1), else_=0)).label("repairs"),
                sa.func.coalesce(sa.func.sum(col(SessionRow.cost_usd)), 0.0).label("cost"),
                sa.func.sum(sa.case((unpriced, 1), else_=0)).label("unpriced"),
            )
            .outerjoin(SessionRow, col(SessionRow.run_id) == col(RunRow.id))
            .group_by(col(RunRow.id), col(RunRow.repository_id), col(RunRow.harness))
        ).subquery()
        grouped = sa.select(
            per_run.c.repository_id,
            per_run.c.harness,
            sa.func.count(),
            sa.func.sum(per_run.c.sessions),
            sa.func.sum(per_run.c.repairs),
            sa.func.sum(sa.case((per_run.c.repairs > 0, 1), else_=0)),
            sa.func.max(per_run.c.repairs),
            sa.func.sum(per_run.c.cost),
            sa.func.sum(per_run.c.unpriced),
        ).group_by(per_run.c.repository_id, per_run.c.harness)
        return tuple(_spend(*row) for row in self._named(grouped))

    def session_times(self, period: Period) -> tuple[Spread, ...]:
        """The median and p90 of the ended sessions' times, per repository and the Harness
        each session ran."""
        seconds = self._seconds(col(SessionRow.started_at), col(SessionRow.ended_at))
        ended = (
            self._runs(period, col(SessionRow.harness), seconds.label("seconds"))
            .join(SessionRow, col(SessionRow.run_id) == col(RunRow.id))
            .where(col(SessionRow.ended_at).is_not(None))
        )
        return self._spreads(ended, col(SessionRow.harness), seconds, known=None)

    def label_to_ready(self, period: Period) -> tuple[Spread, ...]:
        """The median and p90 of the time from the Ready label to the end of the Runs that
        ended ``ready``, per repository and Harness; a Run with no label time recorded is
        counted as unknown and left out of both."""
        seconds = self._seconds(col(RunRow.ready_labelled_at), col(RunRow.ended_at))
        ready = self._runs(period, col(RunRow.harness), seconds.label("seconds")).where(
            run_outcome == RunEnd.READY.value
        )
        known = col(RunRow.ready_labelled_at).is_not(None)
        return self._spreads(ready, col(RunRow.harness), seconds, known=known)

    def _runs(self, period: Period, *columns: Any) -> sa.Select[Any]:
        """The Runs of ``period``: their ``repository_id``, then ``columns``."""
        query = (
            sa.select(col(RunRow.repository_id).label("repository_id"), *columns)
            .select_from(RunRow)
            .where(col(RunRow.started_at) >= period.since)
        )
        if period.repository is not None:
            owner, _, name = period.repository.partition("/")
            named = sa.select(col(RepositoryRow.id)).where(
                sa.func.lower(col(RepositoryRow.owner)) == owner.lower(),
                sa.func.lower(col(RepositoryRow.name)) == name.lower(),
            )
            query = query.where(col(RunRow.repository_id).in_(named))
        return query

    def _named(
        self, grouped: sa.Select[Any], order: Callable[[Any], tuple[Any, ...]] | None = None
    ) -> list[tuple[Any, ...]]:
        """The rows of ``grouped`` (its ``repository_id``, then its other columns) with the
        repository's owner and name in place of its id, in ``order`` when given."""
        figures = grouped.subquery()
        query = sa.select(
            col(RepositoryRow.owner),
            col(RepositoryRow.name),
            *(column for column in figures.c if column.name != "repository_id"),
        ).join(RepositoryRow, col(RepositoryRow.id) == figures.c.repository_id)
        if order is not None:
            query = query.order_by(*order(figures))
        with self._session() as session:
            return [tuple(row) for row in session.execute(query)]

    def _spreads(
        self, timed: sa.Select[Any], harness: Any, seconds: Any, *, known: Any
    ) -> tuple[Spread, ...]:
        """Nearest-rank median and p90 of ``seconds`` per repository and ``harness`` over the
        rows of ``timed`` (which selects them as ``harness`` and ``seconds``) where ``known``
        holds (None: every row); the others are counted as unknown.

        A window numbers each group's rows, the known ones first and shortest first (``ORDER
        BY`` alone puts NULLs first on SQLite and last on PostgreSQL), another counts its rows
        and its known ones; only the rows at rank 1, the median's and the p90's are grouped."""
        flag = sa.literal(1) if known is None else sa.case((known, 1), else_=0)
        group = (col(RunRow.repository_id), harness)
        in_order = (seconds,) if known is None else (flag.desc(), seconds)
        numbered = timed.add_columns(
            sa.func.row_number().over(partition_by=group, order_by=in_order).label("place"),
            sa.func.sum(flag).over(partition_by=group).label("known_count"),
            sa.func.count().over(partition_by=group).label("total"),
        ).subquery()
        # ceil(known_count * p / 100), in integers: the same in both databases. With no known
        # row it is 0, a rank no row has.
        median = (numbered.c.known_count * 50 + 99) // 100
        p90 = (numbered.c.known_count * 90 + 99) // 100
        place, took = numbered.c.place, numbered.c.seconds
        grouped = (
            sa.select(
                numbered.c.repository_id,
                numbered.c.harness,
                sa.func.max(numbered.c.known_count),
                sa.func.max(numbered.c.total),
                sa.func.max(sa.case((place == median, took))),
                sa.func.max(sa.case((place == p90, took))),
            )
            .where(sa.or_(place == 1, place == median, place == p90))
            .group_by(numbered.c.repository_id, numbered.c.harness)
        )
        return tuple(
            Spread(
                f"{owner}/{name}",
                harness,
                known=int(known_rows),
                median_seconds=_rounded(middle),
                p90_seconds=_rounded(high),
                unknown=int(total) - int(known_rows),
            )
            for owner, name, harness, known_rows, total, middle, high in self._named(grouped)
        )

    def _seconds(self, start: Any, end: Any) -> Any:
        """The seconds from ``start`` to ``end``, as this database counts them."""
        if self.dialect == "postgresql":
            return sa.cast(sa.extract("epoch", end - start), sa.Float)
        return (sa.func.julianday(end) - sa.func.julianday(start)) * 86400.0


def _spend(
    owner: str, name: str, harness: str | None, runs: int, *sums: int | float | None
) -> RunSpend:
    """One row of ``run_spend``'s answer (SQLite sums nothing to None, PostgreSQL to numeric)."""
    sessions, repairs, repaired, most, cost, unpriced = (value or 0 for value in sums)
    return RunSpend(
        f"{owner}/{name}",
        harness,
        runs=int(runs),
        sessions=int(sessions),
        repairs=int(repairs),
        repaired_runs=int(repaired),
        most_repairs=int(most),
        cost_usd=float(cost),
        unpriced_sessions=int(unpriced),
    )


def _rounded(seconds: Any) -> float | None:
    """To the millisecond: SQLite's ``julianday`` leaves a few microseconds of noise."""
    return None if seconds is None else round(float(seconds), 3)
