"""Table rows (and raw result rows) to the frozen records of ``thirdshift.records``: the only
way anything leaves the store, so nothing outside it can touch the database lazily."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from thirdshift.records import Activity, Lease, Repository, Run, SessionRecord, Usage
from thirdshift.run_states import RunKind, RunState
from thirdshift.store.tables import ActivityRow, RepositoryRow, RunRow, SessionRow

NO_ISSUE = 0
"""The ``issue_number`` column's value for an Architect run's row and Lease, which have no
issue (the records carry None). The column has been NOT NULL since the first tables, and SQLite
relaxes that only by copying ``runs``, which would break the sessions' keys; GitHub numbers
issues from 1, so 0 is no issue's (adr/0044)."""


def issue_key(issue_number: int | None) -> int:
    """The ``issue_number`` column's value for an issue, or for a Run without one."""
    return NO_ISSUE if issue_number is None else issue_number


def issue_of(key: int) -> int | None:
    """The issue an ``issue_number`` column's value names: None for an Architect run's."""
    return None if key == NO_ISSUE else key


def repository_record(row: RepositoryRow) -> Repository:
    assert row.id is not None
    return Repository(id=row.id, owner=row.owner, name=row.name)


def run_record(row: RunRow, repository: Repository) -> Run:
    assert row.id is not None
    return Run(
        id=row.id,
        repository=repository,
        issue_number=issue_of(row.issue_number),
        kind=RunKind(row.kind),
        state=RunState(row.state),
        base_branch=row.base_branch,
        issue_branch=row.issue_branch,
        head_sha=row.head_sha,
        pull_request_number=row.pull_request_number,
        harness=row.harness,
        model=row.model,
        cause=row.cause,
        killed_work=row.killed_work,
        last_session_log=row.last_session_log,
        started_at=row.started_at,
        ended_at=row.ended_at,
        published=tuple(int(n) for n in (row.published or "").split()),
        text_sha256=row.text_sha256,
        parent_run_id=row.parent_run_id,
        landed_sha=row.landed_sha,
        landed_at=row.landed_at,
        ready_labelled_at=row.ready_labelled_at,
    )


def session_record(row: SessionRow) -> SessionRecord:
    assert row.id is not None
    return SessionRecord(
        id=row.id,
        run_id=row.run_id,
        kind=row.kind,
        harness=row.harness,
        model=row.model,
        harness_session_id=row.harness_session_id,
        resumed_from_id=row.resumed_from_id,
        log_path=row.log_path,
        state=row.state,
        prompt=row.prompt,
        final_message=row.final_message,
        killed_work=row.killed_work,
        error=row.error,
        started_at=row.started_at,
        ended_at=row.ended_at,
        usage=Usage(
            turns=row.turns,
            input_tokens=row.input_tokens,
            cached_input_tokens=row.cached_input_tokens,
            cache_write_tokens=row.cache_write_tokens,
            output_tokens=row.output_tokens,
            cost_usd=row.cost_usd,
            cost_source=row.cost_source,
            model=row.model,
            cli_version=row.cli_version,
        ),
    )


def lease_record(row: Any) -> Lease:
    def aware(value: Any) -> datetime:
        if isinstance(value, str):
            value = datetime.fromisoformat(value)
        assert isinstance(value, datetime)
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    return Lease(
        repository_id=row["repository_id"],
        issue_number=issue_of(row["issue_number"]),
        owner=row["owner"],
        fencing_token=row["fencing_token"],
        run_id=row["run_id"],
        acquired_at=aware(row["acquired_at"]),
        expires_at=aware(row["expires_at"]),
    )


def activity_record(row: ActivityRow, repository: str | None) -> Activity:
    assert row.id is not None
    return Activity(
        id=row.id,
        kind=row.kind,
        daemon=row.daemon,
        message=row.message,
        created_at=row.created_at,
        repository=repository,
        issue_number=row.issue_number,
        run_id=row.run_id,
    )
