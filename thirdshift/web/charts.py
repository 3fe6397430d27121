"""The front page's charts: cost per day and per repository, Runs by outcome per day, time from
label to ready per week (median and 90th percentile), and cost per ready or merged pull request
per week.

The store adds the figures up (``thirdshift.store.series``, one query each); the rules here
turn them into charts as plain data: labels, one series per line or stack, and the unit. The
page draws each with Chart.js and shows the same numbers as a table, which is what a reader
with JavaScript off sees.
"""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, Protocol

from thirdshift.errors import StoreError
from thirdshift.store.series import DayCost, DayOutcome, DaySpend, LabelToReady

DAYS = 30
"""How far back the charts look."""
CHARTS_SECONDS = 10.0
"""How long a drawing's figures are kept: they change by the hour, the page polls by seconds."""


@dataclass(frozen=True)
class Series:
    """One line, or one stack of bars, of a chart: a value per label (None: nothing that day)."""

    name: str
    values: tuple[float | None, ...]


@dataclass(frozen=True)
class Chart:
    """What one chart shows."""

    key: str
    title: str
    kind: Literal["bar", "line"]
    labels: tuple[str, ...]
    series: tuple[Series, ...]
    unit: Literal["usd", "minutes", "runs"]
    stacked: bool = False

    @property
    def empty(self) -> bool:
        return not any(v for s in self.series for v in s.values if v is not None)

    def rows(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """The table a reader without JavaScript sees: a row per label, a cell per series."""
        return tuple(
            (label, tuple(_shown(s.values[i], self.unit) for s in self.series))
            for i, label in enumerate(self.labels)
        )

    def json(self) -> dict[str, Any]:
        """What the page's script draws from."""
        return {
            "key": self.key,
            "kind": self.kind,
            "labels": list(self.labels),
            "series": [{"name": s.name, "values": list(s.values)} for s in self.series],
            "unit": self.unit,
            "stacked": self.stacked,
        }


@dataclass(frozen=True)
class Charts:
    """Every chart of the front page, or why there are none."""

    charts: tuple[Chart, ...]
    problem: str | None = None

    def json(self) -> list[dict[str, Any]]:
        return [chart.json() for chart in self.charts]


class ChartSource(Protocol):
    """Where the charts come from (the real one reads the store)."""

    def charts(self) -> Charts: ...


class SeriesReads(Protocol):
    """The store's figures the charts are drawn from."""

    def day_costs(self, since: datetime) -> tuple[DayCost, ...]: ...

    def day_outcomes(self, since: datetime) -> tuple[DayOutcome, ...]: ...

    def labels_to_ready(self, since: datetime) -> tuple[LabelToReady, ...]: ...

    def day_spend(self, since: datetime) -> tuple[DaySpend, ...]: ...


def _shown(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    if unit == "usd":
        return f"${value:.2f}"
    if unit == "minutes":
        return f"{value:.1f} min"
    return f"{value:g}"


def days(until: date, count: int = DAYS) -> tuple[date, ...]:
    """The ``count`` UTC days up to ``until``, oldest first."""
    return tuple(until - timedelta(days=count - 1 - i) for i in range(count))


def week_of(day: date) -> date:
    """The Monday of ``day``'s ISO week."""
    return day - timedelta(days=day.weekday())


def cost_per_day(rows: Iterable[DayCost], shown: Sequence[date]) -> Chart:
    """Cost per UTC day, a stack per repository."""
    stacks = ((row.repository, row.day, row.cost_usd) for row in rows)
    return _per_day("cost", "Cost per day (USD)", "usd", stacks, shown)


def outcomes_per_day(rows: Iterable[DayOutcome], shown: Sequence[date]) -> Chart:
    """Runs by outcome per UTC day they ended, a stack per outcome."""
    stacks = ((row.outcome, row.day, float(row.runs)) for row in rows)
    return _per_day("outcomes", "Runs by outcome per day", "runs", stacks, shown)


def _per_day(
    key: str,
    title: str,
    unit: Literal["usd", "runs"],
    stacks: Iterable[tuple[str, date, float]],
    shown: Sequence[date],
) -> Chart:
    """A bar per day of ``shown``, stacked by name, from (name, day, value)."""
    by_name: dict[str, dict[date, float]] = defaultdict(dict)
    for name, day, value in stacks:
        by_name[name][day] = value
    series = tuple(
        Series(name, tuple(values.get(day) for day in shown))
        for name, values in sorted(by_name.items())
    )
    labels = tuple(day.isoformat() for day in shown)
    return Chart(key, title, "bar", labels, series, unit, stacked=True)


def rank(values: Sequence[float], share: float) -> float:
    """The value at the nearest rank ``share`` (0.5: the median; 0.9: the 90th percentile) of
    ``values``, sorted."""
    ordered = sorted(values)
    return ordered[max(math.ceil(share * len(ordered)) - 1, 0)]


def label_to_ready(rows: Iterable[LabelToReady], weeks: Sequence[date]) -> Chart:
    """Minutes from the Ready label to a ready pull request, per week the Run ended in."""
    by_week: dict[date, list[float]] = defaultdict(list)
    for row in rows:
        by_week[week_of(row.ready_at.date())].append(row.seconds / 60)
    median = tuple(rank(by_week[w], 0.5) if by_week[w] else None for w in weeks)
    p90 = tuple(rank(by_week[w], 0.9) if by_week[w] else None for w in weeks)
    labels = tuple(f"week of {week.isoformat()}" for week in weeks)
    series = (Series("median", median), Series("p90", p90))
    return Chart("label-to-ready", "Label to ready (minutes)", "line", labels, series, "minutes")


def cost_per_pull(rows: Iterable[DaySpend], weeks: Sequence[date]) -> Chart:
    """What the Runs that ended in a week cost (every Run, as ``thirdshift report`` counts),
    over the pull requests they made ready or merged that week, each counted once."""
    cost: dict[date, float] = defaultdict(float)
    pulls: dict[date, set[tuple[int, int]]] = defaultdict(set)
    for row in rows:
        week = week_of(row.day)
        cost[week] += row.cost_usd
        if row.pull_request is not None:
            pulls[week].add(row.pull_request)
    values = tuple(cost[w] / len(pulls[w]) if pulls.get(w) else None for w in weeks)
    labels = tuple(f"week of {week.isoformat()}" for week in weeks)
    title = "Cost per ready or merged pull request (USD)"
    return Chart("cost-per-pull", title, "bar", labels, (Series("cost", values),), "usd")


def front_charts(reads: SeriesReads, now: datetime) -> Charts:
    """Every chart over the last ``DAYS`` days up to ``now``."""
    today = now.astimezone(UTC).date()
    shown = days(today)
    since = datetime.combine(shown[0], datetime.min.time(), tzinfo=UTC)
    weeks = tuple(sorted({week_of(day) for day in shown}))
    return Charts(
        (
            cost_per_day(reads.day_costs(since), shown),
            outcomes_per_day(reads.day_outcomes(since), shown),
            label_to_ready(reads.labels_to_ready(since), weeks),
            cost_per_pull(reads.day_spend(since), weeks),
        )
    )


class StoreChartSource:
    """The real chart source: the store's figures, kept ``fresh_seconds``; a store that cannot
    be read gives no charts and says why."""

    def __init__(
        self,
        reads: SeriesReads,
        scrub: Callable[[str], str],
        *,
        fresh_seconds: float = CHARTS_SECONDS,
    ) -> None:
        self._reads = reads
        self._scrub = scrub
        self._fresh = fresh_seconds
        self._lock = threading.Lock()
        self._built: tuple[float, Charts] | None = None

    def charts(self) -> Charts:
        with self._lock:
            now = time.monotonic()
            if self._built is not None and now - self._built[0] < self._fresh:
                return self._built[1]
            try:
                built = front_charts(self._reads, datetime.now(UTC))
            except StoreError as error:
                # Kept too: while the database is down, each load does not wait on it again.
                built = Charts((), self._scrub(f"database unreachable: {error}"))
            self._built = (now, built)
            return built
