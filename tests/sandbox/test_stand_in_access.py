"""Authentication and permissions of the GitHub stand-in, over REST and over git."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest
from github import BadCredentialsException, GithubException, UnknownObjectException

from tests.support.git_client import git_as
from tests.support.stand_in_scenario import FULL_NAME, TOKENS, Sandbox


def test_a_wrong_token_is_refused_with_bad_credentials(sandbox: Sandbox) -> None:
    """An unknown token gets 401 ``Bad credentials``, as on GitHub."""
    with pytest.raises(BadCredentialsException) as caught:
        sandbox.github(token="not-a-token").get_repo(FULL_NAME)
    assert caught.value.status == 401
    assert caught.value.data["message"] == "Bad credentials"
    assert "documentation_url" in caught.value.data


def test_a_repository_the_user_cannot_see_is_not_found(sandbox: Sandbox) -> None:
    """A user without any role on a private repository gets 404, not 403."""
    with pytest.raises(UnknownObjectException) as caught:
        sandbox.github("olga").get_repo(FULL_NAME)
    assert caught.value.status == 404
    assert caught.value.data["message"] == "Not Found"


def test_bearer_and_token_schemes_both_authenticate(sandbox: Sandbox) -> None:
    """``Authorization: Bearer X`` works as ``token X`` does."""
    request = urllib.request.Request(f"{sandbox.stand_in.api_url}/user")
    request.add_header("Authorization", f"Bearer {TOKENS['wes']}")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.loads(response.read())["login"] == "wes"


def test_the_authenticated_user_is_the_owner_of_the_token(sandbox: Sandbox) -> None:
    """``GET /user`` names whoever the token belongs to."""
    assert sandbox.github("tia").get_user().login == "tia"


def test_a_triager_may_label_and_a_reader_may_only_comment(sandbox: Sandbox) -> None:
    """Triage applies labels (recorded as theirs); read can open issues and comment."""
    issue = sandbox.github("rex").get_repo(FULL_NAME).create_issue("Crash on start")
    issue.create_comment("Seen it twice")
    triaged = sandbox.github("tia").get_repo(FULL_NAME).get_issue(issue.number)
    triaged.add_to_labels("bug")
    events = [(e.event, e.actor.login, e.label.name) for e in triaged.get_events()]
    assert events == [("labeled", "tia", "bug")]


def test_permissions_report_role_names_as_github_does(sandbox: Sandbox) -> None:
    """Legacy permission and role name for every role (triage reads as ``read``)."""
    repo = sandbox.github("ada").get_repo(FULL_NAME)
    seen = {
        login: (repo.get_collaborator_permission(login), repo.get_collaborator_role_name(login))
        for login in ("ada", "wes", "tia", "rex", "olga")
    }
    assert seen == {
        "ada": ("admin", "admin"),
        "wes": ("write", "write"),
        "tia": ("read", "triage"),
        "rex": ("read", "read"),
        "olga": ("none", "none"),
    }


def test_a_reader_cannot_merge(sandbox: Sandbox) -> None:
    """Merging needs write: a reader gets 403."""
    sha = sandbox.push("agent/x", {"x.txt": "x\n"})
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    pull = repo.create_pull(title="X", body="", head="agent/x", base="main")
    with pytest.raises(GithubException) as caught:
        sandbox.github("rex").get_repo(FULL_NAME).get_pull(pull.number).merge(sha=sha)
    assert caught.value.status == 403


def _git(args: list[str], cwd: Path, token: str | None = None) -> subprocess.CompletedProcess[str]:
    return git_as(token, *args, cwd=cwd, check=False)


def test_git_over_http_needs_a_token_and_write_to_push(sandbox: Sandbox, tmp_path: Path) -> None:
    """No credentials: 401 challenge; read token: clone works, push is refused."""
    url = f"{sandbox.stand_in.web_url}/{FULL_NAME}.git"
    anonymous = _git(["ls-remote", url], tmp_path)
    assert anonymous.returncode != 0
    clone = tmp_path / "clone"
    assert _git(["clone", "--quiet", url, str(clone)], tmp_path, TOKENS["rex"]).returncode == 0
    (clone / "new.txt").write_text("new\n")
    _git(["add", "new.txt"], clone)
    committed = _git(
        [
            "-c",
            "user.name=rex",
            "-c",
            "user.email=rex@example.com",
            "commit",
            "--quiet",
            "-m",
            "new",
        ],
        clone,
    )
    assert committed.returncode == 0, committed.stderr
    pushed = _git(["push", "origin", "HEAD:refs/heads/rex"], clone, TOKENS["rex"])
    assert pushed.returncode != 0
    assert "403" in pushed.stderr or "denied" in pushed.stderr


def test_the_user_s_repositories_are_those_they_may_read_and_archiving_shows_in_them(
    sandbox: Sandbox,
) -> None:
    """``GET /user/repos`` lists what the token's user may read (an outsider: nothing), and
    an admin's ``PATCH`` archives a repository, which the listing then says."""
    assert [r.full_name for r in sandbox.github("rex").get_user().get_repos()] == [FULL_NAME]
    assert list(sandbox.github("olga").get_user().get_repos()) == []
    with pytest.raises(GithubException) as refused:
        sandbox.github("wes").get_repo(FULL_NAME).edit(archived=True)
    assert refused.value.status == 403

    sandbox.github("ada").get_repo(FULL_NAME).edit(archived=True)

    [listed] = sandbox.github("wes").get_user().get_repos()
    assert listed.archived is True
    assert listed.permissions.push is True
