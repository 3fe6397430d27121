"""When a Run's end was announced to the notification targets: the mark that makes a Run end
announced at most once, whoever records it and however often the daemon restarts.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from thirdshift.store.tables import UTCDateTime

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ALTER TABLE, as 0004: a batch rebuild would recreate ``runs`` under the foreign keys
    # of ``sessions`` and ``claims``.
    op.add_column("runs", sa.Column("notified_at", UTCDateTime, nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "notified_at")
