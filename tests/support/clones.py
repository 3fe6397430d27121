"""The managed clone's test helpers: a clone of the stand-in's repository, plain git, and the
stand-in's standard scenario (tests/support/stand_in_scenario.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.stand_in_scenario import FULL_NAME, NAME, OWNER, TOKENS, Sandbox
from thirdshift.git import CommitIdentity, ManagedClone, Worktree
from thirdshift.scrub import Scrubber

FACTORY = CommitIdentity("thirdshift factory", "factory@thirdshift.invalid")


def make_clone(
    sandbox: Sandbox, home: Path, login: str = "wes", token: str | None = None
) -> ManagedClone:
    secret = token if token is not None else TOKENS[login]
    return ManagedClone(
        home,
        OWNER,
        NAME,
        f"{sandbox.stand_in.web_url}/{FULL_NAME}.git",
        lambda: secret,
        FACTORY,
        scrub=Scrubber([token if token is not None else TOKENS[login]]),
        environ=os.environ,  # read at each command, so a test's setenv is seen
        timeout=60,
    )


def plain_git(cwd: Path, *args: str) -> str:
    """Plain git, for looking at what thirdshift.git.clone left behind."""
    done = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.strip()


def write_file(worktree: Worktree, path: str, text: str) -> None:
    (worktree.path / path).write_text(text)
