"""The Rescue's rules for a Ticket Run an earlier Spec run left without a landing
(``runs.rules.ticket_rescue``), on plain values."""

from __future__ import annotations

import pytest

from thirdshift.run_states import RunState
from thirdshift.runs.rules.ticket_rescue import EarlierEnd, MergeSeen, dies_now, earlier_end

MERGED = MergeSeen(merged=True, head_recorded=True)
OPEN = MergeSeen(merged=False, head_recorded=True)


@pytest.mark.parametrize(
    ("state", "lease_live", "dies"),
    [
        (RunState.RUNNING, False, True),
        (RunState.RUNNING, True, False),
        (RunState.CRASHED, False, False),
        (RunState.SUCCEEDED, False, False),
    ],
)
def test_only_a_run_still_running_with_its_lease_gone_is_recorded_crashed_first(
    state: RunState, lease_live: bool, dies: bool
) -> None:
    """A Run recorded running whose Lease is gone died; a live Lease, or an ending recorded
    already, leaves the record as it is."""
    assert dies_now(state, lease_live) is dies


@pytest.mark.parametrize(
    ("state", "lease_live"),
    [
        (RunState.CRASHED, False),
        (RunState.SUCCEEDED, False),
        (RunState.RUNNING, True),
        (RunState.RUNNING, False),
    ],
)
def test_a_pull_request_merged_at_a_recorded_head_is_landed_whatever_the_lease_says(
    state: RunState, lease_live: bool
) -> None:
    """GitHub's merge into the Spec branch is the landing, whether the Run's Lease ran out
    before the poll, after it, or still lives."""
    assert earlier_end(state, lease_live, MERGED) is EarlierEnd.LANDED


def test_a_merge_at_a_head_thirdshift_never_recorded_is_not_a_landing() -> None:
    """A head an agent pushed behind thirdshift's back is never counted as landed."""
    seen = MergeSeen(merged=True, head_recorded=False)
    assert earlier_end(RunState.CRASHED, False, seen) is EarlierEnd.UNRECORDED_HEAD


@pytest.mark.parametrize("pull", [OPEN, None])
def test_an_unmerged_run_under_a_live_lease_is_held_and_read_again(
    pull: MergeSeen | None,
) -> None:
    """Not merged and still running under its Lease: it may yet merge, so it is read again."""
    end = earlier_end(RunState.RUNNING, True, pull)
    assert (end, end.settled) == (EarlierEnd.HELD, False)


@pytest.mark.parametrize("pull", [OPEN, None])
def test_an_unmerged_run_that_ended_is_settled_for_its_rescue(pull: MergeSeen | None) -> None:
    """Crashed (or recorded crashed just now) without a merge: the Spec run Rescues the
    Ticket, and the Run is not read again."""
    end = earlier_end(RunState.CRASHED, False, pull)
    assert (end, end.settled) == (EarlierEnd.ENDED, True)
