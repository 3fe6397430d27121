"""Harnesses: the agent CLIs thirdshift drives, one adapter each, and the process supervisor
that runs them.

``base`` holds the ``Harness`` and ``StreamReader`` protocols and the values they give back;
``claude`` and ``codex`` are the adapters, ``stream`` the helpers their readers share, and
``process`` starts a CLI in its own process group under watchdogs and stops its whole tree.
Nothing here imports the store: a reader's Session events are plain records.
"""

from collections.abc import Sequence

from thirdshift.errors import UsageError
from thirdshift.harnesses.agent_sandbox import (
    AgentSandbox,
    AgentSandboxUnavailable,
    SealedPaths,
    install_dirs,
    probe,
)
from thirdshift.harnesses.base import (
    NOTHING,
    Harness,
    Observation,
    StreamOutcome,
    StreamReader,
    Usage,
)
from thirdshift.harnesses.claude import ClaudeHarness
from thirdshift.harnesses.codex import CodexHarness
from thirdshift.harnesses.process import (
    CutLine,
    ProcessEnding,
    ProcessStartError,
    run_supervised,
    stop_process_tree,
    working_in,
)
from thirdshift.records import Watchdogs

HARNESS_NAMES = ("claude", "codex")


def harness_named(
    name: str, *, executable: str | None = None, extra_args: Sequence[str] = ()
) -> Harness:
    """The adapter for ``name``. ``executable`` overrides the program looked up on PATH (the
    tests use the pinned CLIs in node_modules); ``extra_args`` are CLI options the composition
    root adds to every session (e.g. Codex ``-c`` provider settings). An unknown name is a usage
    error listing the known ones."""
    if name == "claude":
        return ClaudeHarness(executable=executable or "claude", extra_args=tuple(extra_args))
    if name == "codex":
        return CodexHarness(executable=executable or "codex", extra_args=tuple(extra_args))
    raise UsageError(f"unknown harness '{name}'; choose one of {', '.join(HARNESS_NAMES)}")


__all__ = [
    "HARNESS_NAMES",
    "NOTHING",
    "AgentSandbox",
    "AgentSandboxUnavailable",
    "ClaudeHarness",
    "CodexHarness",
    "CutLine",
    "Harness",
    "Observation",
    "ProcessEnding",
    "ProcessStartError",
    "SealedPaths",
    "StreamOutcome",
    "StreamReader",
    "Usage",
    "Watchdogs",
    "harness_named",
    "install_dirs",
    "probe",
    "run_supervised",
    "stop_process_tree",
    "working_in",
]
