"""Owner listing (adr/0048): the Ready and ``in-progress`` issues, and thirdshift's own open pull
requests, of every watched owner from one conditional listing per owner, shared by the polls of
all its repositories. An idle cycle then costs two requests an owner, however many repositories
it has, where listing each repository costs two a repository.

An answer younger than ``max_age`` (just under the poll interval) serves every poll of the
cycle; a poll told to look afresh (a webhook delivery's wake, an issue as it settles) asks again,
which costs a 304 when nothing changed. The ``in-progress`` issues are listed open and closed,
but only those changed since a day before the daemon started: a closed one matters to a poll
only once a Run of ours worked on it, and closing it moves its stamp. An owner GitHub will not
list this way (a user other than the token's own: 404; an installation token: 403) is listed
repository by repository, said once in the Activity log, and asked again every
``recheck_seconds``; a rate limit is no refusal, and fails the poll as any other.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from thirdshift.clock import Clock
from thirdshift.daemon.activity import ActivityLog
from thirdshift.errors import GitHubError, RateLimited
from thirdshift.records import IssueSummary, OwnerIssue

REFUSALS = (403, 404, 410, 422)
"""GitHub's answers that say this owner cannot be listed this way (not that it failed now)."""


class OwnerIssuesGitHub(Protocol):
    def owner_issues(
        self,
        owner: str,
        *,
        label: str | None,
        state: str,
        created: bool = False,
        since: datetime | None = None,
    ) -> tuple[OwnerIssue, ...]:
        """The issues and pull requests across ``owner``'s repositories carrying ``label`` (None:
        any) in ``state``; ``created``: only the token's user's own; ``since``: only those
        changed since then. Asked conditionally."""
        ...


@dataclass(frozen=True)
class _Answer:
    at: float  # the clock's monotonic when GitHub was asked
    by_repository: dict[str, tuple[OwnerIssue, ...]]  # lower-case OWNER/NAME -> its entries


class OwnerListings:
    """The listings of ``owners`` (any case) through ``github``, each answer kept ``max_age``
    seconds. What a poll reads of a passed-over issue that the listing cannot show (its
    blockers, its labeller's role) it believes ``recheck_seconds`` while the issue is unchanged,
    and until ``generation(owner)`` moves: it does at each look afresh, so a webhook delivery
    for any repository of the owner has them read again."""

    def __init__(
        self,
        github: OwnerIssuesGitHub,
        owners: Sequence[str],
        *,
        max_age: float,
        clock: Clock,
        activity: ActivityLog,
        recheck_seconds: float = 300.0,
    ) -> None:
        self.recheck_seconds = recheck_seconds
        self._github = github
        self._owners = {owner.lower() for owner in owners}
        self._max_age = max_age
        self._clock = clock
        self._activity = activity
        self._lock = threading.Lock()
        self._answers: dict[tuple[str, str | None, str, bool], _Answer] = {}
        self._refused: dict[str, float] = {}  # owner -> when GitHub refused it (monotonic)
        self._generations: dict[str, int] = defaultdict(int)
        self._said_refused: set[str] = set()
        # Fixed for the daemon's life, so the listing's address (and its ETag) stays the same.
        self._since = clock.now() - timedelta(days=1)

    def covers(self, owner: str) -> bool:
        """Whether ``owner``'s repositories are polled through its listing (a refused owner is
        asked again once ``recheck_seconds`` have passed)."""
        with self._lock:
            return self._covers(owner.lower())

    def _covers(self, owner: str) -> bool:
        refused = self._refused.get(owner)
        if refused is not None and self._clock.monotonic() - refused >= self.recheck_seconds:
            del self._refused[owner]
            refused = None
        return owner in self._owners and refused is None

    def generation(self, owner: str) -> int:
        with self._lock:
            return self._generations[owner.lower()]

    def labelled(
        self, owner: str, name: str, label: str, state: str, *, fresh: bool
    ) -> tuple[IssueSummary, ...] | None:
        """``owner/name``'s issues (pull requests too, marked) carrying ``label`` in ``state``,
        lowest number first, from its owner's listing; None when the owner is not listed so
        (its repository is then asked itself)."""
        entries = self._entries(owner, name, (label, state, False), fresh)
        if entries is None:
            return None
        return tuple(sorted((entry.issue for entry in entries), key=lambda i: i.number))

    def own_open_pulls(
        self, owner: str, name: str, *, fresh: bool
    ) -> tuple[OwnerIssue, ...] | None:
        """The open pull requests of ``owner/name`` that the token's user opened, from its
        owner's listing of what that user opened; None when the owner is not listed so."""
        entries = self._entries(owner, name, (None, "open", True), fresh)
        if entries is None:
            return None
        return tuple(entry for entry in entries if entry.issue.is_pull_request)

    def _entries(
        self, owner: str, name: str, what: tuple[str | None, str, bool], fresh: bool
    ) -> tuple[OwnerIssue, ...] | None:
        key = (owner.lower(), *what)
        # One lock for the ask too: two polls of one owner must not both ask for one answer.
        # (The daemon's polls run one at a time on its scheduler's one worker.)
        with self._lock:
            if not self._covers(owner.lower()):
                return None
            answer = self._answers.get(key)
            now = self._clock.monotonic()
            if answer is None or fresh or now - answer.at >= self._max_age:
                label, state, created = what
                since = self._since if state == "all" else None
                try:
                    listed = self._github.owner_issues(
                        owner, label=label, state=state, created=created, since=since
                    )
                except RateLimited:
                    raise  # the budget is spent, not the owner refused: the poll fails
                except GitHubError as error:
                    if error.status not in REFUSALS:
                        raise
                    self._refuse(owner, error)
                    return None
                grouped: dict[str, list[OwnerIssue]] = defaultdict(list)
                for entry in listed:
                    grouped[entry.repository.lower()].append(entry)
                self._said_refused.discard(owner.lower())
                answer = _Answer(now, {repo: tuple(found) for repo, found in grouped.items()})
                self._answers[key] = answer
                if fresh:
                    self._generations[owner.lower()] += 1
            return answer.by_repository.get(f"{owner}/{name}".lower(), ())

    def _refuse(self, owner: str, error: GitHubError) -> None:
        """Called with the lock held. Said once for a run of refusals: an owner refused again
        when asked after ``recheck_seconds`` is not said again."""
        key = owner.lower()
        said = key in self._said_refused
        self._refused[key] = self._clock.monotonic()
        self._said_refused.add(key)
        self._answers = {k: v for k, v in self._answers.items() if k[0] != key}
        if said:
            return
        self._activity.line(
            "owner",
            f"GitHub will not list the issues of {owner} across its repositories ({error}): "
            "each of its repositories is listed on its own, two requests a repository each "
            "poll instead of two for the owner, and the owner's listing is tried again every "
            f"{self.recheck_seconds:g}s. An organisation is listed when the token's user is a "
            "member of it; a user only when it is the token's own",
        )
