"""Harnesses: the agent CLIs thirdshift drives, one adapter each, and the process supervisor
that runs them.

``base`` holds the ``Harness`` and ``StreamReader`` protocols and the values they give back;
``claude``, ``codex`` and ``qwen`` are the adapters, ``stream`` the helpers their readers share,
``process`` starts a CLI in its own process group under watchdogs, ``process_tree`` finds and
stops its whole tree, and ``registry`` builds each Harness of the Harness registry
(``thirdshift.harness_registry``). Nothing here imports the store: a reader's Session events
are plain records.
"""

from thirdshift.harness_registry import HARNESS_NAMES
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
)
from thirdshift.harnesses.process_tree import stop_process_tree, working_in
from thirdshift.harnesses.qwen import QwenHarness
from thirdshift.harnesses.registry import harness_named
from thirdshift.records import Watchdogs

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
    "QwenHarness",
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
