"""Fixtures of the end-to-end suite."""

from __future__ import annotations

from collections.abc import Iterator

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
