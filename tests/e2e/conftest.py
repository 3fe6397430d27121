"""Fixtures of the end-to-end suite, and how its tests share the workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from tests.support.run_world import RunWorld, stop_world


@pytest.fixture
def cold_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ``thirdshift`` of the test starts as a fresh interpreter, never forked warm
    (tests/support/warm_start.py): a warm one's /proc/<pid>/environ shows its starter's
    environment, not the token and keys it was given, and a hostile agent reading the host's
    processes must find those where a real install keeps them."""
    monkeypatch.setenv("THIRDSHIFT_TEST_COLD_START", "1")


@pytest.fixture
def worlds() -> Iterator[list[RunWorld]]:
    """Run worlds a test starts (append them); each is stopped afterwards, with any
    `thirdshift` it left running."""
    made: list[RunWorld] = []
    yield made
    for world in made:
        stop_world(world)


HERE = Path(__file__).parent

SHARED_WORLDS = frozenset(
    {
        "test_daemon_demo.py",
        "test_daemon_specs.py",
        "test_doctor.py",
        "test_operator_views.py",
        "test_qwen_runs.py",
        "test_setup.py",
        "test_spec_rescue_race.py",
        "test_spec_runs.py",
    }
)
"""The files whose tests share a world (a fixture of module or class scope): each runs whole on
one worker, in its order, and starts its world once. Collection fails when a file shares one
and is missing here."""


class SharedWorldScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """``--dist loadgroup`` for this suite (scripts/test): a file of SHARED_WORLDS is one unit
    of work; every other test is a unit of its own, sent to whichever worker is free, so a long
    file is not one worker's queue. (pytest-xdist's own ``xdist_group`` marks do not group under
    pytest 9, which no longer reads the node id xdist rewrites.)"""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::", 1)[0]
        return path if Path(path).name in SHARED_WORLDS else nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") == "loadgroup":
        return SharedWorldScheduling(config, log)
    return None


LONGEST_FIRST = (
    # Its one test waits out GitHub's pacing for two to three minutes, on little CPU.
    "test_daemon_pacing.py",
    # Each a chain of tests on one worker: started last, one alone would hold up the end.
    "test_spec_runs.py",
    "test_spec_rescue_race.py",
    "test_daemon_demo.py",
    "test_qwen_runs.py",
    "test_daemon_specs.py",
    "test_operator_views.py",
    # The files of the longest single tests (a minute or more each on two cores).
    "test_agent_network.py",
    "test_daemon.py",
    "test_opencode.py",
    "test_wheel.py",
    "test_daemon_demo_options.py",
    "test_session_limits.py",
    "test_demo.py",
    "test_model_key_outside.py",
    "test_hostile_neighbour.py",
    "test_agent_keys.py",
    "test_architect.py",
    "test_run.py",
    "test_doctor.py",
    "test_setup.py",
)
"""The files whose tests go to the workers first, longest first: the others, shorter, fill the
gaps at the end. Measured with ``--durations``; a file missing here only runs later."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """SHARED_WORLDS holds every file whose tests share a world; the longest go first."""
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}
    items.sort(
        key=lambda item: (
            rank.get(item.path.name, len(rank)) if item.path.parent == HERE else len(rank)
        )
    )
    sharing: set[str] = set()
    for item in items:
        if item.path.parent != HERE or not isinstance(item, pytest.Function):
            continue
        # pytest has no public way to ask a test for its fixtures' scopes.
        fixtures = item._fixtureinfo.name2fixturedefs.values()
        if any(d.scope in ("module", "class", "package") for defs in fixtures for d in defs):
            sharing.add(item.path.name)
    missing = sharing - SHARED_WORLDS
    if missing:
        raise pytest.UsageError(
            f"tests/e2e/conftest.py: add {', '.join(sorted(missing))} to SHARED_WORLDS (its tests "
            "share a world, so they must run on one worker)"
        )
