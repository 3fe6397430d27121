"""The polls of a watched owner's repositories through one listing per owner (adr/0048), with the
real GitHub adapter against the stand-in (GitHub's conditional answers, request counts): an idle
cycle costs two requests an owner however many repositories it has; a Ready issue anywhere is
taken by its repository's poll; what the listing cannot show (a blocker closed) is read again
after ``recheck_seconds`` or a look afresh, not every cycle; an owner GitHub will not list so
is listed repository by repository, said once."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.contract.test_github_adapter import adapter
from tests.support.stand_in_scenario import OWNER, TOKENS, Sandbox
from thirdshift.clock import ManualClock
from thirdshift.daemon import ActivityLog, PollHooks, PollParts, ReadyRules, RepositoryPoll
from thirdshift.daemon.listing import OwnerListings
from thirdshift.github import GitHub
from thirdshift.scrub import Scrubber
from thirdshift.store import Store

READY = "ready-for-agent"
POLL_SECONDS = 10.0
RECHECK_SECONDS = 300.0
NAMES = ("widgets", "gadgets", "gizmos", "sprockets", "cogs")
HOOKS = PollHooks(
    running_here=lambda _n: False,
    stop_here=lambda _n, _why: None,
    kept_worktree=lambda _b: False,
)


@dataclass
class Owner:
    """The organisation ``acme`` with five repositories, polled by ``wes`` (write on each)."""

    sandbox: Sandbox
    github: GitHub
    clock: ManualClock
    store: Store
    activity: ActivityLog
    lines: list[str]

    def polls(self, owners: tuple[str, ...] = (OWNER,)) -> list[RepositoryPoll]:
        """A poll of each repository, sharing one listing of ``owners`` (none: each its own)."""
        listings = None
        if owners:
            listings = OwnerListings(
                self.github,
                owners,
                max_age=0.9 * POLL_SECONDS,
                clock=self.clock,
                activity=self.activity,
                recheck_seconds=RECHECK_SECONDS,
            )
        parts = self.parts(listings)
        return [RepositoryPoll(OWNER, name, self.github, parts, HOOKS) for name in NAMES]

    def parts(self, listings: OwnerListings | None) -> PollParts:
        rules = ReadyRules.of(
            ready_label=READY, in_progress_label="in-progress", excluded_labels=[], settle_seconds=0
        )
        return PollParts(
            store=self.store,
            rules=rules,
            activity=self.activity,
            clock=self.clock,
            listings=listings,
        )

    def cycle(
        self, polls: list[RepositoryPoll], *, fresh: bool = False
    ) -> dict[str, list[int | None]]:
        """One cycle, a poll interval after the last: the issues each poll takes."""
        self.clock.advance(POLL_SECONDS)
        return {poll.name: [p.number for p in poll(fresh=fresh)] for poll in polls}

    def requests(self, polls: list[RepositoryPoll], *, fresh: bool = False) -> tuple[int, int]:
        """(requests, 304s) one cycle costs."""
        before = self.github.request_counts()
        self.cycle(polls, fresh=fresh)
        after = self.github.request_counts()
        return after.sent - before.sent, after.not_modified - before.not_modified

    def issue(self, name: str, title: str, labels: list[str]) -> int:
        repo = self.sandbox.github("ada").get_repo(f"{OWNER}/{name}")
        return int(repo.create_issue(title, labels=labels).number)

    def block(self, name: str, blocked: int, blocker: int) -> None:
        repo = self.sandbox.github("ada").get_repo(f"{OWNER}/{name}")
        blocker_id = repo.get_issue(blocker).id
        repo._requester.requestJsonAndCheck(  # no PyGithub method for GitHub's dependencies
            "POST",
            f"{repo.url}/issues/{blocked}/dependencies/blocked_by",
            input={"issue_id": blocker_id},
        )


@pytest.fixture
def acme(sandbox: Sandbox, tmp_path: Path) -> Iterator[Owner]:
    source = tmp_path / "more"
    source.mkdir()
    (source / "README.md").write_text("# more\n")
    for name in NAMES[1:]:
        sandbox.client.add_repo(OWNER, name, source, {})
    every = {f"{OWNER}/{name}": "write" for name in NAMES}
    sandbox.client.add_user("wes", TOKENS["wes"], every)
    sandbox.client.add_user("ada", TOKENS["ada"], dict.fromkeys(every, "admin"))
    github, _seen = adapter(sandbox, "wes")
    clock = ManualClock(datetime.now(UTC))
    store = Store.open(f"sqlite:///{tmp_path / 'listing.db'}")
    lines: list[str] = []
    activity = ActivityLog(
        store,
        daemon="d",
        directory=tmp_path / "activity",
        clock=clock,
        scrub=Scrubber([]),
        progress=lines.append,
    )
    try:
        yield Owner(sandbox, github, clock, store, activity, lines)
    finally:
        store.close()


def test_an_idle_cycle_costs_two_requests_for_the_owner_however_many_repositories_it_has(
    acme: Owner,
) -> None:
    blocker = acme.issue("gadgets", "Groundwork", [])
    blocked = acme.issue("gadgets", "Build on it", [READY])
    acme.block("gadgets", blocked, blocker)
    listed, alone = acme.polls(), acme.polls(owners=())
    acme.cycle(listed)
    acme.cycle(alone)

    assert acme.requests(listed) == (2, 2)
    # Each repository on its own: its Ready and in-progress lists, and the blocked issue's
    # labeller, the labeller's role and its blockers (and more), read every cycle.
    sent, not_modified = acme.requests(alone)
    assert sent == not_modified >= 2 * len(NAMES) + 3


def test_an_issue_labelled_ready_in_any_repository_is_taken_by_its_own_poll_next_cycle(
    acme: Owner,
) -> None:
    polls = acme.polls()
    assert acme.cycle(polls) == {name: [] for name in NAMES}

    number = acme.issue("sprockets", "Add a", [READY])

    assert acme.cycle(polls) == {name: [number] if name == "sprockets" else [] for name in NAMES}


def test_a_closed_blocker_is_seen_after_recheck_seconds_not_every_cycle(acme: Owner) -> None:
    blocker = acme.issue("cogs", "Groundwork", [])
    blocked = acme.issue("cogs", "Build on it", [READY])
    acme.block("cogs", blocked, blocker)
    polls = acme.polls()
    assert acme.cycle(polls)["cogs"] == []
    acme.sandbox.github("ada").get_repo(f"{OWNER}/cogs").get_issue(blocker).edit(state="closed")

    assert acme.cycle(polls)["cogs"] == []  # the listing shows no change: believed a while

    acme.clock.advance(RECHECK_SECONDS)
    assert acme.cycle(polls)["cogs"] == [blocked]


def test_a_look_afresh_reads_a_passed_over_issue_again_at_once(acme: Owner) -> None:
    blocker = acme.issue("cogs", "Groundwork", [])
    blocked = acme.issue("cogs", "Build on it", [READY])
    acme.block("cogs", blocked, blocker)
    polls = acme.polls()
    acme.cycle(polls)
    acme.sandbox.github("ada").get_repo(f"{OWNER}/cogs").get_issue(blocker).edit(state="closed")

    # A webhook delivery for another repository of the owner: a look afresh at the owner.
    gadgets = next(poll for poll in polls if poll.name == "gadgets")
    gadgets(fresh=True)

    assert acme.cycle(polls)["cogs"] == [blocked]


def test_an_owner_github_will_not_list_at_once_is_listed_repository_by_repository_said_once(
    acme: Owner, tmp_path: Path
) -> None:
    source = tmp_path / "notes"
    source.mkdir()
    (source / "README.md").write_text("# notes\n")
    acme.sandbox.client.add_repo("wes", "notes", source, {})
    acme.sandbox.client.add_user("ada", TOKENS["ada"], {"wes/notes": "admin"})
    number = int(
        acme.sandbox.github("ada").get_repo("wes/notes").create_issue("Tidy", labels=[READY]).number
    )
    ada, _seen = adapter(acme.sandbox, "ada")
    # wes is a user, not the token's own: GitHub answers its listing 404.
    listings = OwnerListings(
        ada, ["wes"], max_age=POLL_SECONDS, clock=acme.clock, activity=acme.activity
    )
    notes = RepositoryPoll("wes", "notes", ada, acme.parts(listings), HOOKS)

    assert [pickup.number for pickup in notes()] == [number]
    assert [pickup.number for pickup in notes()] == [number]

    assert not listings.covers("wes")
    refusals = [line for line in acme.lines if "will not list the issues of wes" in line]
    assert len(refusals) == 1
    assert "each of its repositories is listed on its own" in refusals[0]
