"""A Run's kind, its recorded state and how it ended, as enums: one vocabulary for the store,
the Run's outcome, the views and the JSON shapes (adr/0044). Each member's value is the string
the database and the JSON have always carried, so ``RunState.SUCCEEDED == "succeeded"``."""

from __future__ import annotations

from enum import StrEnum


class RunKind(StrEnum):
    """What a Run is for (its ``kind`` column)."""

    DELIVERY = "run"
    """A Run that ends with a pull request marked ready."""
    MERGE = "merge"
    """A Merge run: it merges its pull request (a Ticket Run is one, into its Spec branch)."""
    SPEC = "spec"
    """A Spec run: the Tickets of a Spec, then the Spec PR."""
    ARCHITECT = "architect"
    """An Architect run: a review of the repository that publishes issues; it has no issue."""


class RunState(StrEnum):
    """Where a recorded Run stands (its ``state`` column)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    """It reached its goal: a pull request ready or merged, or an Architect run's issues
    published or found covered (``RunEnd.recorded``)."""
    FAILED = "failed"
    REFUSED = "refused"
    """A Policy refusal: the Run stopped on a rule, not on an error."""
    CRASHED = "crashed"
    """Its holder died: its Lease ran out while it was recorded running."""
    INTERRUPTED = "interrupted"
    """A Spec run stopped by Ctrl-C or SIGTERM."""


ENDED = frozenset(state for state in RunState if state is not RunState.RUNNING)
"""The states a Run ends in."""


class RunEnd(StrEnum):
    """How one Run (or an attempt at one) ended, as its ``RunOutcome`` says."""

    READY = "ready"
    MERGED = "merged"
    PUBLISHED = "published"
    COVERED = "covered"
    """An Architect run whose finding an open issue already covers."""
    SKIPPED = "skipped"
    """An Architect run a gate held back: nothing was recorded."""
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    REFUSED = "refused"
    NOT_CLAIMED = "not claimed"
    """Another Run holds the issue, or it is no longer wanted: nothing changed."""
    STOPPED = "stopped"
    """An error before anything was recorded: pre-flight, the disk, the database."""

    @property
    def succeeded(self) -> bool:
        """Whether the Run reached its goal (exit status 0)."""
        return self in SUCCEEDED_ENDS


SUCCEEDED_ENDS = frozenset(
    {RunEnd.READY, RunEnd.MERGED, RunEnd.PUBLISHED, RunEnd.COVERED, RunEnd.SKIPPED}
)
"""The ends of a Run that reached its goal (exit status 0); recorded as ``succeeded``."""

FAILED_ENDS = frozenset({RunEnd.FAILED, RunEnd.INTERRUPTED, RunEnd.REFUSED})
"""The ends of a Failed run: it was recorded, saved its work and says why."""
