"""`thirdshift setup --repo OWNER/NAME` against the GitHub stand-in: the configuration file,
the repository's labels, then the doctor's checks; run twice, it changes nothing the second
time. Bad input ends with one line naming the problem and the fix, and writes nothing."""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.run_world import NAME, OWNER, TOKEN, RunWorld, start_world, stop_world

pytestmark = pytest.mark.real_cli

REPO = f"{OWNER}/{NAME}"
LABELS = [
    "ready-for-agent",
    "in-progress",
    "thirdshift-merge",
    "architect-plan",
    "architect-idea",
    "needs-triage",
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunWorld]:
    made = start_world(tmp_path_factory.mktemp("setup"), [])
    yield made
    stop_world(made)


def setup(world: RunWorld, repo: str = REPO, **settings: str) -> subprocess.CompletedProcess[str]:
    saved = dict(world.settings)
    world.settings.update(settings)
    try:
        result = world.thirdshift("setup", "--repo", repo, timeout=180)
    finally:
        world.settings.clear()
        world.settings.update(saved)
    assert TOKEN not in result.stdout + result.stderr
    return result


def label_posts(world: RunWorld) -> list[str]:
    return [
        str(entry["path"])
        for entry in world.stand_in.requests
        if entry["method"] == "POST" and str(entry["path"]).endswith(f"/{REPO}/labels")
    ]


def test_setup_twice_makes_each_label_once_and_leaves_the_file_byte_identical(
    world: RunWorld,
) -> None:
    """The first run writes the file and makes the five missing labels (ready-for-agent was
    there); its doctor's checks all pass. The second makes no label and leaves the file as
    it was, byte for byte."""
    config = world.home / "config.toml"
    assert not config.exists()
    made_before = len(label_posts(world))  # the world's own ready-for-agent
    first = setup(world)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"configuration {config}: written" in first.stderr
    assert f"label ready-for-agent of {REPO}: already there" in first.stderr
    for label in LABELS[1:]:
        assert f"label {label} of {REPO}: created" in first.stderr
    assert len(label_posts(world)) == made_before + len(LABELS) - 1
    assert f"PASS  labels of {REPO}: " in first.stdout
    assert first.stdout.splitlines()[-1] == "every check passed"
    written = config.read_bytes()
    assert tomllib.loads(written.decode())["repositories"] == [REPO]
    names = {label["name"] for label in world.rest("GET", f"/repos/{REPO}/labels")}
    assert set(LABELS) <= names

    second = setup(world)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"configuration {config}: unchanged" in second.stderr
    assert all(f"label {label} of {REPO}: already there" in second.stderr for label in LABELS)
    assert len(label_posts(world)) == made_before + len(LABELS) - 1
    assert config.read_bytes() == written


def test_a_repository_github_does_not_show_is_named_and_nothing_is_written(
    world: RunWorld, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    result = setup(world, f"{OWNER}/no-such-repository", THIRDSHIFT_HOME=str(home))
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .endswith(
            f"GitHub shows no repository {OWNER}/no-such-repository to thirdshift's credentials; "
            "check the name, and that the token (or the GitHub App's installation) may see it"
        )
    )
    assert not (home / "config.toml").exists()


def test_without_a_token_setup_says_what_to_set_and_writes_nothing(
    world: RunWorld, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    result = setup(world, GITHUB_TOKEN="", THIRDSHIFT_HOME=str(home))
    assert result.returncode == 1
    assert "no GitHub token: set GITHUB_TOKEN (or THIRDSHIFT_GITHUB_TOKEN)" in result.stderr
    assert not (home / "config.toml").exists()


def test_a_home_where_the_file_cannot_be_written_is_named_with_the_fix(
    world: RunWorld, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = setup(world, THIRDSHIFT_HOME=str(blocker / "home"))
    assert result.returncode == 1
    assert (
        f"cannot write the configuration file {blocker / 'home' / 'config.toml'}: Not a "
        "directory; make its directory writable, or set THIRDSHIFT_HOME to a directory you "
        "can write"
    ) in result.stderr
