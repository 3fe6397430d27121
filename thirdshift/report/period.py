"""``thirdshift report``: the period ``--since`` names, and the store's figures over it put
together as a row per repository and Harness. Pure: figures in, rows out; ``tables`` writes them
for people, ``shapes`` for scripts."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from thirdshift.figures import (
    OUTCOMES,
    CauseCount,
    OutcomeCount,
    PeriodFigures,
    RunSpend,
    Spread,
)
from thirdshift.run_states import RunEnd

DEFAULT_DAYS = 30

_DURATION = re.compile(r"(\d+)([dh])")


def since_of(text: str, now: datetime) -> datetime:
    """The start of the period ``--since`` names: a date (``2026-11-01``, midnight UTC), a time
    (``2026-11-01T12:00``, UTC unless it says otherwise), or a duration back from ``now``
    (``7d``, ``12h``). ``ValueError`` saying what it takes for anything else."""
    text = text.strip()
    if match := _DURATION.fullmatch(text):
        count, unit = int(match[1]), match[2]
        try:
            return now - (timedelta(days=count) if unit == "d" else timedelta(hours=count))
        except OverflowError:
            unit_name = "days" if unit == "d" else "hours"
            raise ValueError(
                f"{text!r} reaches before the year 1; give fewer {unit_name}"
            ) from None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a date (2026-11-01) nor a duration (7d, 12h)"
        ) from None
    try:
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{text!r} reaches before the year 1; give a later time") from None


def default_since(now: datetime) -> datetime:
    return now - timedelta(days=DEFAULT_DAYS)


@dataclass(frozen=True)
class HarnessRow:
    """One repository's Runs started with one Harness (None: not recorded), every figure of
    the report; ``session_time`` is over the sessions that Harness ran."""

    repository: str
    harness: str | None
    outcomes: tuple[tuple[str, int], ...]
    """Runs by outcome, in the order of ``OUTCOMES``, every outcome named (0 when none)."""
    pull_requests_ready: int
    pull_requests_merged: int
    causes: tuple[CauseCount, ...]
    spend: RunSpend
    session_time: Spread
    label_to_ready: Spread

    @property
    def runs(self) -> int:
        return self.spend.runs

    @property
    def failed_runs(self) -> int:
        return sum(cause.runs for cause in self.causes)

    @property
    def repairs_per_run(self) -> float | None:
        return None if not self.runs else self.spend.repairs / self.runs

    @property
    def cost_per_run(self) -> float | None:
        return None if not self.runs else self.spend.cost_usd / self.runs

    @property
    def cost_per_pull_request(self) -> float | None:
        """Everything the Runs cost (the Failed runs' too) over the pull requests they made
        ready or merged."""
        made = self.pull_requests_ready + self.pull_requests_merged
        return None if not made else self.spend.cost_usd / made


@dataclass(frozen=True)
class PeriodReport:
    """The report: the period, when it was read, and a row per repository and Harness,
    sorted by repository, then Harness."""

    since: datetime
    until: datetime
    repository: str | None
    rows: tuple[HarnessRow, ...]

    def repositories(self) -> list[tuple[str, list[HarnessRow]]]:
        """The rows of each repository, in order."""
        grouped: dict[str, list[HarnessRow]] = {}
        for row in self.rows:
            grouped.setdefault(row.repository, []).append(row)
        return list(grouped.items())


Key = tuple[str, str | None]


def period_report(figures: PeriodFigures, until: datetime) -> PeriodReport:
    """The store's figures as one row per repository and Harness they name."""
    spend = {(one.repository, one.harness): one for one in figures.spend}
    times, labels = _by_key(figures.session_times), _by_key(figures.label_to_ready)
    counts: dict[Key, dict[str, OutcomeCount]] = {}
    for found in figures.outcomes:
        counts.setdefault((found.repository, found.harness), {})[found.outcome] = found
    rows = []
    for key in sorted({*spend, *times, *labels, *counts}, key=_order):
        repository, harness = key
        outcomes = counts.get(key, {})
        ready, merged = outcomes.get(RunEnd.READY), outcomes.get(RunEnd.MERGED)
        rows.append(
            HarnessRow(
                repository,
                harness,
                outcomes=tuple(
                    (outcome, outcomes[outcome].runs if outcome in outcomes else 0)
                    for outcome in OUTCOMES
                ),
                pull_requests_ready=0 if ready is None else ready.pull_requests,
                pull_requests_merged=0 if merged is None else merged.pull_requests,
                causes=tuple(c for c in figures.causes if (c.repository, c.harness) == key),
                spend=spend.get(key) or RunSpend(repository, harness, 0, 0, 0, 0, 0, 0.0, 0),
                session_time=times.get(key) or Spread(repository, harness, 0, None, None),
                label_to_ready=labels.get(key) or Spread(repository, harness, 0, None, None),
            )
        )
    period = figures.period
    return PeriodReport(period.since, until, period.repository, tuple(rows))


def _by_key(spreads: Iterable[Spread]) -> dict[Key, Spread]:
    return {(one.repository, one.harness): one for one in spreads}


def _order(key: Key) -> tuple[str, bool, str]:
    repository, harness = key
    return repository.lower(), harness is None, harness or ""
