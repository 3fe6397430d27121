"""What ``runs`` and ``show`` read from the store, gathered in one place so the commands only
print it."""

from __future__ import annotations

from dataclasses import dataclass

from thirdshift.errors import NotRecorded
from thirdshift.records import Activity, Lease, Run, SessionRecord, UsageTotal
from thirdshift.report import shapes, views
from thirdshift.run_states import RunKind, RunState
from thirdshift.store import Store, redact_url

EARLIER_RUNS = 10
"""How many earlier Runs on the same issue ``show`` lists."""
ACTIVITY_LINES = 200


@dataclass(frozen=True)
class RunView:
    """One Run whole: its record, the ledger's totals of it and of its earlier Runs (by Run
    id), the Lease of its issue, its sessions oldest first, the earlier Runs on its issue
    newest first, and its Activity lines."""

    run: Run
    usage: dict[int, UsageTotal]
    lease: Lease | None
    sessions: tuple[SessionRecord, ...]
    earlier_runs: tuple[Run, ...]
    activity: tuple[Activity, ...]
    tree: views.SpecTree = views.NO_TREE

    def lines(self) -> list[str]:
        return views.show_lines(
            self.run,
            usage=self.usage,
            lease=self.lease,
            sessions=self.sessions,
            earlier_runs=self.earlier_runs,
            activity=self.activity,
            tree=self.tree,
        )

    def shape(self) -> shapes.Shape:
        tree = self.tree
        return shapes.run_view_shape(
            self.run,
            usage=self.usage,
            lease=self.lease,
            sessions=self.sessions,
            earlier_runs=self.earlier_runs,
            activity=self.activity,
            tickets=tree.tickets,
            landed=tree.landed,
            spec_run=tree.spec_run,
            spec_cost_usd=tree.cost_usd,
        )


def usage_by_run(store: Store, runs: list[Run]) -> dict[int, UsageTotal]:
    """The ledger's total of each of ``runs`` that has sessions."""
    if not runs:
        return {}
    totals = store.usage_ledger("run", runs=[run.id for run in runs])
    return {int(total.key): total for total in totals}


def recent_runs(
    store: Store, *, repository: str | None, state: RunState | None, limit: int
) -> list[tuple[Run, UsageTotal | None]]:
    """The newest Runs first, each with its ledger total."""
    runs = store.list_runs(limit=limit, state=state, repository=repository)
    usage = usage_by_run(store, runs)
    return [(run, usage.get(run.id)) for run in runs]


def find_run(store: Store, run_id: int, database_url: str) -> Run:
    """The Run, or NotRecorded naming the database that has no such Run."""
    run = store.get_run(run_id)
    if run is None:
        raise NotRecorded(
            f"no Run {run_id} in the database {redact_url(database_url)}; `thirdshift runs` "
            "lists the Runs it has (check THIRDSHIFT_DATABASE_URL if you expected another)"
        )
    return run


def spec_tree(store: Store, run: Run) -> views.SpecTree:
    """A Spec run's Ticket Runs, the Tickets landed in its Spec branch and its whole cost; a
    Ticket Run's Spec run; nothing for any other Run."""
    if run.kind == RunKind.SPEC:
        landed = store.landed_tickets(run.repository, run.issue_branch) if run.issue_branch else {}
        return views.SpecTree(
            tickets=tuple(store.ticket_runs(run.id)),
            landed=landed,
            cost_usd=store.run_cost(run.id),
        )
    if run.parent_run_id is not None:
        return views.SpecTree(spec_run=store.get_run(run.parent_run_id))
    return views.NO_TREE


def run_view(store: Store, run_id: int, database_url: str) -> RunView:
    run = find_run(store, run_id, database_url)
    earlier = store.earlier_runs(run, limit=EARLIER_RUNS)
    tree = spec_tree(store, run)
    related = [*tree.tickets, *tree.landed.values(), *([tree.spec_run] if tree.spec_run else [])]
    return RunView(
        run=run,
        usage=usage_by_run(store, [run, *earlier, *related]),
        lease=store.lease_of(run.repository, run.issue_number),
        sessions=tuple(store.run_sessions(run.id)),
        earlier_runs=tuple(earlier),
        activity=tuple(store.activity(run_id=run.id, limit=ACTIVITY_LINES)),
        tree=tree,
    )
