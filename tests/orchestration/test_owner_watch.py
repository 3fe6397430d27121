"""A daemon watching an owner: the repositories its listing finds are polled from the start; one
found by a later listing is polled from then on, without a restart; one that leaves the listing
(archived, deleted, excluded) is polled no more. Each change is one Activity line."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import cast

import pytest

from tests.orchestration.conftest import RunWorld, ScriptedStarter
from tests.orchestration.test_daemon import DaemonWorld, _ListedPoll
from tests.orchestration.test_webhook_wakes import until
from thirdshift.daemon import Pickup, RepositoryPoll, RunWatch
from thirdshift.daemon.owners import OwnerWatch
from thirdshift.errors import GitHubError
from thirdshift.records import ListedRepository
from thirdshift.run_states import RunEnd
from thirdshift.runs import RunOutcome, RunRequest


def listed(full_name: str, *, archived: bool = False) -> ListedRepository:
    owner, name = full_name.split("/")
    return ListedRepository(owner, name, archived, False, True)


@dataclass
class ScriptedListing:
    """The token's listing of the repositories it may read, as the test sets it; ``fails``
    makes the next listing fail as GitHub's 502 would."""

    repositories: list[ListedRepository]
    fails: bool = False
    asked: int = 0

    def readable_repositories(self) -> tuple[ListedRepository, ...]:
        self.asked += 1
        if self.fails:
            self.fails = False
            raise GitHubError("GitHub answered 502", 502)
        return tuple(self.repositories)


@dataclass
class Started:
    issues: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def run(self, request: RunRequest, _watch: RunWatch) -> RunOutcome:
        with self.lock:
            self.issues.append(str(request.issue))
        return RunOutcome(RunEnd.READY, 0)

    def count(self, issue: str) -> int:
        with self.lock:
            return self.issues.count(issue)


class CountedPoll(_ListedPoll):
    """A repository whose poll proposes its issue #1 each time, and counts its polls."""

    def __call__(self, *, fresh: bool = False) -> list[Pickup]:
        POLLED[self.full_name] = POLLED.get(self.full_name, 0) + 1
        return super().__call__(fresh=fresh)


POLLED: dict[str, int] = {}
"""How often each CountedPoll's repository was polled."""


@pytest.fixture
def owned(world: RunWorld) -> tuple[DaemonWorld, ScriptedListing, Started]:
    dw = DaemonWorld(world)
    started = Started()
    dw.daemon = dw.daemon_of(
        ScriptedStarter(started.run),
        max_runs=4,
        max_runs_per_repository=1,
        poll_seconds=0.5,
        owner_refresh_seconds=0.5,
    )
    listing = ScriptedListing([listed("acme/one"), listed("acme/old", archived=True)])

    def make_poll(owner: str, name: str) -> RepositoryPoll:
        # Each repository has one Ready issue, #1, proposed on every poll; a Run of it that
        # ended is not started again while it cools down.
        return cast(RepositoryPoll, CountedPoll(world.store, owner, name, [1]))

    dw.daemon.watch_owners(OwnerWatch(listing, ["acme"], ["acme/skip-*"], make_poll, dw.activity))
    return dw, listing, started


def test_a_repository_an_owner_gains_while_serving_is_polled_without_a_restart(
    owned: tuple[DaemonWorld, ScriptedListing, Started],
) -> None:
    dw, listing, started = owned
    serving = threading.Thread(target=dw.daemon.serve, daemon=True)
    serving.start()
    try:
        assert until(lambda: started.count("acme/one#1") >= 1)
        assert started.count("acme/old#1") == 0  # archived: never watched

        listing.repositories.append(listed("acme/two"))
        listing.repositories.append(listed("acme/skip-me"))
        assert until(lambda: started.count("acme/two#1") >= 1)
    finally:
        dw.stop.set()
        serving.join(30)
    assert started.count("acme/skip-me#1") == 0
    owner_lines = dw.lines("owner")
    assert owner_lines.count("not watching acme/old: it is archived") == 1
    assert owner_lines.count("now watching acme/two: a new repository found") == 1
    assert (
        owner_lines.count("not watching acme/skip-me: excluded_repositories has acme/skip-*") == 1
    )
    assert any(
        "daemon watching 1 repositories (acme/one), every one of acme" in line
        for line in dw.lines("start")
    )


def test_a_repository_archived_while_serving_is_polled_no_more_and_a_failed_listing_changes_nothing(
    owned: tuple[DaemonWorld, ScriptedListing, Started],
) -> None:
    dw, listing, started = owned
    serving = threading.Thread(target=dw.daemon.serve, daemon=True)
    serving.start()
    try:
        assert until(lambda: started.count("acme/one#1") >= 1)
        listing.fails = True
        asked = listing.asked
        assert until(lambda: listing.asked > asked + 1)  # the failed listing, then another
        assert [p for p in dw.daemon.snapshot().polls if p.repository == "acme/one"]

        listing.repositories[0] = listed("acme/one", archived=True)
        assert until(lambda: not dw.daemon.snapshot().polls)
        time.sleep(0.6)  # a poll that was running as it was dropped ends
        polls_then = POLLED["acme/one"]
        time.sleep(1.5)  # three poll intervals
        assert POLLED["acme/one"] == polls_then
    finally:
        dw.stop.set()
        serving.join(30)
    assert dw.lines("owner")[-2:] == [
        "not watching acme/one: it is archived",
        "no longer watching acme/one: it left the listing",
    ]
    assert any(
        "could not list the repositories of acme: GitHub answered 502" in line
        for line in dw.world.lines
    )


def test_an_owner_with_no_repository_the_token_may_read_is_said_once(
    owned: tuple[DaemonWorld, ScriptedListing, Started],
) -> None:
    dw, listing, _started = owned
    watch = OwnerWatch(listing, ["acme", "acmee"], [], lambda _o, _n: dw.poll, dw.activity)
    watch.refresh()
    watch.refresh()
    said = (
        "the token may read no repository of acmee: check the name, and that the token's user "
        "is a member there (or the owner)"
    )
    assert dw.lines("owner").count(said) == 1
