"""The review feedback each Run took, so a review or comment is handled once.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from thirdshift.store.tables import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "review_feedback",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repository_id", sa.Integer, sa.ForeignKey("repositories.id"), nullable=False),
        sa.Column("pull_number", sa.Integer, nullable=False),
        sa.Column("key", sa.String(100), nullable=False),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("handled_at", UTCDateTime(), nullable=False),
        sa.UniqueConstraint("repository_id", "pull_number", "key", name="uq_review_feedback"),
    )


def downgrade() -> None:
    op.drop_table("review_feedback")
