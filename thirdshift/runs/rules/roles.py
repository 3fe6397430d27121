"""Who may do what on a repository, as GitHub answers it: the token's own role (pre-flight and
doctor) and the roles of the people whose words reach a prompt or approve a text."""

from __future__ import annotations

from typing import Protocol

from thirdshift.errors import GitHubError

PERMISSIONS_THAT_PUSH = frozenset({"admin", "maintain", "write"})


class PermissionReads(Protocol):
    def permission(self, owner: str, name: str, login: str) -> str:
        """The login's role on the repository; raises ``GitHubError`` when GitHub will not
        say (a 404 for no collaborator, a 403 for a token that may not see it)."""
        ...


def is_integration(login: str) -> bool:
    """Whether ``login`` is a GitHub App's or a workflow's (``<slug>[bot]``), not a person's."""
    return login.endswith("[bot]")


def token_role(github: PermissionReads, owner: str, name: str, login: str) -> str:
    """The role of the token's own user (``login``) on the repository. GitHub shows a
    permission only to those who can push, so a refusal (403) is the answer "no push"; an App
    or a workflow is no collaborator (404), so its token's own permissions decide, and a push or
    a label it may not make fails naming itself. Any other 404 (no such repository) raises."""
    try:
        return github.permission(owner, name, login)
    except GitHubError as error:
        if error.status == 404 and is_integration(login):
            return "write"
        if error.status == 403:
            return "no push"
        raise


class Roles:
    """Each login's role on one repository, asked once; one GitHub cannot tell counts as
    ``none``."""

    def __init__(self, github: PermissionReads, owner: str, name: str) -> None:
        self._github = github
        self._owner = owner
        self._name = name
        self._known: dict[str, str] = {}

    def __call__(self, login: str) -> str:
        if login not in self._known:
            try:
                self._known[login] = self._github.permission(self._owner, self._name, login)
            except GitHubError:
                self._known[login] = "none"
        return self._known[login]


def same_login(author: str, me: str) -> bool:
    """Whether ``author`` is thirdshift's own login (GitHub logins ignore case); an unknown
    author never is."""
    return bool(author) and author.lower() == me.lower()
