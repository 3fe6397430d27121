"""`thirdshift doctor`'s database checks through its real Outside, against the real PostgreSQL:
a superuser is warned of, with the fix, and a role of thirdshift's own passes."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from thirdshift.doctor import SystemOutside
from thirdshift.doctor.checks import Check, check_database, check_database_role
from thirdshift.errors import ThirdshiftError
from thirdshift.github import GitHub
from thirdshift.settings import Settings


def no_github(settings: Settings, repository: tuple[str, str] | None) -> GitHub:
    raise ThirdshiftError("the database checks never ask GitHub")


def database_checks(home: Path, url: str) -> tuple[Check, Check | None]:
    """The `database` and `database role` checks, as doctor makes them, for ``url``."""
    outside = SystemOutside(
        {"THIRDSHIFT_HOME": str(home), "THIRDSHIFT_DATABASE_URL": url},
        github_for=no_github,
        hidden=lambda _settings: (),
    )
    settings = outside.settings()
    database, opened = check_database(outside, settings)
    return database, check_database_role(settings, opened)


@pytest.mark.postgres
def test_a_superuser_is_warned_of_with_a_role_of_thirdshift_s_own_as_the_fix(
    tmp_path: Path, postgres_url: str
) -> None:
    database, role = database_checks(tmp_path, postgres_url)
    assert database.status == "PASS"
    assert role is not None
    user = sa.make_url(postgres_url).username
    assert (role.status, role.detail) == (
        "WARN",
        f"thirdshift connects as {user}, a superuser: whoever reads the database URL can read "
        "every database of the server and run programs as its system user",
    )
    assert "CREATE ROLE thirdshift LOGIN PASSWORD '<a long random password>';" in role.fix
    assert "CREATE DATABASE thirdshift OWNER thirdshift;" in role.fix


@pytest.mark.postgres
def test_a_role_that_is_no_superuser_passes(tmp_path: Path, postgres_role_url: str) -> None:
    database, role = database_checks(tmp_path, postgres_role_url)
    assert database.status == "PASS"
    name = sa.make_url(postgres_role_url).username
    assert role == Check("database role", "PASS", f"{name} is no superuser")


def test_sqlite_has_no_role_to_check(tmp_path: Path) -> None:
    database, role = database_checks(tmp_path, f"sqlite:///{tmp_path / 'thirdshift.db'}")
    assert database.status == "PASS"
    assert role is None
