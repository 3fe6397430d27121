"""What the database benchmarks share: one measurement on a fresh SQLite file, then on a fresh
schema of the test PostgreSQL server (``TEST_POSTGRES_URL``, default the local one with trust
auth), dropped afterwards."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import sqlalchemy as sa

POSTGRES = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


def on_each_database(measure: Callable[[str, str], None]) -> None:
    """Call ``measure(name, url)`` for SQLite, then for PostgreSQL."""
    with tempfile.TemporaryDirectory() as tmp:
        measure("sqlite", f"sqlite:///{Path(tmp) / 'bench.db'}")
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine("postgresql+psycopg://" + POSTGRES.split("://", 1)[1])
    with engine.begin() as connection:
        connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        separator = "&" if "?" in POSTGRES else "?"
        measure("postgresql", f"{POSTGRES}{separator}options={quote(f'-csearch_path={schema}')}")
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()
