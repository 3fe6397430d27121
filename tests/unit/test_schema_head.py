"""The store opens a database already at the newest migration without loading Alembic; that
shortcut needs ``SCHEMA_HEAD`` to name Alembic's own head, or a new migration would never run."""

from __future__ import annotations

from alembic.script import ScriptDirectory

from thirdshift.store.engine import MIGRATIONS, SCHEMA_HEAD


def test_schema_head_is_the_newest_migration_alembic_knows() -> None:
    scripts = ScriptDirectory(str(MIGRATIONS))
    assert scripts.get_current_head() == SCHEMA_HEAD
