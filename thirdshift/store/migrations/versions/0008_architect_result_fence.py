"""The fencing token of the Architect Lease an Architect run's result was kept under.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-09
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("architect_fencing_token", sa.Integer, nullable=True))


def downgrade() -> None:
    # A plain column drop, as 0007's: a batch copy of ``runs`` would break the sessions' keys.
    op.drop_column("runs", "architect_fencing_token")
