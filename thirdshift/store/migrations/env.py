"""Alembic environment: migrations run on the engine the Store hands over, never on a URL read
from a file, so the same code path serves SQLite and PostgreSQL, tests and production."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text
from sqlmodel import SQLModel

import thirdshift.store.tables  # noqa: F401  (registers the tables on SQLModel.metadata)

config = context.config
engine = config.attributes.get("engine")
if engine is None:  # pragma: no cover - only when someone runs the alembic CLI by hand
    raise RuntimeError(
        "run migrations through thirdshift.store.engine.upgrade(), which passes an engine"
    )

with engine.connect() as connection:
    if connection.dialect.name == "postgresql":
        # A migration may wait behind a long read or another daemon's write; the Store's stall
        # bounds (adr/0003) are for a Run's short writes. SET LOCAL ends with the transaction,
        # so the pooled connection keeps its bounds afterwards.
        connection.execute(text("SET LOCAL lock_timeout = 0"))
        connection.execute(text("SET LOCAL idle_in_transaction_session_timeout = 0"))
    context.configure(
        connection=connection,
        target_metadata=SQLModel.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
