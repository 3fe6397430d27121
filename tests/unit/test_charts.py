"""The front page's charts as plain data: days and weeks with nothing stay empty, stacks per
repository and outcome, medians and 90th percentiles by nearest rank, and the table a reader
without JavaScript sees."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from thirdshift.errors import StoreError
from thirdshift.store.series import DayCost, DayOutcome, DaySpend, LabelToReady
from thirdshift.web.charts import (
    DAYS,
    Series,
    StoreChartSource,
    cost_per_day,
    cost_per_pull,
    days,
    front_charts,
    label_to_ready,
    outcomes_per_day,
    rank,
    week_of,
)

MONDAY = date(2026, 11, 30)


def test_cost_per_day_stacks_repositories_and_leaves_days_without_sessions_empty() -> None:
    shown = days(MONDAY, 3)
    chart = cost_per_day(
        [
            DayCost(MONDAY, "acme/widgets", 1.5),
            DayCost(MONDAY - timedelta(days=2), "acme/gears", 2.0),
        ],
        shown,
    )
    assert chart.labels == ("2026-11-28", "2026-11-29", "2026-11-30")
    assert chart.series == (
        Series("acme/gears", (2.0, None, None)),
        Series("acme/widgets", (None, None, 1.5)),
    )
    assert chart.stacked
    assert chart.rows()[0] == ("2026-11-28", ("$2.00", ""))


def test_runs_are_stacked_by_outcome() -> None:
    chart = outcomes_per_day(
        [DayOutcome(MONDAY, "ready", 3), DayOutcome(MONDAY, "failed", 1)], days(MONDAY, 1)
    )
    assert [s.name for s in chart.series] == ["failed", "ready"]
    assert chart.rows() == (("2026-11-30", ("1", "3")),)


def test_the_median_and_p90_are_the_values_at_their_nearest_rank() -> None:
    assert rank([5, 1, 3], 0.5) == 3
    assert rank(list(range(1, 11)), 0.9) == 9
    assert rank([7], 0.9) == 7


def test_label_to_ready_is_given_per_week_the_run_ended_in_in_minutes() -> None:
    ended = datetime(2026, 12, 2, 10, 0, tzinfo=UTC)  # a Wednesday
    rows = [LabelToReady(ended, seconds) for seconds in (600, 1200, 6000)]
    weeks = (MONDAY - timedelta(days=7), MONDAY)
    chart = label_to_ready(rows, weeks)
    assert chart.series == (Series("median", (None, 20.0)), Series("p90", (None, 100.0)))
    assert chart.labels == ("week of 2026-11-23", "week of 2026-11-30")
    assert week_of(ended.date()) == MONDAY


def test_cost_per_pull_request_counts_every_run_s_cost_and_each_pull_request_once_a_week() -> None:
    rows = [
        DaySpend(MONDAY, (1, 5), 3.0),  # made ready on Monday
        DaySpend(MONDAY + timedelta(days=1), None, 1.0),  # a Failed run's cost counts too
        DaySpend(MONDAY + timedelta(days=2), (1, 5), 0.5),  # the same pull request again
        DaySpend(MONDAY + timedelta(days=2), (2, 5), 0.5),  # another repository's #5
    ]
    chart = cost_per_pull(rows, (MONDAY - timedelta(days=7), MONDAY))
    assert chart.series == (Series("cost", (None, 2.5)),)
    assert not chart.empty
    assert cost_per_pull([DaySpend(MONDAY, None, 1.0)], (MONDAY,)).empty


class Figures:
    def __init__(self) -> None:
        self.since: list[datetime] = []

    def day_costs(self, since: datetime) -> tuple[DayCost, ...]:
        self.since.append(since)
        return (DayCost(MONDAY, "acme/widgets", 1.0),)

    def day_outcomes(self, since: datetime) -> tuple[DayOutcome, ...]:
        self.since.append(since)
        return ()

    def labels_to_ready(self, since: datetime) -> tuple[LabelToReady, ...]:
        self.since.append(since)
        return ()

    def day_spend(self, since: datetime) -> tuple[DaySpend, ...]:
        self.since.append(since)
        return ()


def test_the_front_page_charts_cover_the_last_thirty_utc_days() -> None:
    figures = Figures()
    charts = front_charts(figures, datetime(2026, 11, 30, 23, 0, tzinfo=UTC))
    assert [chart.key for chart in charts.charts] == [
        "cost",
        "outcomes",
        "label-to-ready",
        "cost-per-pull",
    ]
    assert set(figures.since) == {datetime(2026, 11, 1, tzinfo=UTC)}
    cost = charts.charts[0]
    assert len(cost.labels) == DAYS
    assert cost.labels[-1] == "2026-11-30"
    assert charts.json()[0]["series"][0]["values"][-1] == 1.0


class Unreadable(Figures):
    def day_costs(self, since: datetime) -> tuple[DayCost, ...]:
        raise StoreError("database error: connection refused")


def test_a_store_that_cannot_be_read_gives_no_charts_and_says_why_scrubbed() -> None:
    figures = Unreadable()
    source = StoreChartSource(figures, lambda text: text.replace("refused", "[hidden]"))
    drawn = source.charts()
    assert drawn.charts == ()
    assert drawn.problem == "database unreachable: database error: connection [hidden]"
    assert source.charts() is drawn  # the next load does not wait on the database again


def test_the_charts_are_kept_a_while_so_polling_tabs_do_not_query_each_time() -> None:
    figures = Figures()
    source = StoreChartSource(figures, str, fresh_seconds=3600)
    assert source.charts() is source.charts()
    assert len(figures.since) == 4
