"""The repositories a daemon watches by name (``--repo``, ``repositories``): each once, each
checked to be one the credentials' user may push to, by GitHub's spelling, with the adapter
that acts on it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from thirdshift.bootstrap.credentials import GitHubAccess
from thirdshift.errors import ConfigError, NotFound
from thirdshift.github import GitHub
from thirdshift.runs import PERMISSIONS_THAT_PUSH, token_role
from thirdshift.settings import Settings, check_repository_name


def watched_names(settings: Settings, repositories: Sequence[str]) -> list[str]:
    """The repositories to watch, each once: GitHub ignores case, so one poll each."""
    spelled: dict[str, str] = {}
    for full_name in [*settings.repositories, *repositories]:
        spelled.setdefault(full_name.lower(), full_name)
    return list(spelled.values())


@dataclass(frozen=True)
class Watched:
    """The watched repositories by GitHub's spelling, each with the adapter that acts on it,
    and every adapter once."""

    repositories: tuple[tuple[str, str, GitHub], ...]
    adapters: tuple[GitHub, ...]


def checked_repositories(names: Sequence[str], access: GitHubAccess) -> Watched:
    """Each repository the daemon may push to, by GitHub's spelling; a ConfigError for one it
    cannot see or push to. One adapter per set of credentials: a GitHub App has one
    installation per account, so repositories of several owners may need several."""
    adapters: dict[int | None, GitHub] = {}
    canonical: list[tuple[str, str, GitHub]] = []
    for full_name in names:
        owner, name = check_repository_name(full_name)
        credentials = access.credentials(owner, name)
        github = adapters.get(credentials.installation)
        if github is None:
            github = access.adapter(credentials)
            adapters[credentials.installation] = github
        check_write(github, owner, name)
        found = github.repo(owner, name)
        # GitHub's spelling, for paths and records.
        canonical.append((found.owner, found.name, github))
    return Watched(tuple(canonical), tuple(adapters.values()))


def check_write(github: GitHub, owner: str, name: str) -> None:
    """A ConfigError unless the credentials' user may push to ``owner/name``."""
    full_name = f"{owner}/{name}"
    login = github.authenticated_login()
    try:
        role = token_role(github, owner, name, login)
    except NotFound as error:
        raise ConfigError(
            f"GitHub has no repository {full_name}, or the token's user {login} cannot "
            "see it; check the name (--repo or the repositories setting) and the token"
        ) from error
    if role not in PERMISSIONS_THAT_PUSH:
        raise ConfigError(
            f"the token's user {login} has {role} permission on {full_name}; the daemon "
            "needs write there, so use a token with write access or drop the repository"
        )
