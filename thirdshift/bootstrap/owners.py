"""A daemon's owners (``--owner``, ``owners``): which to watch, and the ``OwnerWatch`` that
lists their repositories with the token's adapter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from thirdshift.bootstrap.credentials import GitHubAccess
from thirdshift.daemon import ActivityLog, RepositoryPoll
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
    watched by name (never started twice), the adapter the daemon already has (None: make
    one), and what makes the Poll of a repository with an adapter."""

    owners: Sequence[str]
    fixed: Sequence[str]
    adapter: GitHub | None
    make_poll: Callable[[str, str, GitHub], RepositoryPoll]


def owner_watch(
    settings: Settings, access: GitHubAccess, activity: ActivityLog, finding: OwnerFinding
) -> OwnerWatch:
    """What lists the owners' repositories: the token's listing of all it may read. A GitHub
    App's installation may not list them (GitHub refuses its token): a ConfigError naming the
    fix."""
    if settings.github_app_id is not None:
        raise ConfigError(
            f"--owner {finding.owners[0]} (or owners): a GitHub App's installation cannot list "
            "an owner's repositories here; name them with --repo (or repositories), or run "
            "the daemon with a token (GITHUB_TOKEN)"
        )
    github = finding.adapter or access.github(finding.owners[0], "")
    return OwnerWatch(
        github,
        finding.owners,
        settings.excluded_repositories,
        lambda owner, name: finding.make_poll(owner, name, github),
        activity,
        fixed=finding.fixed,
    )
