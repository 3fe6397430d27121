"""The adapter of each Harness in the Harness registry (``thirdshift.harness_registry``), and
``harness_named``, the one way code builds a Harness from its name.

The registry's data sits in a lower layer, where settings and the rules of the doctor and the
workflow can read it; the adapter classes can only be named here, above it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from thirdshift.harness_registry import harness_entry
from thirdshift.harnesses.base import Harness
from thirdshift.harnesses.claude import ClaudeHarness
from thirdshift.harnesses.codex import CodexHarness
from thirdshift.harnesses.opencode import OpenCodeHarness
from thirdshift.harnesses.qwen import QwenHarness


class HarnessAdapter(Protocol):
    """What an adapter class is called with: the program to start, and CLI options added to
    every session."""

    def __call__(self, *, executable: str, extra_args: tuple[str, ...]) -> Harness: ...


ADAPTERS: Mapping[str, HarnessAdapter] = {
    adapter.name: adapter for adapter in (ClaudeHarness, CodexHarness, OpenCodeHarness, QwenHarness)
}
"""Each registry entry's adapter class, by the entry's name (a unit test checks that every
entry has one and every adapter an entry)."""


def harness_named(
    name: str, *, executable: str | None = None, extra_args: Sequence[str] = ()
) -> Harness:
    """The adapter for ``name``. ``executable`` overrides the program looked up on PATH (the
    tests use the pinned CLIs in node_modules); ``extra_args`` are CLI options the composition
    root adds to every session (e.g. Codex ``-c`` provider settings). An unknown name is a usage
    error listing the known ones."""
    entry = harness_entry(name)
    adapter = ADAPTERS[entry.name]
    return adapter(executable=executable or entry.executable, extra_args=tuple(extra_args))
