"""When the Ready label a Run answers was added to its issue (``thirdshift report``'s
label-to-ready time).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from thirdshift.store.tables import UTCDateTime

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable: the Runs recorded before it, and a Run no label started, have none.
    op.add_column("runs", sa.Column("ready_labelled_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    # A plain column drop, as 0008's: a batch copy of ``runs`` would break the sessions' keys.
    op.drop_column("runs", "ready_labelled_at")
