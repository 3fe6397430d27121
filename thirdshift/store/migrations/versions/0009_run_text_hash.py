"""The digest of the issue text a Run started on.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-10
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("text_sha256", sa.String(64), nullable=True))


def downgrade() -> None:
    # A plain column drop, as 0007's: a batch copy of ``runs`` would break the sessions' keys.
    op.drop_column("runs", "text_sha256")
