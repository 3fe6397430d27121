"""Which of an owner's repositories the daemon watches: the rule on one listing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.app_keys import key_pair
from thirdshift.bootstrap import setting_secrets
from thirdshift.bootstrap.credentials import GitHubAccess
from thirdshift.bootstrap.owners import owners_adapter
from thirdshift.cli import main
from thirdshift.clock import ManualClock
from thirdshift.daemon.owners import owned_repositories
from thirdshift.errors import ConfigError
from thirdshift.records import ListedRepository
from thirdshift.scrub import Scrubber
from thirdshift.settings import check_owner_name, load_settings


def listed(
    full_name: str, *, archived: bool = False, disabled: bool = False, push: bool = True
) -> ListedRepository:
    owner, name = full_name.split("/")
    return ListedRepository(owner, name, archived, disabled, push)


LISTING = (
    listed("acme/widgets"),
    listed("acme/gadgets"),
    listed("acme/old", archived=True),
    listed("acme/frozen", disabled=True),
    listed("acme/legacy-api"),
    listed("acme/readonly", push=False),
    listed("Other/widgets"),
    listed("octo-org/tools"),
)


def test_an_owners_repositories_are_watched_save_archived_disabled_excluded_and_unpushable() -> (
    None
):
    owned = owned_repositories(LISTING, ["ACME"], ["Acme/Legacy-*"])
    assert [r.full_name for r in owned.watched] == ["acme/widgets", "acme/gadgets"]
    assert dict(owned.left_out) == {
        "acme/old": "it is archived",
        "acme/frozen": "it is disabled",
        "acme/legacy-api": "excluded_repositories has acme/legacy-*",
        "acme/readonly": "the token may not push to it",
    }


def test_several_owners_each_bring_their_own_and_no_others() -> None:
    owned = owned_repositories(LISTING, ["other", "octo-org"], [])
    assert [r.full_name for r in owned.watched] == ["Other/widgets", "octo-org/tools"]
    assert owned.left_out == ()


def test_an_owner_the_listing_does_not_know_brings_nothing() -> None:
    assert owned_repositories(LISTING, ["nobody"], []).watched == ()


@pytest.mark.parametrize("name", ["octo-org", "a", "A1-b2"])
def test_an_owner_name_is_letters_digits_and_dashes(name: str) -> None:
    assert check_owner_name(name) == name


@pytest.mark.parametrize("name", ["", "-lead", "acme/widgets", "a b", "x" * 40, "héllo"])
def test_a_malformed_owner_name_is_refused_showing_the_shape(name: str) -> None:
    with pytest.raises(ValueError, match="is not a GitHub user or organisation name"):
        check_owner_name(name)


def test_the_daemon_refuses_a_malformed_owner_as_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["daemon", "--owner", "acme/widgets"])
    assert result.exit_code == 2
    assert "--owner: 'acme/widgets' is not a GitHub user or organisation name" in result.stderr


def test_owners_in_the_config_file_must_be_owner_names(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('owners = ["octo-org", "octo-org/widgets"]\n')
    with pytest.raises(ConfigError) as caught:
        load_settings({"THIRDSHIFT_HOME": str(tmp_path)})
    assert "'octo-org/widgets' is not a GitHub user or organisation name" in str(caught.value)
    assert "config.toml: key 'owners'" in str(caught.value)


def test_the_webhook_secret_is_one_of_the_secrets_every_scrubber_knows(tmp_path: Path) -> None:
    settings = load_settings(
        {"THIRDSHIFT_HOME": str(tmp_path), "THIRDSHIFT_WEBHOOK_SECRET": "hook-secret-0123456789"}
    )
    assert "hook-secret-0123456789" in setting_secrets(settings)


def test_watching_an_owner_with_a_github_app_is_refused_naming_the_fix(tmp_path: Path) -> None:
    """An installation token may not list a user's repositories: the daemon says so before it
    starts, rather than watching nothing."""
    private, _public = key_pair()
    settings = load_settings(
        {
            "THIRDSHIFT_HOME": str(tmp_path),
            "THIRDSHIFT_GITHUB_APP_ID": "42",
            "THIRDSHIFT_GITHUB_APP_PRIVATE_KEY": private,
        }
    )
    clock = ManualClock(datetime(2026, 12, 6, tzinfo=UTC))
    scrub = Scrubber([])
    access = GitHubAccess(settings, clock, scrub, lambda _line: None)

    with pytest.raises(ConfigError) as refused:
        owners_adapter(settings, access, ["acme"], None)
    assert "a GitHub App's installation cannot list an owner's repositories" in str(refused.value)
    assert "name them with --repo" in str(refused.value)


def test_a_pace_over_githubs_900_points_a_minute_is_refused_naming_both_settings(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(
            {
                "THIRDSHIFT_HOME": str(tmp_path),
                "THIRDSHIFT_GITHUB_REQUESTS_PER_MINUTE": "800",
                "THIRDSHIFT_GITHUB_WRITES_PER_MINUTE": "60",
            }
        )
    assert "is 1040 points a minute, over GitHub's 900" in str(caught.value)
