"""Fixtures of the end-to-end suite, and how its tests share the workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.run_world import RunWorld, stop_world


@pytest.fixture
def worlds() -> Iterator[list[RunWorld]]:
    """Run worlds a test starts (append them); each is stopped afterwards, with any
    `thirdshift` it left running."""
    made: list[RunWorld] = []
    yield made
    for world in made:
        stop_world(world)


HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` (scripts/test), the tests of a file that share a world (a
    fixture of module or class scope) go to one worker, in their order, and start it once; the
    other tests go each to whichever worker is free, so a long file is not one worker's queue."""
    for item in items:
        if item.path.parent != HERE or not isinstance(item, pytest.Function):
            continue
        # pytest has no public way to ask a test for its fixtures' scopes.
        fixtures = item._fixtureinfo.name2fixturedefs.values()
        if any(d.scope in ("module", "class", "package") for defs in fixtures for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.path.name))
