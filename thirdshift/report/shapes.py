"""One JSON shape per entity: the store's frozen records as plain dicts, the same in every
command that prints them with ``--json`` (documented in docs/json.md; adr/0016 says what is
promised stable).

Every object carries ``type`` (``run``, ``session``, ``usage``, ``usage_total``, ``lease``,
``activity``, ``session_event``, ``run_view``, ``report``) and ``version`` (``SHAPE_VERSION``):
a field is only ever added within a version; renaming, removing or changing the meaning of one
raises it.
Times are ISO 8601 in UTC. Texts are as the store keeps them, already scrubbed when written.
The shapes of what is not a store record (``daemon_state``, ``status_page``, ``doctor_check``,
``notification``) are made beside their code, in packages that may not import this one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from thirdshift.figures import Spread
from thirdshift.records import (
    Activity,
    Lease,
    Run,
    SessionEvent,
    SessionRecord,
    Usage,
    UsageTotal,
)
from thirdshift.report.period import HarnessRow, PeriodReport

SHAPE_VERSION = 1

Shape = dict[str, Any]


def iso(moment: datetime | None) -> str | None:
    """``2026-03-01T23:00:00+00:00``; a time without a zone is the store's UTC."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat()


def seconds_between(start: datetime, end: datetime | None) -> float | None:
    """How long from ``start`` to ``end`` (None while it has not ended)."""
    if end is None:
        return None
    return round((_utc(end) - _utc(start)).total_seconds(), 3)


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def issue_field(issue_number: int | None) -> int:
    """The documented ``issue_number``: ``0`` for an Architect run (and its Lease), which has
    no issue."""
    return 0 if issue_number is None else issue_number


def _head(kind: str) -> Shape:
    return {"type": kind, "version": SHAPE_VERSION}


def usage_shape(usage: Usage) -> Shape:
    """A session's line of the usage ledger."""
    return _head("usage") | {
        "turns": usage.turns,
        "input_tokens": usage.input_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": usage.cost_usd,
        "cost_source": usage.cost_source,
        "model": usage.model,
        "cli_version": usage.cli_version,
    }


def usage_total_shape(total: UsageTotal) -> Shape:
    """The ledger's sum over the sessions of one Run, repository or UTC day."""
    return _head("usage_total") | {
        "key": total.key,
        "label": total.label,
        "sessions": total.sessions,
        "harnesses": list(total.harnesses),
        "turns": total.turns,
        "input_tokens": total.input_tokens,
        "cached_input_tokens": total.cached_input_tokens,
        "cache_write_tokens": total.cache_write_tokens,
        "output_tokens": total.output_tokens,
        "cost_usd": total.cost_usd,
        "unpriced_sessions": total.unpriced_sessions,
        "first_started": iso(total.first_started),
        "duration_seconds": total.duration_seconds,
    }


def run_shape(run: Run, usage: UsageTotal | None) -> Shape:
    """A Run's record, with the ledger's total over its sessions (None before its first)."""
    return _head("run") | {
        "id": run.id,
        "repository": run.repository.full_name,
        "issue_number": issue_field(run.issue_number),
        "issue": run.subject,
        "kind": run.kind,
        "published": list(run.published),
        "state": run.state,
        "cause": run.cause,
        "killed_work": run.killed_work,
        "base_branch": run.base_branch,
        "issue_branch": run.issue_branch,
        "head_sha": run.head_sha,
        "pull_request_number": run.pull_request_number,
        "harness": run.harness,
        "model": run.model,
        "last_session_log": run.last_session_log,
        "started_at": iso(run.started_at),
        "ended_at": iso(run.ended_at),
        "duration_seconds": seconds_between(run.started_at, run.ended_at),
        "usage": None if usage is None else usage_total_shape(usage),
        "parent_run_id": run.parent_run_id,
        "landed_sha": run.landed_sha,
        "landed_at": iso(run.landed_at),
        "ready_labelled_at": iso(run.ready_labelled_at),
    }


def session_shape(session: SessionRecord) -> Shape:
    """One Session of a Run, with the whole prompt it started with (its preamble at the top)."""
    return _head("session") | {
        "id": session.id,
        "run_id": session.run_id,
        "kind": session.kind,
        "harness": session.harness,
        "model": session.model,
        "harness_session_id": session.harness_session_id,
        "resumed_from_id": session.resumed_from_id,
        "state": session.state,
        "error": session.error,
        "killed_work": session.killed_work,
        "final_message": session.final_message,
        "log_path": session.log_path,
        "started_at": iso(session.started_at),
        "ended_at": iso(session.ended_at),
        "duration_seconds": seconds_between(session.started_at, session.ended_at),
        "usage": usage_shape(session.usage),
        "prompt": session.prompt,
    }


