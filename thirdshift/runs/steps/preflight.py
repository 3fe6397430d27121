"""Pre-flight: before anything is created or labelled, the Harness is installed, the token may
push, and the issue is an open issue."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Protocol

from thirdshift.errors import ThirdshiftError
from thirdshift.harness_registry import find_harness, harness_not_found
from thirdshift.issue_url import IssueRef
from thirdshift.records import IssueInfo, RepoInfo
from thirdshift.runs.ports import Identity, IssueLabels, SessionSource
from thirdshift.runs.rules.roles import PERMISSIONS_THAT_PUSH, token_role


class PreflightReads(Identity, IssueLabels, Protocol):
    """Who the token is and what it may do, the repository and the issue."""


def check_harness_and_token(
    github: Identity,
    source: SessionSource,
    environ: Mapping[str, str],
    owner: str,
    name: str,
    *,
    needs: str,
) -> None:
    """Pre-flight of anything that starts a session and writes to GitHub: the Harness's CLI is
    on PATH and the token may push (``needs`` says what for, in the refusal)."""
    if shutil.which(source.executable, path=environ.get("PATH")) is None:
        entry = find_harness(source.harness_name)
        if entry is None:  # not a Harness of the registry: only PATH was searched
            raise ThirdshiftError(
                f"{source.executable} (the {source.harness_name} Harness) is not on PATH; "
                "install it or choose another with --harness"
            )
        raise ThirdshiftError(
            harness_not_found(entry, "the Run's Harness", "choose another with --harness")
        )
    if (problem := source.key_problem()) is not None:
        raise ThirdshiftError(problem)
    login = github.authenticated_login()
    permission = token_role(github, owner, name, login)
    if permission not in PERMISSIONS_THAT_PUSH:
        raise ThirdshiftError(
            f"the token's user {login} has {permission} permission on {owner}/{name}; "
            f"thirdshift needs write {needs}, so use a token with write access"
        )


def preflight(
    github: PreflightReads, source: SessionSource, environ: Mapping[str, str], ref: IssueRef
) -> tuple[RepoInfo, IssueInfo]:
    """The repository and the issue, once the Harness and the token pass."""
    check_harness_and_token(github, source, environ, ref.owner, ref.repo, needs="to push")
    repo = github.repo(ref.owner, ref.repo)
    issue = github.issue(ref.owner, ref.repo, ref.number)
    if issue.is_pull_request:
        raise ThirdshiftError(f"#{ref.number} is a pull request, not an issue")
    if issue.state != "open":
        raise ThirdshiftError(
            f"issue #{ref.number} is {issue.state}; reopen it to run thirdshift on it"
        )
    return repo, issue
