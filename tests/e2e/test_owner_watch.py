"""`thirdshift daemon --owner` end to end: the GitHub stand-in's listing of the token's
repositories, real git, PostgreSQL and the real claude CLI. The daemon watches every repository
of the owner it may push to: an archived one is left alone (its Ready issue is never claimed),
and one created while the daemon runs is watched at the next listing, without a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon import OWNER, REPOS, make_world, marker, stop, work_turns
from tests.support.run_world import TOKEN
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.sandbox.client import SandboxClient
from thirdshift.store import Store

pytestmark = [pytest.mark.real_cli, pytest.mark.postgres]

__all__ = ["make_world"]  # the fixture this file's test takes


def test_an_owners_new_repository_is_watched_without_a_restart_and_an_archived_one_never(
    make_world: Any, tmp_path: Path
) -> None:
    world = make_world(
        [
            {"name": f"{repo}-1", "marker": marker(repo, 1), "turns": work_turns(repo, 1)}
            for repo in ("alpha", "delta")
        ]
    )
    world.rest("PATCH", f"/repos/{OWNER}/gamma", {"archived": True})
    archived_issue = world.ready_issue("gamma", "In an archived repository")
    world.ready_issue("alpha", "In a watched repository")
    daemon = world.daemon(
        "home-owner", "--owner", OWNER, repositories="[]", owner_refresh_seconds="10"
    )
    world.wait_until(lambda: world.succeeded() == 1, 300, "the Run in acme/alpha")

    source = tmp_path / "source-delta"
    source.mkdir()
    (source / "README.md").write_text("# delta\n")
    client = SandboxClient(world.stand_in.api_url)
    client.add_repo(OWNER, "delta", source, {})
    every = [*REPOS, "delta"]
    client.add_user("maintainer", TOKEN, {f"{OWNER}/{r}": "admin" for r in every})
    world.ready_issue("delta", "In a repository made while the daemon runs")
    world.wait_until(lambda: world.succeeded() == 2, 300, "the Run in the new acme/delta")

    status, err = stop(daemon)
    assert status == 0, err[-3000:]
    assert not [c for c in world.comments("gamma", archived_issue) if CLAIM_MARKER in c]
    store = Store.open(world.database_url, migrate=False)
    try:
        lines = [a.message for a in store.activity(limit=500) if a.kind in ("owner", "start")]
        runs = store.list_runs(limit=50)
    finally:
        store.close()
    assert sorted(run.repository.name for run in runs) == ["alpha", "delta"]
    assert "not watching acme/gamma: it is archived" in lines
    assert "now watching acme/delta: a new repository found" in lines
    assert any(
        "daemon watching 2 repositories (acme/alpha, acme/beta), every one of acme" in line
        for line in lines
    ), lines
