"""Which of an owner's repositories the daemon watches: the rule on one listing."""

from __future__ import annotations

import pytest

from thirdshift.daemon.owners import owned_repositories
from thirdshift.records import ListedRepository
from thirdshift.settings import check_owner_name


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
