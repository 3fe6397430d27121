"""Fixtures of the adapters' contract tests: a managed clone of the stand-in's repository.

The stand-in with its standard scenario (``sandbox``, ``description``) comes from
tests/support/stand_in_scenario.py, which the stand-in's own tests (tests/sandbox) share.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.clones import make_clone
from tests.support.stand_in_scenario import Sandbox
from thirdshift.git import ManagedClone


@pytest.fixture
def clone(sandbox: Sandbox, home: Path) -> ManagedClone:
    """The stand-in's acme/widgets, cloned and synced as wes."""
    made = make_clone(sandbox, home)
    made.sync()
    return made


@pytest.fixture
def worktrees(tmp_path: Path) -> Path:
    return tmp_path / "worktrees"
