"""The composition root's reads for the CLI's read commands: each opens the settings'
database, answers with what its command prints, and closes it again."""

from __future__ import annotations

from pathlib import Path

import pytest

from thirdshift.bootstrap import (
    checked_settings,
    open_store,
    recent_runs,
    run_view,
    status_facts,
    usage_totals,
)
from thirdshift.errors import NotRecorded


@pytest.fixture
def environ(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {"THIRDSHIFT_HOME": str(home)}


def test_config_opens_the_settings_database(environ: dict[str, str]) -> None:
    """``checked_settings`` is the settings, once their database could be opened."""
    settings = checked_settings(environ)
    assert settings.effective_database_url.endswith("thirdshift.db")
    assert (Path(environ["THIRDSHIFT_HOME"]) / "thirdshift.db").is_file()


def test_the_read_commands_answer_from_the_settings_database(environ: dict[str, str]) -> None:
    """runs, show, status and usage read what the store holds, each with a store of its own."""
    with open_store(environ) as opened:
        repository = opened.store.ensure_repository("acme", "widgets")
        run = opened.store.start_run(repository, 7, harness="claude")
        opened.store.add_activity(
            "pass-over",
            "passed over: #8 is blocked by #7",
            daemon="d1",
            repository=repository,
            issue_number=8,
        )
    assert [
        found.id for found, _ in recent_runs(environ, repository=None, state=None, limit=5)
    ] == [run.id]
    assert run_view(environ, run.id).run.id == run.id
    facts = status_facts(environ)
    assert [running.id for running in facts.running] == [run.id]
    assert [(line.repository, line.issue_number) for line in facts.passed_over] == [
        ("acme/widgets", 8)
    ]
    assert (facts.daemons, facts.leases) == ([], [])
    assert usage_totals(environ, "day", days=30, repository=None) == []


def test_show_names_the_database_that_has_no_such_run(environ: dict[str, str]) -> None:
    """A Run the database does not hold is NotRecorded, as ``thirdshift show`` reports it."""
    with pytest.raises(NotRecorded):
        run_view(environ, 99)


def test_every_name_of_the_root_s_face_is_loaded_from_the_module_it_names() -> None:
    """The face loads its names when first used: each name it lists resolves, and it lists
    exactly the names it can load."""
    import thirdshift.bootstrap as root

    homes = root._HOMES  # the table the lazy face loads from
    assert sorted(homes) == sorted(root.__all__)
    for name in root.__all__:
        assert getattr(root, name) is not None, name
