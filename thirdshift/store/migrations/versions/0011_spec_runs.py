"""Spec runs: a Ticket Run's parent Spec run, and its landing in the Spec branch (adr/0032).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from thirdshift.store.tables import UTCDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # No foreign key on the parent: SQLite adds one to an existing table only by a batch copy
    # of ``runs``, which would break the sessions' keys (as 0008's note says). The store
    # writes parents it has just read, and never deletes a Run.
    op.add_column("runs", sa.Column("parent_run_id", sa.Integer(), nullable=True))
    op.create_index("ix_runs_parent_run_id", "runs", ["parent_run_id"])
    op.add_column("runs", sa.Column("landed_sha", sa.String(64), nullable=True))
    op.add_column("runs", sa.Column("landed_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "landed_at")
    op.drop_column("runs", "landed_sha")
    op.drop_index("ix_runs_parent_run_id", table_name="runs")
    op.drop_column("runs", "parent_run_id")
