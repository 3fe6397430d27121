"""A daemon's owners (``--owner``, ``owners``): which to watch, the adapter that lists them, the
``OwnerWatch`` that lists their repositories and the ``OwnerListings`` of their issues."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from thirdshift.bootstrap.credentials import GitHubAccess
from thirdshift.clock import Clock
from thirdshift.daemon import ActivityLog, RepositoryPoll
from thirdshift.daemon.listing import OwnerListings
from thirdshift.daemon.owners import OwnerWatch
from thirdshift.errors import ConfigError
from thirdshift.github import GitHub
from thirdshift.settings import Settings


def watched_owners(settings: Settings, owners: Sequence[str]) -> list[str]:
    """The owners whose repositories to watch (``owners`` and the setting's), each once:
    GitHub ignores case."""
    spelled: dict[str, str] = {}
    for owner in [*settings.owners, *owners]:
        spelled.setdefault(owner.lower(), owner)
    return list(spelled.values())


@dataclass(frozen=True)
class OwnerFinding:
    """What finding the owners' repositories starts from: the owners, the repositories
    watched by name (never started twice), the adapter that lists them (``owners_adapter``),
    and what makes the Poll of a repository with an adapter."""

    owners: Sequence[str]
    fixed: Sequence[str]
    adapter: GitHub
    make_poll: Callable[[str, str, GitHub], RepositoryPoll]


def owners_adapter(
    settings: Settings, access: GitHubAccess, owners: Sequence[str], adapter: GitHub | None
) -> GitHub:
    """The adapter that lists the owners' repositories and issues: ``adapter`` (the one the
    daemon already has), or a new one. A GitHub App's installation may not list them (GitHub
    refuses its token): a ConfigError naming the fix."""
    if settings.github_app_id is not None:
        raise ConfigError(
            f"--owner {owners[0]} (or owners): a GitHub App's installation cannot list "
            "an owner's repositories here; name them with --repo (or repositories), or run "
            "the daemon with a token (GITHUB_TOKEN)"
        )
    return adapter or access.github(owners[0], "")


def owner_listings(
    settings: Settings, github: GitHub, owners: Sequence[str], clock: Clock, activity: ActivityLog
) -> OwnerListings | None:
    """The owners' issue listings the polls of their repositories share (None: off). An
    answer serves the polls of one cycle: it is kept for most of a poll interval."""
    if not settings.owner_listing or not owners:
        return None
    max_age = 0.9 * settings.poll_seconds
    return OwnerListings(
        github,
        owners,
        max_age=max_age,
        clock=clock,
        activity=activity,
        recheck_seconds=settings.owner_recheck_seconds,
    )


def owner_watch(settings: Settings, activity: ActivityLog, finding: OwnerFinding) -> OwnerWatch:
    """What lists the owners' repositories: the token's listing of all it may read, through
    ``finding.adapter``."""
    github = finding.adapter
    return OwnerWatch(
        github,
        finding.owners,
        settings.excluded_repositories,
        lambda owner, name: finding.make_poll(owner, name, github),
        activity,
        fixed=finding.fixed,
    )
