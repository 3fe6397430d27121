"""The Activity log: one row per thing the daemon did or decided.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from thirdshift.store.tables import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "activity",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repository_id", sa.Integer, sa.ForeignKey("repositories.id")),
        sa.Column("issue_number", sa.Integer),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id")),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("daemon", sa.String(200), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
    )
    op.create_index("ix_activity_repository_id", "activity", ["repository_id"])


def downgrade() -> None:
    op.drop_index("ix_activity_repository_id", "activity")
    op.drop_table("activity")
