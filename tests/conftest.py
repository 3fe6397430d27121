"""Fixtures every suite may use: an isolated THIRDSHIFT_HOME and a database on each backend."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
import sqlalchemy as sa

# The development and CI machines run PostgreSQL here with trust auth; override to point the
# suite elsewhere. Not a THIRDSHIFT_* name on purpose: those are the product's settings.
POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")

# The stand-in with its standard scenario (``sandbox``, ``description``): the stand-in's own
# tests (tests/sandbox) and the adapters' contract tests (tests/contract) both use it.
pytest_plugins = ("tests.support.stand_in_scenario",)


@pytest.fixture(autouse=True, scope="session")
def _isolated_git() -> Iterator[None]:
    """No test may lean on the developer's git configuration: git sees no global or system
    file, and commits made by tests (or by agent CLIs under test) get a fixed identity."""
    saved = {name: os.environ.get(name) for name in _GIT_ENVIRONMENT}
    os.environ.update(_GIT_ENVIRONMENT)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


_GIT_ENVIRONMENT = {
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "thirdshift tests",
    "GIT_AUTHOR_EMAIL": "tests@thirdshift.invalid",
    "GIT_COMMITTER_NAME": "thirdshift tests",
    "GIT_COMMITTER_EMAIL": "tests@thirdshift.invalid",
}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh THIRDSHIFT_HOME, with no THIRDSHIFT_* or token variables leaking in."""
    for name in list(os.environ):
        if name.startswith("THIRDSHIFT_") or name in {"GITHUB_TOKEN"}:
            monkeypatch.delenv(name)
    path = tmp_path / "home"
    path.mkdir()
    monkeypatch.setenv("THIRDSHIFT_HOME", str(path))
    return path


def _postgres_engine() -> sa.Engine:
    url = "postgresql+psycopg://" + POSTGRES_URL.split("://", 1)[1]
    return sa.create_engine(url)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A URL to a fresh schema of its own in the test PostgreSQL database, dropped afterwards.
    An unreachable server fails the test: CI must prove the PostgreSQL path, never skip it."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    engine = _postgres_engine()
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    except sa.exc.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {POSTGRES_URL} ({exc.orig}); start it "
            "(pg_ctlcluster <version> main start) or set TEST_POSTGRES_URL"
        )
    options = quote(f"-csearch_path={schema}")
    separator = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{separator}options={options}"
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


@pytest.fixture
def postgres_role_url() -> Iterator[str]:
    """A URL that connects to the test PostgreSQL database as a login role of its own, with a
    password and no superuser, owning a fresh schema it works in; both dropped afterwards. What
    the README asks of a production database. Fails (never skips) without the server."""
    role = f"r_{uuid.uuid4().hex[:12]}"
    password = uuid.uuid4().hex
    engine = _postgres_engine()
    try:
        with engine.begin() as connection:
            connection.execute(sa.text(f"CREATE ROLE \"{role}\" LOGIN PASSWORD '{password}'"))
            connection.execute(sa.text(f'CREATE SCHEMA "{role}" AUTHORIZATION "{role}"'))
    except sa.exc.OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {POSTGRES_URL} ({exc.orig}); start it "
            "(pg_ctlcluster <version> main start) or set TEST_POSTGRES_URL"
        )
    url = sa.make_url(POSTGRES_URL).set(username=role, password=password)
    options = quote(f"-csearch_path={role}")
    separator = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{url.render_as_string(hide_password=False)}{separator}options={options}"
    finally:
        with engine.begin() as connection:
            connection.execute(sa.text(f'DROP SCHEMA "{role}" CASCADE'))
            connection.execute(sa.text(f'DROP OWNED BY "{role}"'))
            connection.execute(sa.text(f'DROP ROLE "{role}"'))
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each store test runs once on SQLite (WAL, a file) and once on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'thirdshift.db'}"
    url: str = request.getfixturevalue("postgres_url")
    return url
