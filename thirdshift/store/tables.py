"""The database tables, all in one module. Only the modules of ``thirdshift.store`` and the
Alembic migrations import them; everything else sees the frozen records the store returns.

Times are stored as naive UTC (``UTCDateTime``) so SQLite and PostgreSQL compare them the same
way, and come back timezone-aware.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlmodel import Field, SQLModel


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timestamp kept as naive UTC in the database and handed back aware."""

    impl = sa.DateTime(timezone=False)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous; pass an aware UTC datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):  # SQLite hands back text for raw SQL
            value = datetime.fromisoformat(value)
        assert isinstance(value, datetime)
        return value.replace(tzinfo=UTC)


def _when(nullable: bool = False) -> Any:
    return Field(default=None, sa_type=UTCDateTime, nullable=nullable)


class RepositoryRow(SQLModel, table=True):
    __tablename__ = "repositories"
    __table_args__ = (sa.UniqueConstraint("owner", "name", name="uq_repositories_owner_name"),)

    id: int | None = Field(default=None, primary_key=True)
    owner: str = Field(max_length=100)
    name: str = Field(max_length=100)
    created_at: datetime = _when()


class RunRow(SQLModel, table=True):
    __tablename__ = "runs"

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repositories.id", index=True)
    issue_number: int
    kind: str = Field(max_length=20)  # run, merge, architect, spec
    state: str = Field(max_length=20, index=True)  # running, succeeded, failed, refused
    base_branch: str | None = Field(default=None, max_length=255)
    issue_branch: str | None = Field(default=None, max_length=255)
    head_sha: str | None = Field(default=None, max_length=64)
    pull_request_number: int | None = None
    harness: str | None = Field(default=None, max_length=40)
    model: str | None = Field(default=None, max_length=100)
    cause: str | None = Field(default=None, sa_type=sa.Text)
    killed_work: str | None = Field(default=None, sa_type=sa.Text)
    last_session_log: str | None = Field(default=None, sa_type=sa.Text)
    started_at: datetime = _when()
    ended_at: datetime | None = _when(nullable=True)
    # When its end was announced to the notification targets (at most once: ADR 0018).
    notified_at: datetime | None = _when(nullable=True)
    # An Architect run (migration 0007): the result its session left, as checked (kept so a
    # Run after a crash mid-publish completes the same plan), and the issues it published.
    architect_result: str | None = Field(default=None, sa_type=sa.Text)
    published: str | None = Field(default=None, sa_type=sa.Text)  # numbers, space-separated
    # The fencing token of the Architect Lease the result was kept under (migration 0008): a
    # result kept without one is never completed.
    architect_fencing_token: int | None = None
    # sha256 of the issue's title, a line feed and its body as the Run started on them
    # (migration 0009): a later Run on other text needs a fresh approval.
    text_sha256: str | None = Field(default=None, max_length=64)
    # The Issue branch's head as thirdshift itself last left it (migration 0010): after each of
    # its commits, merges and pushes and each session's end. A kept Worktree is adopted only at
    # a head recorded for its issue and branch (adr/0027).
    branch_head: str | None = Field(default=None, max_length=64)
    # Spec runs (migration 0011, adr/0032). A Ticket Run names the Spec run it is part of; a
    # Spec run's Spec branch is its ``issue_branch`` (pinned at its Claim) and each Ticket
    # Run's ``base_branch``. ``landed_sha``: the head of the Ticket's pull request thirdshift
    # merged into the Spec branch, its own record of the landing (GitHub closes issues only on
    # merges into the default branch).
    parent_run_id: int | None = Field(default=None, index=True)
    landed_sha: str | None = Field(default=None, max_length=64)
    landed_at: datetime | None = _when(nullable=True)
    # When the Ready label this Run answers was added to its issue, as the approval check read
    # it at the Claim (migration 0012): the start of ``thirdshift report``'s label-to-ready
    # time. None: a Run no label started (by hand, a review Repair), or recorded before 0012.
    ready_labelled_at: datetime | None = _when(nullable=True)


