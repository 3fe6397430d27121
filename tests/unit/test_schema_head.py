"""The store opens a database already at the newest migration without loading Alembic; that
shortcut needs ``SCHEMA_HEAD`` to name Alembic's own head, or a new migration would never run."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic.script import ScriptDirectory

from thirdshift.store import Store
from thirdshift.store.engine import MIGRATIONS, SCHEMA_HEAD, alembic_config, make_engine


def test_schema_head_is_the_newest_migration_alembic_knows() -> None:
    scripts = ScriptDirectory(str(MIGRATIONS))
    assert scripts.get_current_head() == SCHEMA_HEAD


def test_a_database_one_migration_behind_the_head_is_migrated_when_opened(
    tmp_path: Path,
) -> None:
    """A database left at the migration before the head (0011, before ``ready_labelled_at``)
    is not taken for an up-to-date one: opening it runs the newest migration."""
    from alembic import command

    url = f"sqlite:///{tmp_path / 'thirdshift.db'}"
    Store.open(url).close()
    engine = make_engine(url)
    try:
        previous = ScriptDirectory(str(MIGRATIONS)).get_revision(SCHEMA_HEAD).down_revision
        assert isinstance(previous, str)
        command.downgrade(alembic_config(engine), previous)
        before = {column["name"] for column in sa.inspect(engine).get_columns("runs")}
    finally:
        engine.dispose()

    store = Store.open(url)
    try:
        assert store.revision() == SCHEMA_HEAD
    finally:
        store.close()
    engine = make_engine(url)
    try:
        after = {column["name"] for column in sa.inspect(engine).get_columns("runs")}
    finally:
        engine.dispose()
    assert after - before == {"ready_labelled_at"}
