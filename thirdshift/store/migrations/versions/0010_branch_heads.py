"""The Issue branch head thirdshift itself last left a Run at (adr/0027).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("branch_head", sa.String(64), nullable=True))


def downgrade() -> None:
    # A plain column drop, as 0008's: a batch copy of ``runs`` would break the sessions' keys.
    op.drop_column("runs", "branch_head")
