"""`thirdshift report` in process, on Runs and sessions recorded in a real SQLite store in a real
home: a table per repository in text, one `report` object with `--json`, the period and the
repository it is asked for, and the usage errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from thirdshift.cli import main
from thirdshift.clock import ManualClock
from thirdshift.records import Repository, Usage
from thirdshift.run_states import RunKind, RunState
from thirdshift.store import Store


def record_run(
    store: Store,
    clock: ManualClock,
    repository: Repository,
    harness: str,
    sessions: list[tuple[str, float, float | None]],
    *,
    state: RunState = RunState.SUCCEEDED,
    kind: RunKind = RunKind.DELIVERY,
    labelled_before: float | None = None,
    **end: object,
) -> None:
    """A Run started now, its ``sessions`` (kind, seconds, cost) one after the other, then its
    end; its Ready label added ``labelled_before`` seconds before it started."""
    labelled = None if labelled_before is None else clock.now() - timedelta(seconds=labelled_before)
    run = store.start_run(repository, 1, kind=kind, harness=harness, ready_labelled_at=labelled)
    for session_kind, seconds, cost in sessions:
        session = store.start_session(
            run.id, session_kind, harness=harness, log_path="l", prompt="p"
        )
        clock.advance(seconds)
        store.end_session(session.id, state="ended", usage=Usage(cost_usd=cost))
    store.finish_run(run.id, state, **end)
    clock.advance(3600)


@pytest.fixture
def filled(home: Path) -> Path:
    """Two days ago, from midnight: in acme/widgets, claude's Runs ready (labelled 10 minutes
    before, two sessions, one a Repair), merged, failed (unpriced) and ready without a label
    time, and one codex Run ready; in acme/gears one crashed claude Run."""
    # From midnight: the six Runs span some six hours, and started later in the day the last
    # ones fell on yesterday, inside a --since of yesterday's date.
    two_days_ago = (datetime.now(UTC) - timedelta(days=2)).date()
    clock = ManualClock(datetime.combine(two_days_ago, time(0, 0), UTC))
    store = Store.open(f"sqlite:///{home / 'thirdshift.db'}", clock=clock)
    try:
        widgets = store.ensure_repository("acme", "widgets")
        gears = store.ensure_repository("acme", "gears")
        record_run(
            store, clock, widgets, "claude", [("implement", 60, 0.5), ("repair-1", 30, 0.25)],
            labelled_before=600, pull_request_number=5,
        )  # fmt: skip
        record_run(
            store, clock, widgets, "claude", [("implement", 120, 1.0)], kind=RunKind.MERGE,
            pull_request_number=6,
        )  # fmt: skip
        record_run(
            store, clock, widgets, "claude", [("implement", 90, None)], state=RunState.FAILED,
            cause="CI-fix budget spent", labelled_before=60,
        )  # fmt: skip
        record_run(store, clock, widgets, "claude", [], pull_request_number=8)
        record_run(
            store, clock, widgets, "codex", [("implement", 300, 0.1)], labelled_before=30,
            pull_request_number=7,
        )  # fmt: skip
        record_run(
            store, clock, gears, "claude", [("implement", 45, 0.2)], state=RunState.CRASHED,
            cause="its Lease ran out while it was recorded running",
        )  # fmt: skip
    finally:
        store.close()
    return home


def report(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, ["report", *args])
    assert result.exit_code == code, result.output
    return result.output


def test_report_prints_a_table_per_repository_with_a_column_per_harness(filled: Path) -> None:
    lines = report().splitlines()

    assert lines[0].startswith("Runs started from ")
    assert lines[1:] == [
        "",
        "acme/gears                    claude",
        "  Runs                             1",
        "    crashed                        1",
        "  pull requests ready              0",
        "  pull requests merged             0",
        "  Repairs per Run               0.00",
        "  Runs with a Repair               0",
        "  cost                       $0.2000",
        "  cost per Run               $0.2000",
        "  cost per pull request            -",
        "  unpriced sessions                0",
        "  session time, median           45s",
        "  session time, p90              45s",
        "  label to ready, median           -",
        "  label to ready, p90              -",
        "  ready, label time unknown        0",
        "  Failed runs by cause, claude (1):",
        "       1  its Lease ran out while it was recorded running",
        "",
        "acme/widgets                  claude    codex",
        "  Runs                             4        1",
        "    ready                          2        1",
        "    merged                         1        0",
        "    failed                         1        0",
        "  pull requests ready              2        1",
        "  pull requests merged             1        0",
        "  Repairs per Run               0.25     0.00",
        "  Runs with a Repair               1        0",
        "  cost                       $1.7500  $0.1000",
        "  cost per Run               $0.4375  $0.1000",
        "  cost per pull request      $0.5833  $0.1000",
        "  unpriced sessions                1        0",
        "  session time, median        1m 00s   5m 00s",
        "  session time, p90           2m 00s   5m 00s",
        "  label to ready, median     11m 30s   5m 30s",
        "  label to ready, p90        11m 30s   5m 30s",
        "  ready, label time unknown        1        0",
        "  Failed runs by cause, claude (1):",
        "       1  CI-fix budget spent",
    ]


def test_report_json_is_one_report_object_with_a_row_per_repository_and_harness(
    filled: Path,
) -> None:
    shape = json.loads(report("--json"))

    assert (shape["type"], shape["version"], shape["repository"]) == ("report", 1, None)
    since = datetime.fromisoformat(shape["since"])
    until = datetime.fromisoformat(shape["until"])
    assert timedelta(days=30) == until - since
    rows = {(row["repository"], row["harness"]): row for row in shape["rows"]}
    assert list(rows) == [
        ("acme/gears", "claude"),
        ("acme/widgets", "claude"),
        ("acme/widgets", "codex"),
    ]
    claude = rows[("acme/widgets", "claude")]
    assert claude["outcomes"] == {
        "ready": 2, "merged": 1, "published": 0, "covered": 0, "failed": 1, "refused": 0,
        "interrupted": 0, "crashed": 0, "running": 0,
    }  # fmt: skip
    assert claude["failed_runs_by_cause"] == [{"cause": "CI-fix budget spent", "runs": 1}]
    assert {name: claude[name] for name in ("runs", "sessions", "repairs", "most_repairs")} == {
        "runs": 4,
        "sessions": 4,
        "repairs": 1,
        "most_repairs": 1,
    }
    assert claude["pull_requests_ready"] == 2
    assert claude["cost_per_run_usd"] == pytest.approx(0.4375)
    assert claude["cost_per_pull_request_usd"] == pytest.approx(1.75 / 3)
    assert claude["unpriced_sessions"] == 1
    assert claude["session_time"] == {"sessions": 4, "median_seconds": 60.0, "p90_seconds": 120.0}
    assert claude["label_to_ready"] == {
        "runs": 1,
        "unknown": 1,
        "median_seconds": 690.0,
        "p90_seconds": 690.0,
    }
    gears = rows[("acme/gears", "claude")]
    assert (gears["cost_per_pull_request_usd"], gears["label_to_ready"]["median_seconds"]) == (
        None,
        None,
    )


def test_report_covers_only_the_period_and_repository_asked_for(filled: Path) -> None:
    only = json.loads(report("--repo", "ACME/Gears", "--json"))
    assert only["repository"] == "ACME/Gears"
    assert [(row["repository"], row["runs"]) for row in only["rows"]] == [("acme/gears", 1)]

    later = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    assert json.loads(report("--since", later, "--json"))["rows"] == []
    assert report("--since", later).splitlines()[1] == "no Runs started in that time"
    assert json.loads(report("--since", "1d", "--json"))["rows"] == []
    assert len(json.loads(report("--since", "3d", "--json"))["rows"]) == 3


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--since", "7 days"], "--since: '7 days' is neither a date"),
        (["--since", "7w"], "--since: '7w' is neither a date"),
        (["--since", "999999d"], "--since: '999999d' reaches before the year 1; give fewer days"),
        (["--since", "0001-01-01T00:00+14:00"], "reaches before the year 1; give a later time"),
        (["--repo", "nonsense"], "OWNER/NAME"),
    ],
)
def test_report_refuses_a_period_or_repository_it_cannot_read_as_a_usage_error(
    home: Path, args: list[str], said: str
) -> None:
    assert said in report(*args, code=2)