def session_event_shape(event: SessionEvent) -> Shape:
    return _head("session_event") | {
        "seq": event.seq,
        "kind": event.kind,
        "summary": event.summary,
        "tool": event.tool,
        "target": event.target,
        "exit_status": event.exit_status,
        "created_at": iso(event.created_at),
    }


def lease_shape(lease: Lease, repository: str | None = None) -> Shape:
    """A Lease; ``repository`` (OWNER/NAME) when the caller knows it."""
    return _head("lease") | {
        "repository_id": lease.repository_id,
        "repository": repository,
        "issue_number": issue_field(lease.issue_number),
        "owner": lease.owner,
        "fencing_token": lease.fencing_token,
        "run_id": lease.run_id,
        "acquired_at": iso(lease.acquired_at),
        "expires_at": iso(lease.expires_at),
    }


def activity_shape(activity: Activity) -> Shape:
    return _head("activity") | {
        "id": activity.id,
        "kind": activity.kind,
        "daemon": activity.daemon,
        "message": activity.message,
        "repository": activity.repository,
        "issue_number": activity.issue_number,
        "run_id": activity.run_id,
        "created_at": iso(activity.created_at),
    }


def run_view_shape(
    run: Run,
    *,
    usage: Mapping[int, UsageTotal],
    lease: Lease | None,
    sessions: Sequence[SessionRecord],
    earlier_runs: Sequence[Run],
    activity: Sequence[Activity],
    tickets: Sequence[Run] = (),
    landed: Mapping[int, Run] | None = None,
    spec_run: Run | None = None,
    spec_cost_usd: float | None = None,
) -> Shape:
    """``thirdshift show --json``: one Run whole, each part in its own entity's shape.
    ``usage`` holds the ledger's total of each Run (by id) that has sessions. A Spec run adds
    its Ticket Runs, the Tickets landed in its Spec branch (by Ticket number) and the whole
    Spec run's cost; a Ticket Run, its Spec run."""
    return _head("run_view") | {
        "run": run_shape(run, usage.get(run.id)),
        "lease": None if lease is None else lease_shape(lease, run.repository.full_name),
        "sessions": [session_shape(session) for session in sessions],
        "earlier_runs": [run_shape(earlier, usage.get(earlier.id)) for earlier in earlier_runs],
        "activity": [activity_shape(line) for line in activity],
        "tickets": [run_shape(ticket, usage.get(ticket.id)) for ticket in tickets],
        "landed_tickets": {
            str(number): ticket.id for number, ticket in sorted((landed or {}).items())
        },
        "spec_run": None if spec_run is None else run_shape(spec_run, usage.get(spec_run.id)),
        "spec_run_cost_usd": spec_cost_usd,
    }


def report_shape(report: PeriodReport) -> Shape:
    """``thirdshift report --json``: the period and a row per repository and Harness."""
    return _head("report") | {
        "since": iso(report.since),
        "until": iso(report.until),
        "repository": report.repository,
        "rows": [_report_row(row) for row in report.rows],
    }


def _report_row(row: HarnessRow) -> Shape:
    spend = row.spend
    return {
        "repository": row.repository,
        "harness": row.harness,
        "runs": row.runs,
        "outcomes": dict(row.outcomes),
        "pull_requests_ready": row.pull_requests_ready,
        "pull_requests_merged": row.pull_requests_merged,
        "failed_runs": row.failed_runs,
        "failed_runs_by_cause": [{"cause": c.cause, "runs": c.runs} for c in row.causes],
        "sessions": spend.sessions,
        "repairs": spend.repairs,
        "repairs_per_run": row.repairs_per_run,
        "repaired_runs": spend.repaired_runs,
        "most_repairs": spend.most_repairs,
        "cost_usd": spend.cost_usd,
        "unpriced_sessions": spend.unpriced_sessions,
        "cost_per_run_usd": row.cost_per_run,
        "cost_per_pull_request_usd": row.cost_per_pull_request,
        "session_time": _spread(row.session_time, "sessions"),
        "label_to_ready": _spread(row.label_to_ready, "runs")
        | {"unknown": row.label_to_ready.unknown},
    }


def _spread(spread: Spread, counted: str) -> Shape:
    return {
        counted: spread.known,
        "median_seconds": spread.median_seconds,
        "p90_seconds": spread.p90_seconds,
    }