class SessionRow(SQLModel, table=True):
    __tablename__ = "sessions"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    kind: str = Field(max_length=40)  # implement, repair-1, architect, <kind>-resume, ...
    harness: str = Field(max_length=40)
    model: str | None = Field(default=None, max_length=100)
    harness_session_id: str | None = Field(default=None, max_length=100)
    resumed_from_id: int | None = Field(default=None, foreign_key="sessions.id")
    log_path: str = Field(sa_type=sa.Text)
    state: str = Field(max_length=20)  # running, ended, failed
    prompt: str = Field(default="", sa_type=sa.Text)
    final_message: str | None = Field(default=None, sa_type=sa.Text)
    killed_work: str | None = Field(default=None, sa_type=sa.Text)
    error: str | None = Field(default=None, sa_type=sa.Text)
    started_at: datetime = Field(default=None, sa_type=UTCDateTime, index=True)
    ended_at: datetime | None = _when(nullable=True)
    # The usage ledger (migration 0004): what the stream said the session consumed.
    cli_version: str | None = Field(default=None, max_length=40)
    turns: int | None = None
    input_tokens: int | None = Field(default=None, sa_type=sa.BigInteger)
    cached_input_tokens: int | None = Field(default=None, sa_type=sa.BigInteger)
    cache_write_tokens: int | None = Field(default=None, sa_type=sa.BigInteger)
    output_tokens: int | None = Field(default=None, sa_type=sa.BigInteger)
    cost_usd: float | None = None
    cost_source: str | None = Field(default=None, max_length=20)


class SessionEventRow(SQLModel, table=True):
    __tablename__ = "session_events"
    __table_args__ = (sa.UniqueConstraint("session_id", "seq", name="uq_session_events_seq"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    seq: int
    kind: str = Field(max_length=20)  # tool_call, tool_result, message, result, error
    tool: str | None = Field(default=None, max_length=100)
    target: str | None = Field(default=None, sa_type=sa.Text)
    exit_status: int | None = None
    summary: str = Field(sa_type=sa.Text)
    created_at: datetime = _when()


class ClaimRow(SQLModel, table=True):
    """A Claim's database half: the Lease. One row per issue, ever; taking over an expired
    Lease rewrites the row and raises the fencing token."""

    __tablename__ = "claims"
    __table_args__ = (sa.UniqueConstraint("repository_id", "issue_number", name="uq_claims_issue"),)

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repositories.id")
    issue_number: int
    owner: str = Field(max_length=200)
    fencing_token: int
    run_id: int | None = Field(default=None, foreign_key="runs.id")
    acquired_at: datetime = _when()
    expires_at: datetime = _when()


class ActivityRow(SQLModel, table=True):
    """One line of the Activity log (a pickup, a pass-over, a Run's end, a crash, a Rescue, a
    sweep, a failed poll); ``daemon`` names the daemon that wrote it."""

    __tablename__ = "activity"

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int | None = Field(default=None, foreign_key="repositories.id", index=True)
    issue_number: int | None = None
    run_id: int | None = Field(default=None, foreign_key="runs.id")
    kind: str = Field(max_length=20)
    daemon: str = Field(max_length=200)
    message: str = Field(sa_type=sa.Text)
    created_at: datetime = _when()


class ReviewFeedbackRow(SQLModel, table=True):
    """One piece of review feedback a Run took (``key``: ``review:<id>``, ``comment:<id>`` or
    ``review-comment:<id>``), so it is handled once however many Runs and daemons look."""

    __tablename__ = "review_feedback"
    __table_args__ = (
        sa.UniqueConstraint("repository_id", "pull_number", "key", name="uq_review_feedback"),
    )

    id: int | None = Field(default=None, primary_key=True)
    repository_id: int = Field(foreign_key="repositories.id")
    pull_number: int
    key: str = Field(max_length=100)
    run_id: int = Field(foreign_key="runs.id")
    handled_at: datetime = _when()
