"""The fence of a Lease (ADR 0003) around GitHub: every write a Run makes asks first whether its
Lease is still held, so a Run that lost it writes nothing over its successor's work."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

from thirdshift.runs.ports import READS, GitHubPort

P = TypeVar("P")


class FencedGitHub(GitHubPort, Protocol):
    """The whole of GitHub under a Lease (``fence_github``), with the fence itself in reach for
    a write made elsewhere."""

    def fence(self) -> None:
        """Raise ``LeaseLost`` unless the Lease is still held (before a write elsewhere)."""
        ...


class _Fenced:
    """GitHub, in any of its roles, for a Run under a Lease: every method but the ``READS``
    asks the fence first, so a Run that lost its Lease (paused past it, say) writes nothing
    over its successor's work. A method nobody sorted into ``READS`` counts as a write."""

    def __init__(self, github: object, fence: Callable[[], None]) -> None:
        self._github = github
        self.fence = fence

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # never forwarded: a copy asks before __init__ has run
            raise AttributeError(name)
        found = getattr(self._github, name)
        if name in READS:
            return found

        @functools.wraps(found)
        def write(*args: Any, **kwargs: Any) -> Any:
            self.fence()
            return found(*args, **kwargs)

        return write


def fenced(github: P, fence: Callable[[], None]) -> P:
    """``github`` (one role, several, or the whole ``GitHubPort``) with ``fence`` asked before
    each of its writes; reads pass."""
    return cast(P, _Fenced(github, fence))


def fence_github(github: GitHubPort, fence: Callable[[], None]) -> FencedGitHub:
    """The whole ``GitHubPort`` fenced, its ``fence()`` in reach."""
    return cast(FencedGitHub, _Fenced(github, fence))
