"""``thirdshift setup``'s labels, one test body on two adapters: the real adapter on the GitHub
stand-in (whose every answer the ``sandbox`` fixture checks against GitHub's OpenAPI
description) and the in-process fake, so the fake cannot drift from the adapter (adr/0002)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.fake_github import FakeGitHub, bare_origin
from tests.support.stand_in_scenario import NAME, OWNER, TOKENS, Sandbox
from thirdshift.clock import SystemClock
from thirdshift.errors import NotFound
from thirdshift.github import GitHub
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings
from thirdshift.setup import LabelWrites, make_labels, thirdshift_labels


@pytest.fixture(params=["adapter", "fake"])
def github(request: pytest.FixtureRequest, tmp_path: Path) -> LabelWrites:
    if request.param == "adapter":
        sandbox = request.getfixturevalue("sandbox")
        token = TOKENS["wes"]
        return GitHub(sandbox.stand_in.api_url, token, scrub=Scrubber([token]), clock=SystemClock())
    return FakeGitHub(bare_origin(tmp_path), owner=OWNER, name=NAME, login="wes")


def test_setup_makes_each_missing_label_once_and_keeps_those_there(
    github: LabelWrites, tmp_path: Path
) -> None:
    """The first pass creates what is missing and leaves what exists; the second creates
    nothing, and every label is then there (GitHub ignores a label name's case)."""
    labels = thirdshift_labels(Settings(home=tmp_path, ready_label="Ready-For-Agent"))
    github.ensure_label(OWNER, NAME, "ready-for-agent", "ededed", "made by a person")
    first = make_labels(github, OWNER, NAME, labels)
    assert [(made.label.name, made.outcome) for made in first] == [
        ("Ready-For-Agent", "exists"),
        *((label.name, "created") for label in labels[1:]),
    ]
    second = make_labels(github, OWNER, NAME, labels)
    assert {made.outcome for made in second} == {"exists"}
    assert all(github.label_exists(OWNER, NAME, label.name.upper()) for label in labels)
    assert not github.label_exists(OWNER, NAME, "no-such-label")


def test_the_adapter_says_a_repository_it_cannot_see_is_not_found(sandbox: Sandbox) -> None:
    """``repo`` of a repository GitHub does not show raises NotFound, which ``setup`` turns
    into its message."""
    token = TOKENS["wes"]
    github = GitHub(sandbox.stand_in.api_url, token, scrub=Scrubber([token]), clock=SystemClock())
    with pytest.raises(NotFound):
        github.repo(OWNER, "no-such-repository")
