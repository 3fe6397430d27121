"""The frozen records of ``thirdshift report``: what the store adds up over a period, per
repository and per Harness, one record per row of one query's answer.

Beside ``records`` rather than in it: they are one command's figures, not records of GitHub
or of the store's rows, and ``records`` is long enough already. The store makes them
(``thirdshift.store.figures``); ``thirdshift.report.period`` puts them together for people and
scripts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from thirdshift.run_states import RunEnd, RunState

OUTCOMES: tuple[str, ...] = (
    RunEnd.READY,
    RunEnd.MERGED,
    RunEnd.PUBLISHED,
    RunEnd.COVERED,
    RunState.FAILED,
    RunState.REFUSED,
    RunState.INTERRUPTED,
    RunState.CRASHED,
    RunState.RUNNING,
)
"""A recorded Run's outcome, in the order the report lists them: a succeeded Run by its Run end
(``ready`` for a Delivery or a Spec run, ``merged`` for a Merge run, ``published`` or
``covered`` for an Architect run), any other by its Run state."""

FAILED_STATES: tuple[str, ...] = (
    RunState.FAILED,
    RunState.REFUSED,
    RunState.INTERRUPTED,
    RunState.CRASHED,
)
"""The Run states of a Failed run (a crashed Run too: it did not reach its goal)."""


@dataclass(frozen=True)
class Period:
    """What the report covers: the Runs started at or after ``since``, of ``repository``
    (OWNER/NAME, any case) when given."""

    since: datetime
    repository: str | None = None


@dataclass(frozen=True)
class OutcomeCount:
    """How many Runs of one repository and Harness (the one the Run was started with) ended
    with one outcome of ``OUTCOMES``, and how many pull requests they name (each counted
    once)."""

    repository: str
    harness: str | None
    outcome: str
    runs: int
    pull_requests: int


@dataclass(frozen=True)
class CauseCount:
    """How many Failed runs of one repository and Harness recorded one cause (None: none)."""

    repository: str
    harness: str | None
    cause: str | None
    runs: int


@dataclass(frozen=True)
class RunSpend:
    """The sessions of one repository's Runs started with one Harness: how many Runs and
    sessions, their Repairs (sessions of kind ``repair-<i>`` or ``review-<i>``, a Resume not
    counted again), and what the usage ledger says they cost (``unpriced_sessions`` have no
    cost figure, so ``cost_usd`` is then a floor)."""

    repository: str
    harness: str | None
    runs: int
    sessions: int
    repairs: int
    repaired_runs: int
    """Runs with at least one Repair."""
    most_repairs: int
    """The most Repairs one Run had."""
    cost_usd: float
    unpriced_sessions: int


@dataclass(frozen=True)
class Spread:
    """The median and 90th percentile of ``known`` durations of one repository and Harness, by
    nearest rank (the smallest duration with at least half, or nine tenths, of them at or below
    it); ``unknown``: those left out because a time was not recorded."""

    repository: str
    harness: str | None
    known: int
    median_seconds: float | None
    p90_seconds: float | None
    unknown: int = 0


@dataclass(frozen=True)
class PeriodFigures:
    """Every figure of the report, as the store's queries answered them (one query each)."""

    period: Period
    outcomes: tuple[OutcomeCount, ...]
    causes: tuple[CauseCount, ...]
    spend: tuple[RunSpend, ...]
    session_times: tuple[Spread, ...]
    """Ended sessions, by the Harness each session ran (a Harness switch's too)."""
    label_to_ready: tuple[Spread, ...]
    """Runs that ended ``ready``: from when their Ready label was added to their end."""
