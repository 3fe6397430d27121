"""The Rescue records before it decides (issue 30): pure rules for a Ticket Run an earlier Spec
run of the same Spec branch left without a recorded landing.

A kill -9 a moment after a Ticket's Self-merge leaves its Ticket Run recorded ``running`` with
its pull request merged on GitHub. The Ticket's Lease may run out before the poll that finds the
dead Spec run, after it, or only while its Rescue waits: whichever, the Ticket is landed. So the
dead Run is recorded crashed first (when its Lease is gone), and only then is its landing read;
a pull request merged into the Spec branch at a head thirdshift recorded is a landing whatever
the Lease says (a Lease says whether a process may still write, not whether GitHub merged)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from thirdshift.run_states import RunState


class EarlierEnd(Enum):
    """What a Spec run makes of a Ticket Run an earlier Spec run left without a landing."""

    LANDED = "landed"  # its pull request merged into the Spec branch: record the landing
    UNRECORDED_HEAD = "unrecorded head"  # merged at a head thirdshift never recorded: not landed
    HELD = "held"  # still running under a live Lease, not merged: looked at again later
    ENDED = "ended"  # ended without a merge: this Spec run Rescues the Ticket or runs it again

    @property
    def settled(self) -> bool:
        """Nothing more to read of that Run: only a held one may still merge."""
        return self is not EarlierEnd.HELD


@dataclass(frozen=True)
class MergeSeen:
    """The Ticket Run's pull request as GitHub has it now."""

    merged: bool  # merged, into the Spec branch
    head_recorded: bool  # at a head thirdshift recorded for the Ticket's Issue branch


def dies_now(state: RunState, lease_live: bool) -> bool:
    """A Ticket Run still recorded ``running`` whose Lease is gone died with its Spec run: it
    is recorded crashed before anything is read of its landing."""
    return state == RunState.RUNNING and not lease_live


def earlier_end(state: RunState, lease_live: bool, pull: MergeSeen | None) -> EarlierEnd:
    """What a Ticket Run left by an earlier Spec run is now (``state`` as recorded after
    ``dies_now`` was applied; ``pull`` None when it opened none): landed when its pull request
    merged into the Spec branch at a recorded head, whatever its Lease says; else held while a
    live Lease keeps it running; else ended."""
    if pull is not None and pull.merged:
        return EarlierEnd.LANDED if pull.head_recorded else EarlierEnd.UNRECORDED_HEAD
    if state == RunState.RUNNING and lease_live:
        return EarlierEnd.HELD
    return EarlierEnd.ENDED
