"""``OwnerListings`` with a scripted GitHub: one ask serves a cycle, a look afresh asks again, a
refusal turns the owner over to per-repository listing (said once) while a server error is
raised for the poll to fail and try again (adr/0048)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from thirdshift.clock import ManualClock
from thirdshift.daemon import ActivityLog
from thirdshift.daemon.listing import OwnerListings
from thirdshift.errors import GitHubError, RateLimited
from thirdshift.records import IssueSummary, OwnerIssue
from thirdshift.scrub import Scrubber
from thirdshift.store import Store

NOW = datetime(2026, 12, 6, tzinfo=UTC)


def entry(repository: str, number: int) -> OwnerIssue:
    summary = IssueSummary(number, "t", "open", ("ready",), False, NOW, "https://x/1")
    return OwnerIssue(repository, summary)


@dataclass
class ScriptedOwnerIssues:
    answers: list[tuple[OwnerIssue, ...] | GitHubError]
    asked: int = 0
    created: list[bool] = field(default_factory=list)
    since: list[datetime | None] = field(default_factory=list)

    def owner_issues(
        self,
        owner: str,
        *,
        label: str | None,
        state: str,
        created: bool = False,
        since: datetime | None = None,
    ) -> tuple[OwnerIssue, ...]:
        self.asked += 1
        self.created.append(created)
        self.since.append(since)
        answer = self.answers[min(self.asked, len(self.answers)) - 1]
        if isinstance(answer, GitHubError):
            raise answer
        return answer


def listings(
    tmp_path: Path, github: ScriptedOwnerIssues, lines: list[str]
) -> tuple[OwnerListings, ManualClock, Store]:
    clock = ManualClock(NOW)
    store = Store.open(f"sqlite:///{tmp_path / 'l.db'}")
    activity = ActivityLog(
        store,
        daemon="d",
        directory=tmp_path,
        clock=clock,
        scrub=Scrubber([]),
        progress=lines.append,
    )
    found = OwnerListings(github, ["Acme"], max_age=9, clock=clock, activity=activity)
    return found, clock, store


def test_one_answer_serves_every_repository_of_the_owner_until_it_is_a_cycle_old(
    tmp_path: Path,
) -> None:
    github = ScriptedOwnerIssues([(entry("acme/a", 3), entry("acme/b", 1), entry("acme/a", 2))])
    found, clock, store = listings(tmp_path, github, [])

    assert [i.number for i in found.labelled("acme", "a", "ready", "open", fresh=False) or ()] == [
        2,
        3,
    ]
    assert [i.number for i in found.labelled("ACME", "B", "ready", "open", fresh=False) or ()] == [
        1
    ]
    assert found.labelled("acme", "c", "ready", "open", fresh=False) == ()
    assert github.asked == 1
    clock.advance(9)
    found.labelled("acme", "a", "ready", "open", fresh=False)
    assert found.generation("acme") == 0
    found.labelled("acme", "a", "ready", "open", fresh=True)
    assert github.asked == 3
    assert found.generation("Acme") == 1  # what polls remember of the owner is read again
    assert found.labelled("other", "x", "ready", "open", fresh=False) is None  # not watched
    store.close()


def test_a_refusal_turns_the_owner_to_its_repositories_said_once_and_a_server_error_is_raised(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    github = ScriptedOwnerIssues([GitHubError("GitHub answered 502", 502), GitHubError("no", 404)])
    found, _clock, store = listings(tmp_path, github, lines)

    with pytest.raises(GitHubError):
        found.labelled("acme", "a", "ready", "open", fresh=False)
    assert found.covers("acme")
    assert not lines
    assert found.labelled("acme", "a", "ready", "open", fresh=False) is None
    assert found.own_open_pulls("acme", "a", fresh=True) is None
    assert not found.covers("acme")
    assert github.asked == 2
    assert len(lines) == 1
    assert "will not list the issues of acme" in lines[0].lower()
    store.close()


def test_own_open_pulls_come_from_the_listing_of_what_the_tokens_user_opened(
    tmp_path: Path,
) -> None:
    pull = OwnerIssue(
        "acme/a",
        IssueSummary(7, "t", "open", (), True, NOW, "https://x/7"),
        author="factory",
        draft=False,
    )
    github = ScriptedOwnerIssues([(pull, entry("acme/a", 8))])
    found, _clock, store = listings(tmp_path, github, [])

    assert found.own_open_pulls("acme", "a", fresh=False) == (pull,)
    assert github.created == [True]
    store.close()


def test_a_spent_rate_limit_fails_the_poll_and_a_refused_owner_is_asked_again_later(
    tmp_path: Path,
) -> None:
    lines: list[str] = []
    spent = RateLimited("GitHub's rate limit is spent", 403, "", None)
    refused = GitHubError("no", 404)
    github = ScriptedOwnerIssues([spent, refused, refused, (entry("acme/a", 5),)])
    found, clock, store = listings(tmp_path, github, lines)

    with pytest.raises(RateLimited):
        found.labelled("acme", "a", "ready", "open", fresh=False)
    assert found.covers("acme")
    assert found.labelled("acme", "a", "ready", "open", fresh=False) is None
    clock.advance(299)
    assert found.labelled("acme", "a", "ready", "open", fresh=False) is None
    assert github.asked == 2
    clock.advance(1)
    assert found.labelled("acme", "a", "ready", "open", fresh=False) is None  # refused again
    clock.advance(300)
    listed = found.labelled("acme", "a", "ready", "open", fresh=False) or ()
    assert [issue.number for issue in listed] == [5]
    assert len(lines) == 1  # one run of refusals, said once
    store.close()


def test_the_in_progress_listing_asks_only_for_what_changed_since_a_day_before_the_start(
    tmp_path: Path,
) -> None:
    github = ScriptedOwnerIssues([()])
    found, _clock, store = listings(tmp_path, github, [])

    found.labelled("acme", "a", "in-progress", "all", fresh=False)
    found.labelled("acme", "a", "ready", "open", fresh=False)

    assert github.since == [NOW - timedelta(days=1), None]
    store.close()
