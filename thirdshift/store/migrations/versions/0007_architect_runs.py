"""What an Architect run's session concluded and what it published.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("architect_result", sa.Text, nullable=True))
    op.add_column("runs", sa.Column("published", sa.Text, nullable=True))


def downgrade() -> None:
    # Plain column drops (SQLite 3.35+ has them): a batch copy of ``runs`` would break the
    # foreign keys of the sessions that point at it.
    op.drop_column("runs", "published")
    op.drop_column("runs", "architect_result")
