"""The usage ledger: what sessions spent, added up for the budgets and ``thirdshift usage``
(ADR 0013)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

import sqlalchemy as sa
from sqlmodel import col, select

from thirdshift.errors import StoreError
from thirdshift.records import Usage, UsageTotal, add_usage
from thirdshift.store.base import StoreBase
from thirdshift.store.rows import NO_ISSUE
from thirdshift.store.tables import RepositoryRow, RunRow, SessionRow


class UsageLedger(StoreBase):
    """Sums over the ledger's columns of the ``sessions`` rows."""

    def run_cost(self, run_id: int) -> float:
        """What the Run's ended sessions cost, in USD (sessions without a cost figure add 0).
        A Spec run is one Run for its budget: asked of a Spec run or of any of its Ticket
        Runs, it is what the Spec run and all its Ticket Runs cost together."""
        with self._session() as session:
            parent = session.execute(
                sa.select(col(RunRow.parent_run_id)).where(col(RunRow.id) == run_id)
            ).scalar()
            root = run_id if parent is None else parent
            family = sa.select(col(RunRow.id)).where(
                sa.or_(col(RunRow.id) == root, col(RunRow.parent_run_id) == root)
            )
            total = session.exec(
                select(sa.func.coalesce(sa.func.sum(SessionRow.cost_usd), 0.0)).where(
                    col(SessionRow.run_id).in_(family)
                )
            ).one()
        return float(total or 0.0)

    def repository_cost(self, owner: str, name: str, since: datetime, until: datetime) -> float:
        """What the sessions of one repository's Runs that started in [since, until) cost."""
        with self._session() as session:
            total = session.exec(
                select(sa.func.coalesce(sa.func.sum(SessionRow.cost_usd), 0.0))
                .join(RunRow, col(RunRow.id) == col(SessionRow.run_id))
                .join(RepositoryRow, col(RepositoryRow.id) == col(RunRow.repository_id))
                .where(
                    sa.func.lower(RepositoryRow.owner) == owner.lower(),
                    sa.func.lower(RepositoryRow.name) == name.lower(),
                    col(SessionRow.started_at) >= since,
                    col(SessionRow.started_at) < until,
                )
            ).one()
        return float(total or 0.0)

    def usage_ledger(
        self,
        by: str,
        *,
        since: datetime | None = None,
        repository: str | None = None,
        runs: Collection[int] | None = None,
    ) -> list[UsageTotal]:
        """The ledger's totals ``by`` ``run``, ``repository`` or ``day`` (UTC), newest first,
        over the sessions started at or after ``since``, of ``repository`` (OWNER/NAME) and of
        the Runs ``runs`` when given."""
        if by not in ("run", "repository", "day"):
            raise StoreError(f"the usage ledger has no totals by {by!r}")
        # Only the ledger's columns: prompts and final messages stay in the database.
        query = (
            sa.select(
                col(SessionRow.harness),
                col(SessionRow.model),
                col(SessionRow.cli_version),
                col(SessionRow.turns),
                col(SessionRow.input_tokens),
                col(SessionRow.cached_input_tokens),
                col(SessionRow.cache_write_tokens),
                col(SessionRow.output_tokens),
                col(SessionRow.cost_usd),
                col(SessionRow.cost_source),
                col(SessionRow.started_at),
                col(SessionRow.ended_at),
                col(RunRow.id),
                col(RunRow.issue_number),
                col(RepositoryRow.owner),
                col(RepositoryRow.name),
            )
            .join(RunRow, col(RunRow.id) == col(SessionRow.run_id))
            .join(RepositoryRow, col(RepositoryRow.id) == col(RunRow.repository_id))
            .order_by(col(SessionRow.id))
        )
        if since is not None:
            query = query.where(col(SessionRow.started_at) >= since)
        if repository is not None:
            owner, _, name = repository.partition("/")
            query = query.where(
                sa.func.lower(RepositoryRow.owner) == owner.lower(),
                sa.func.lower(RepositoryRow.name) == name.lower(),
            )
        if runs is not None:
            query = query.where(col(RunRow.id).in_(set(runs)))
        totals: dict[str, UsageTotal] = {}
        with self._session() as session:
            for row in session.execute(query).all():
                (harness, model, version, turns, fresh, cached, written, out, cost, source) = row[
                    :10
                ]
                started_at, ended_at, run_id, issue_number, repo_owner, repo_name = row[10:]
                place = f"{repo_owner}/{repo_name}"
                if by == "run":
                    key = f"{run_id}"
                    what = "Architect run" if issue_number == NO_ISSUE else f"#{issue_number}"
                    label = f"Run {run_id} ({place}{' ' if issue_number == NO_ISSUE else ''}{what})"
                elif by == "repository":
                    key = label = place
                else:
                    key = label = started_at.date().isoformat()
                usage = Usage(
                    turns=turns,
                    input_tokens=fresh,
                    cached_input_tokens=cached,
                    cache_write_tokens=written,
                    output_tokens=out,
                    cost_usd=cost,
                    cost_source=source,
                    model=model,
                    cli_version=version,
                )
                totals[key] = add_usage(
                    totals.get(key), key, label, harness, usage, started_at, ended_at
                )
        return sorted(totals.values(), key=lambda total: total.first_started, reverse=True)
