"""First tables: repositories, runs, sessions, session events, claims.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from thirdshift.store.tables import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "repositories",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("owner", sa.String(100), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("owner", "name", name="uq_repositories_owner_name"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repository_id", sa.Integer, sa.ForeignKey("repositories.id"), nullable=False),
        sa.Column("issue_number", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("base_branch", sa.String(255)),
        sa.Column("issue_branch", sa.String(255)),
        sa.Column("head_sha", sa.String(64)),
        sa.Column("pull_request_number", sa.Integer),
        sa.Column("harness", sa.String(40)),
        sa.Column("model", sa.String(100)),
        sa.Column("cause", sa.Text),
        sa.Column("killed_work", sa.Text),
        sa.Column("last_session_log", sa.Text),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("ended_at", UTCDateTime()),
    )
    op.create_index("ix_runs_repository_id", "runs", ["repository_id"])
    op.create_index("ix_runs_state", "runs", ["state"])
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("harness", sa.String(40), nullable=False),
        sa.Column("model", sa.String(100)),
        sa.Column("harness_session_id", sa.String(100)),
        sa.Column("resumed_from_id", sa.Integer, sa.ForeignKey("sessions.id")),
        sa.Column("log_path", sa.Text, nullable=False),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("final_message", sa.Text),
        sa.Column("killed_work", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("ended_at", UTCDateTime()),
    )
    op.create_index("ix_sessions_run_id", "sessions", ["run_id"])
    op.create_table(
        "session_events",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("session_id", sa.Integer, sa.ForeignKey("sessions.id"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("tool", sa.String(100)),
        sa.Column("target", sa.Text),
        sa.Column("exit_status", sa.Integer),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("session_id", "seq", name="uq_session_events_seq"),
    )
    op.create_index("ix_session_events_session_id", "session_events", ["session_id"])
    op.create_table(
        "claims",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repository_id", sa.Integer, sa.ForeignKey("repositories.id"), nullable=False),
        sa.Column("issue_number", sa.Integer, nullable=False),
        sa.Column("owner", sa.String(200), nullable=False),
        sa.Column("fencing_token", sa.Integer, nullable=False),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id")),
        sa.Column("acquired_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("repository_id", "issue_number", name="uq_claims_issue"),
    )


def downgrade() -> None:
    op.drop_table("claims")
    op.drop_index("ix_session_events_session_id", "session_events")
    op.drop_table("session_events")
    op.drop_index("ix_sessions_run_id", "sessions")
    op.drop_table("sessions")
    op.drop_index("ix_runs_state", "runs")
    op.drop_index("ix_runs_repository_id", "runs")
    op.drop_table("runs")
    op.drop_table("repositories")
