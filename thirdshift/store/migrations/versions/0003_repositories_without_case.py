"""Repositories are unique whatever the case of their owner and name: GitHub ignores it, and one
repository must have one Lease per issue however a daemon or an Issue URL spells it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "uq_repositories_lower_owner_name",
        "repositories",
        [sa.text("lower(owner)"), sa.text("lower(name)")],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("uq_repositories_lower_owner_name", "repositories")
