"""Watching owners (``--owner``, ``owners``): every repository of a user or organisation that
the token may push to, archived and disabled ones and ``excluded_repositories`` aside, found
again every ``owner_refresh_seconds`` from one listing of the repositories the token may read.

``owned_repositories`` is the rule, pure; ``OwnerWatch`` keeps what the last listing found and
tells its daemon which repositories to start and stop polling, each said once in the Activity
log.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from thirdshift.daemon.activity import ActivityLog
from thirdshift.daemon.poll import RepositoryPoll
from thirdshift.records import ListedRepository


class OwnerListing(Protocol):
    def readable_repositories(self) -> tuple[ListedRepository, ...]:
        """Every repository the token's user may read, of every owner (conditionally)."""
        ...


@dataclass(frozen=True)
class OwnedRepositories:
    """What a listing holds for the watched owners: the repositories to watch, and why each
    other one of theirs is left out."""

    watched: tuple[ListedRepository, ...]
    left_out: tuple[tuple[str, str], ...]


def owned_repositories(
    listed: Sequence[ListedRepository], owners: Sequence[str], excluded: Sequence[str]
) -> OwnedRepositories:
    """The repositories of ``owners`` (any case) to watch, and the others of theirs with the
    reason: archived, disabled, matched by an ``excluded`` glob on ``OWNER/NAME`` (any case), or
    one the token may not push to."""
    wanted = {owner.lower() for owner in owners}
    patterns = [pattern.lower() for pattern in excluded]
    watched: list[ListedRepository] = []
    left_out: list[tuple[str, str]] = []
    for repository in listed:
        if repository.owner.lower() not in wanted:
            continue
        name = repository.full_name
        matched = next((p for p in patterns if fnmatch.fnmatchcase(name.lower(), p)), None)
        if repository.archived:
            left_out.append((name, "it is archived"))
        elif repository.disabled:
            left_out.append((name, "it is disabled"))
        elif matched is not None:
            left_out.append((name, f"excluded_repositories has {matched}"))
        elif not repository.can_push:
            left_out.append((name, "the token may not push to it"))
        else:
            watched.append(repository)
    return OwnedRepositories(tuple(watched), tuple(left_out))


@dataclass(frozen=True)
class OwnerChanges:
    """What a refresh changes: the polls to start, and the repositories to stop polling."""

    started: tuple[RepositoryPoll, ...]
    stopped: tuple[str, ...]


class OwnerWatch:
    """The repositories of ``owners`` as the last listing found them. ``make_poll`` builds the
    poll of a newly found repository; ``fixed`` are the repositories watched by name
    (``--repo``), which a listing never starts twice nor stops."""

    def __init__(
        self,
        listing: OwnerListing,
        owners: Sequence[str],
        excluded: Sequence[str],
        make_poll: Callable[[str, str], RepositoryPoll],
        activity: ActivityLog,
        fixed: Sequence[str] = (),
    ) -> None:
        self.owners = tuple(owners)
        self._listing = listing
        self._excluded = tuple(excluded)
        self._make_poll = make_poll
        self._activity = activity
        self._fixed = {name.lower() for name in fixed}
        self._found: dict[str, str] = {}  # lower-case name -> GitHub's spelling
        self._said: dict[str, str] = {}  # lower-case name -> the reason last said

    def refresh(self) -> OwnerChanges:
        """List again; the polls to start and the names to stop polling. A listing that fails
        raises (GitHubError) and changes nothing: the next refresh tries again."""
        owned = owned_repositories(
            self._listing.readable_repositories(), self.owners, self._excluded
        )
        found = {
            r.full_name.lower(): r for r in owned.watched if r.full_name.lower() not in self._fixed
        }
        started = tuple(
            self._make_poll(r.owner, r.name) for key, r in found.items() if key not in self._found
        )
        stopped = tuple(name for key, name in self._found.items() if key not in found)
        for name, reason in owned.left_out:
            if self._said.get(name.lower()) != reason and name.lower() not in self._fixed:
                self._said[name.lower()] = reason
                self._activity.line("owner", f"not watching {name}: {reason}")
        for key in found:
            self._said.pop(key, None)
        listed = {r.owner.lower() for r in owned.watched}
        listed |= {name.split("/", 1)[0].lower() for name, _ in owned.left_out}
        for owner in self.owners:
            empty = f"owner:{owner.lower()}"
            if owner.lower() not in listed and self._said.get(empty) is None:
                self._said[empty] = "empty"
                self._activity.line(
                    "owner",
                    f"the token may read no repository of {owner}: check the name, and that "
                    "the token's user is a member there (or the owner)",
                )
            elif owner.lower() in listed:
                self._said.pop(empty, None)
        self._found = {key: r.full_name for key, r in found.items()}
        return OwnerChanges(started, stopped)
