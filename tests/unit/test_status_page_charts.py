"""The status page ends with its charts when given a chart source: each drawn from figures the
page carries, each with a table of the same numbers for a reader without JavaScript."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from starlette.testclient import TestClient

from thirdshift.web import make_app
from thirdshift.web.charts import Chart, Charts, Series
from thirdshift.web.page import Page
from thirdshift.web.run_page import LogDownload, RunPage

TOKEN = "s3cret-token-s3cret-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


class OnePage:
    def page(self) -> Page:
        return Page(NOW, None, (), (), (), (), cost_today_usd=0.0, unpriced_today=0)

    def run_page(self, run_id: int) -> RunPage:
        return RunPage(run_id=run_id, generated_at=NOW, found=False)

    def session_log(self, run_id: int, session_id: int) -> LogDownload:
        return LogDownload("", None, f"Run {run_id} has no session {session_id}", 404)


class FixedCharts:
    def __init__(self, charts: Charts) -> None:
        self.drawn = charts

    def charts(self) -> Charts:
        return self.drawn


HOSTILE = "acme/</script><script>alert(1)</script>"
COST = Chart(
    "cost",
    "Cost per day (USD)",
    "bar",
    ("2026-11-30", "2026-12-01"),
    (Series(HOSTILE, (None, 1.25)),),
    "usd",
    stacked=True,
)
EMPTY = Chart(
    "label-to-ready",
    "Label to ready (minutes)",
    "line",
    ("w",),
    (Series("median", (None,)),),
    "minutes",
)


def front(charts: Charts | None) -> str:
    source = FixedCharts(charts) if charts is not None else None
    app = make_app(OnePage(), token=TOKEN, port=8765, charts=source)
    client = TestClient(app, base_url="http://127.0.0.1:8765", headers=BEARER)
    response = client.get("/")
    assert response.status_code == 200
    return response.text


def test_each_chart_carries_its_figures_and_a_table_of_the_same_numbers() -> None:
    html = front(Charts((COST, EMPTY)))
    data = re.search(r'<script type="application/json" id="charts-data">(.*?)</script>', html, re.S)
    assert data is not None
    drawn = json.loads(data.group(1))
    assert [chart["key"] for chart in drawn] == ["cost", "label-to-ready"]
    assert drawn[0]["series"][0] == {"name": HOSTILE, "values": [None, 1.25]}
    # The table shows the days that have a figure, as a reader sees them.
    assert '<td class="short">2026-12-01</td><td>$1.25</td>' in html
    assert "2026-11-30</td>" not in html
    assert 'src="static/chart.umd.min.js"' in html
    # A chart with nothing to draw says so and draws nothing.
    assert 'data-chart="label-to-ready"' in html
    assert html.count("<canvas") == 1


def test_a_name_from_the_database_never_closes_the_page_s_script() -> None:
    html = front(Charts((COST,)))
    assert "</script><script>alert(1)" not in html


def test_a_database_that_cannot_be_read_is_said_where_the_charts_would_be() -> None:
    html = front(Charts((), "database unreachable: connection refused"))
    assert "database unreachable: connection refused" in html


def test_without_a_chart_source_the_page_has_no_charts_and_loads_no_library() -> None:
    html = front(None)
    assert "charts-data" not in html
    assert "chart.umd.min.js" not in html
