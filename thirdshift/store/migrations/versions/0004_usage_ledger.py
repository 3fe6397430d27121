"""The usage ledger: what each session consumed, as its stream said (and thirdshift priced).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("cli_version", sa.String(40)),
    ("turns", sa.Integer),
    ("input_tokens", sa.BigInteger),
    ("cached_input_tokens", sa.BigInteger),
    ("cache_write_tokens", sa.BigInteger),
    ("output_tokens", sa.BigInteger),
    ("cost_usd", sa.Float),
    ("cost_source", sa.String(20)),
)


def upgrade() -> None:
    # Plain ALTER TABLE on both databases (SQLite 3.35+ drops columns too): a batch rebuild
    # would drop and recreate ``sessions`` under the foreign key of ``session_events``.
    for name, kind in _COLUMNS:
        op.add_column("sessions", sa.Column(name, kind, nullable=True))
    op.create_index("ix_sessions_started_at", "sessions", ["started_at"])


def downgrade() -> None:
    op.drop_index("ix_sessions_started_at", "sessions")
    for name, _ in reversed(_COLUMNS):
        op.drop_column("sessions", name)
