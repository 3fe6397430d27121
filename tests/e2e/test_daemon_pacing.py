"""A daemon watching an owner of 100 repositories under GitHub's secondary limits (issue 32): the
GitHub stand-in enforces 120 points a minute (a read 1, a write 5) for the token's user, as GitHub
does, and the daemon, paced by its settings to stay under it, finishes every Ready issue with one
ready pull request without one refusal. Real git, PostgreSQL and the real claude CLI.

``THIRDSHIFT_TEST_PACING_ISSUES`` sets how many Ready issues (default 5, spread over the owner's
repositories; the issue's acceptance names 20, a run of about ten minutes at that pace)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_daemon import OWNER, REPOS, make_world, marker, stop, work_turns
from tests.support.run_world import TOKEN
from thirdshift.sandbox.client import SandboxClient

pytestmark = [pytest.mark.real_cli, pytest.mark.postgres]

__all__ = ["make_world"]  # the fixture this file's test takes

REPOSITORIES = 100
POINTS_PER_MINUTE = 120
ISSUES = int(os.environ.get("THIRDSHIFT_TEST_PACING_ISSUES", "5"))


@pytest.mark.timeout(300 + 150 * ISSUES)  # the paced minutes, beyond the suite's 300 s a test
def test_a_daemon_over_an_owners_hundred_repositories_keeps_under_120_points_a_minute(
    make_world: Any, tmp_path: Path
) -> None:
    names = [*REPOS, *(f"r{i:03d}" for i in range(REPOSITORIES - len(REPOS)))]
    step = len(names) // ISSUES
    chosen = [names[i * step] for i in range(ISSUES)]
    world = make_world(
        [{"name": f"{r}-1", "marker": marker(r, 1), "turns": work_turns(r, 1)} for r in chosen]
    )
    client = SandboxClient(world.stand_in.api_url)
    source = tmp_path / "source-more"
    source.mkdir()
    (source / "README.md").write_text("# more\n")
    for name in names[len(REPOS) :]:
        client.add_repo(OWNER, name, source, {})
    client.add_user("maintainer", TOKEN, {f"{OWNER}/{name}": "admin" for name in names})
    for name in chosen:
        world.ready_issue(name, f"Task in {name}")

    limits = world.stand_in.secondary
    limits.points_per_minute = POINTS_PER_MINUTE
    # 80 requests and 10 writes a minute: 80 + 4 x 10 = 120 points at most, as GitHub counts.
    daemon = world.daemon(
        "home-paced",
        "--owner",
        OWNER,
        repositories="[]",
        poll_seconds="10",
        github_requests_per_minute="80",
        github_writes_per_minute="10",
    )
    world.wait_until(
        lambda: world.succeeded() == ISSUES, 120 + 150 * ISSUES, f"{ISSUES} paced Runs"
    )
    status, err = stop(daemon)
    limits.points_per_minute = None  # the checks below are the test's, not the daemon's

    assert status == 0, err[-3000:]
    assert (limits.refused, limits.early) == (0, 0), err[-3000:]
    for name in chosen:
        assert len(world.ready_pulls(name)) == 1, name
    assert "pacing GitHub requests" in err  # it did wait its turn, and said so
