"""A GitHub App's installation tokens (``thirdshift.github.app.InstallationTokens``) against the
stand-in, which checks the App's signed JSON Web Tokens and refuses an installation token once
it has ended, as GitHub does: the adapter and git go on working across renewals."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from github import Auth, Github, GithubException

from tests.support.app_keys import key_pair
from tests.support.clones import FACTORY
from tests.support.stand_in_scenario import FULL_NAME, NAME, OWNER, Sandbox
from thirdshift.clock import SystemClock
from thirdshift.errors import ConfigError
from thirdshift.git import ManagedClone
from thirdshift.github import GitHub
from thirdshift.github.app import InstallationTokens, check_private_key, renew_at
from thirdshift.sandbox.github.limits import Faults
from thirdshift.scrub import Scrubber


def tokens_of(
    sandbox: Sandbox,
    private: str,
    app_id: int,
    name: str = NAME,
    lines: list[str] | None = None,
    retries: int = 1,
) -> InstallationTokens:
    return InstallationTokens(
        sandbox.stand_in.api_url,
        app_id,
        private,
        OWNER,
        name,
        clock=SystemClock(),
        scrub=Scrubber([private]),
        progress=(lines if lines is not None else []).append,
        retries=retries,
    )


def minted(sandbox: Sandbox) -> int:
    return sum(
        1
        for entry in sandbox.stand_in.requests
        if entry["method"] == "POST" and str(entry["path"]).endswith("/access_tokens")
    )


def test_a_token_is_renewed_ten_minutes_before_it_ends_or_half_way_through_a_short_life() -> None:
    issued = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert renew_at(issued, issued + timedelta(hours=1)) == issued + timedelta(minutes=50)
    assert renew_at(issued, issued + timedelta(minutes=8)) == issued + timedelta(minutes=4)


def test_the_adapter_and_git_go_on_working_as_installation_tokens_end_and_are_renewed(
    sandbox: Sandbox, home: Path
) -> None:
    private, public = key_pair()
    app_id = sandbox.client.add_app("night-shift", public, [FULL_NAME], token_seconds=3)
    tokens = tokens_of(sandbox, private, app_id)
    github = GitHub(
        sandbox.stand_in.api_url, tokens, scrub=Scrubber([private]), clock=SystemClock()
    )
    clone = ManagedClone(
        home,
        OWNER,
        NAME,
        f"{sandbox.stand_in.web_url}/{FULL_NAME}.git",
        tokens,
        FACTORY,
        scrub=Scrubber([private]),
        environ={},
        timeout=60,
    )

    assert github.repo(OWNER, NAME).default_branch == "main"
    assert tokens.login() == "night-shift[bot]"
    first = tokens()
    clone.sync()
    time.sleep(3.2)  # the first token has ended: the stand-in refuses it now

    with pytest.raises(GithubException) as refused:
        Github(base_url=sandbox.stand_in.api_url, auth=Auth.Token(first)).get_repo(FULL_NAME)
    assert refused.value.status == 401
    assert github.repo(OWNER, NAME).name == NAME
    worktree = clone.add_worktree(home / "wt", "thirdshift/app-token", "origin/main")
    (worktree.path / "NOTES.md").write_text("pushed with a renewed token\n")
    worktree.commit_all("Notes")
    worktree.push("thirdshift/app-token")
    assert clone.remote_branches()["thirdshift/app-token"] == worktree.head()
    assert minted(sandbox) >= 2


def test_an_app_that_is_not_installed_on_the_repository_is_a_config_error_naming_the_fix(
    sandbox: Sandbox,
) -> None:
    private, public = key_pair()
    app_id = sandbox.client.add_app("elsewhere", public, ["other-org/tools"])

    with pytest.raises(ConfigError) as error:
        tokens_of(sandbox, private, app_id)()

    assert f"GitHub App {app_id} is not installed on {OWNER}/{NAME}" in str(error.value)
    assert "Install App" in str(error.value)


def test_a_key_that_is_not_the_app_s_is_refused_with_a_message_naming_the_app_and_the_key(
    sandbox: Sandbox,
) -> None:
    _, public = key_pair()
    other_private, _ = key_pair()
    app_id = sandbox.client.add_app("night-shift", public, [FULL_NAME])
    lines: list[str] = []
    tokens = tokens_of(sandbox, other_private, app_id, lines=lines)

    for ask in (tokens.login, lambda: tokens.installation_id, tokens):
        with pytest.raises(ConfigError) as error:
            ask()
        message = str(error.value)
        assert f"signed with GitHub App {app_id}'s private key" in message
        assert "THIRDSHIFT_GITHUB_APP_ID" in message
        assert "GITHUB_TOKEN" not in message
    assert "PRIVATE KEY" not in "".join(lines)


def test_a_failed_renewal_keeps_the_token_that_still_holds_and_no_404_is_read_as_an_answer(
    sandbox: Sandbox,
) -> None:
    """The App loses its installation mid-Run: while the current token holds, requests go on
    with it (and a warning says why); once it has ended, they fail naming the App's
    installation, and a branch that exists is never reported missing."""
    private, public = key_pair()
    life = 12.0  # renewed half-way: after 6 s, ended after 12
    app_id = sandbox.client.add_app("night-shift", public, [FULL_NAME], token_seconds=int(life))
    lines: list[str] = []
    tokens = tokens_of(sandbox, private, app_id, lines=lines)
    github = GitHub(
        sandbox.stand_in.api_url,
        tokens,
        scrub=Scrubber([private]),
        clock=SystemClock(),
        credential=tokens.credential,
    )
    before = time.monotonic()
    assert github.branch_exists(OWNER, NAME, "main")
    minted_by = time.monotonic()  # the token was minted between the two
    with sandbox.stand_in.world.lock:
        sandbox.stand_in.world.apps[app_id].installations.clear()
    # Past the renewal point whenever the token was minted, and before its end however late
    # (a loaded machine may take seconds over the first request: the span is what is allowed).
    assert minted_by - before < life / 2 - 1, "the first request took too long to tell"
    time.sleep(max(0.0, minted_by + life / 2 + 0.5 - time.monotonic()))

    assert github.branch_exists(OWNER, NAME, "main")
    assert any("could not renew GitHub App" in line for line in lines), lines
    time.sleep(max(0.0, minted_by + life + 0.5 - time.monotonic()))  # the token has ended
    with pytest.raises(ConfigError) as error:
        github.branch_exists(OWNER, NAME, "main")
    assert f"GitHub App {app_id} is not installed on {FULL_NAME}" in str(error.value)
    assert "Install App" in str(error.value)


def test_a_private_key_that_is_not_pem_is_a_config_error_that_never_quotes_it() -> None:
    with pytest.raises(ConfigError) as error:
        check_private_key("MIIEpAIBAAKCAQEAsecretbodywithoutitsframe")

    assert "not a PEM private key" in str(error.value)
    assert "secretbody" not in str(error.value)


def test_github_s_server_errors_while_finding_the_installation_and_minting_are_retried(
    sandbox: Sandbox,
) -> None:
    """A GET of the installation is repeated after a 5xx, as every GET is, with a progress
    line for each retry (a POST for a token is repeated too: a second token is as good)."""
    private, public = key_pair()
    app_id = sandbox.client.add_app("night-shift", public, [FULL_NAME])
    lines: list[str] = []
    tokens = tokens_of(sandbox, private, app_id, lines=lines, retries=3)
    sandbox.stand_in.set_faults(Faults(error_rate=1.0, statuses=(503,), count=2))
    try:
        assert tokens().startswith("ghs_")
    finally:
        sandbox.stand_in.set_faults(Faults())
    retries = [line for line in lines if "GitHub answered 503" in line]
    assert len(retries) == 2
    assert all("retrying in" in line for line in retries)


def test_an_installation_tokens_permissions_are_what_github_granted_and_it_has_no_scopes(
    sandbox: Sandbox,
) -> None:
    """The doctor reads an App's power over workflows from the token GitHub minted; GitHub
    names no OAuth scopes for an installation token."""
    private, public = key_pair()
    app_id = sandbox.client.add_app("night-shift", public, [FULL_NAME])
    tokens = tokens_of(sandbox, private, app_id)
    github = GitHub(
        sandbox.stand_in.api_url, tokens, scrub=Scrubber([private]), clock=SystemClock()
    )

    granted = github.app_permissions()

    assert granted is not None
    assert granted["contents"] == "write"
    assert "workflows" not in granted
    assert github.token_scopes() is None
