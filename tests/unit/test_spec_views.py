"""Spec runs in the views people read: `runs`, `show` (the tree), `status`, the status page and
their JSON, over records made in a real SQLite store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tests.unit.test_status_page import BEARER, ScriptedSource, page
from thirdshift.cli.status import running_lines
from thirdshift.clock import ManualClock
from thirdshift.records import Run, Usage
from thirdshift.report import reading, views
from thirdshift.run_states import RunState
from thirdshift.runs import spec_ticket_lines
from thirdshift.store import Store
from thirdshift.web import make_app
from thirdshift.web.page import PageRun

T0 = datetime(2026, 3, 1, 23, 0, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'views.db'}", clock=ManualClock(T0))
    yield opened
    opened.close()


def spent(store: Store, run: Run, cost: float) -> None:
    session = store.start_session(
        run.id, "implement", harness="claude", log_path="x.jsonl", prompt="do it"
    )
    store.end_session(session.id, state="ended", usage=Usage(cost_usd=cost))


def a_spec_run(store: Store) -> tuple[Run, Run, Run, Run, Run]:
    """Spec #1 run twice on spec-1: the first landed #2 and failed #3; the second (running)
    landed #3 and runs #4. Each Ticket Run spent $1, the second Spec run's review $0.50."""
    repository = store.ensure_repository("acme", "widgets")
    first = store.start_run(repository, 1, kind="spec", base_branch="main", issue_branch="spec-1")

    def ticket(spec: Run, number: int, pull: int) -> Run:
        made = store.start_run(
            repository,
            number,
            kind="merge",
            base_branch="spec-1",
            issue_branch=f"issue-{number}",
            parent_run_id=spec.id,
        )
        spent(store, made, 1.0)
        return store.update_run(made.id, pull_request_number=pull)

    a = ticket(first, 2, 12)
    store.finish_run(a.id, RunState.SUCCEEDED, head_sha="a" * 40)
    store.record_landing(a.id, "a" * 40)
    b_failed = ticket(first, 3, 13)
    store.finish_run(b_failed.id, RunState.FAILED, cause="the agent gave up")
    store.finish_run(first.id, RunState.FAILED, cause="Tickets not done: #3")
    second = store.start_run(repository, 1, kind="spec", base_branch="main", issue_branch="spec-1")
    spent(store, second, 0.5)
    b = ticket(second, 3, 13)
    store.finish_run(b.id, RunState.SUCCEEDED, head_sha="b" * 40)
    store.record_landing(b.id, "b" * 40)
    c = ticket(second, 4, 14)
    return first, second, a, b, c


def test_a_ticket_run_says_in_runs_which_spec_run_it_belongs_to(store: Store) -> None:
    _first, second, _a, _b, c = a_spec_run(store)

    assert f"  merge, Ticket of Spec run {second.id}  running  " in views.run_line(c, None)
    assert "  spec  running  " in views.run_line(second, None)


def test_show_of_a_spec_run_is_its_tree_of_tickets_with_the_whole_cost(store: Store) -> None:
    """Each Ticket once, with how it stands (landed by which Run, and by which Spec run when
    an earlier one landed it) and its Ticket Runs of this Spec run beneath it."""
    first, second, a, b, c = a_spec_run(store)

    text = "\n".join(reading.run_view(store, second.id, "sqlite://").lines())

    assert f"Run {second.id}: acme/widgets#1 (spec), running" in text
    assert "  cost of the whole Spec run (its Tickets too): $2.5000" in text
    assert "Tickets (3):" in text
    assert f"  #2: landed by Run {a.id} (Spec run {first.id}), PR #12" in text
    assert f"  #3: landed by Run {b.id}, PR #13" in text
    assert "  #4: running" in text
    assert f"    Run {c.id}  acme/widgets#4  merge, Ticket of Spec run {second.id}" in text
    assert text.index("Tickets (3):") < text.index("Sessions (1):")


def test_show_of_a_ticket_run_names_its_spec_run_and_its_landing(store: Store) -> None:
    _first, second, _a, b, _c = a_spec_run(store)

    text = "\n".join(reading.run_view(store, b.id, "sqlite://").lines())

    assert f"(merge, Ticket of Spec run {second.id}), succeeded" in text
    assert f"  Spec run: Run {second.id} on acme/widgets#1, running" in text
    assert f"  landed: {'b' * 12} at 2026-03-01 23:00:00 UTC" in text
    assert "Tickets (" not in text


def test_the_json_of_show_carries_the_tree_and_every_run_its_parent_and_landing(
    store: Store,
) -> None:
    _first, second, a, b, c = a_spec_run(store)

    shape = reading.run_view(store, second.id, "sqlite://").shape()
    ticket_shape = reading.run_view(store, b.id, "sqlite://").shape()

    assert [t["id"] for t in shape["tickets"]] == [b.id, c.id]
    assert shape["landed_tickets"] == {"2": a.id, "3": b.id}
    assert shape["spec_run_cost_usd"] == 2.5
    assert shape["spec_run"] is None
    assert shape["tickets"][0]["parent_run_id"] == second.id
    assert shape["tickets"][0]["landed_sha"] == "b" * 40
    assert shape["tickets"][0]["landed_at"] == "2026-03-01T23:00:00+00:00"
    assert shape["tickets"][1]["landed_sha"] is None
    assert ticket_shape["spec_run"]["id"] == second.id
    assert ticket_shape["tickets"] == []
    assert ticket_shape["run"]["parent_run_id"] == second.id


def test_status_shows_a_spec_run_with_a_line_per_ticket_and_its_ticket_runs_beneath(
    store: Store,
) -> None:
    _first, second, _a, _b, c = a_spec_run(store)
    other = store.start_run(store.ensure_repository("acme", "widgets"), 9)
    running = [
        run for run in store.list_runs(state=RunState.RUNNING) if run.id in (second.id, c.id)
    ]
    running.append(other)
    tickets = {second.id: spec_ticket_lines(second, store)}

    lines = running_lines(running, tickets, T0 + timedelta(minutes=3))

    assert lines == [
        f"  Spec run {second.id} on acme/widgets#1, for 3m 00s",
        "    Ticket #2 landed (pull request #12)",
        "    Ticket #3 landed (pull request #13)",
        "    Ticket #4 running",
        f"    Run {c.id} on acme/widgets#4 (its Ticket Run), for 3m 00s",
        f"  Run {other.id} on acme/widgets#9, for 3m 00s",
    ]


def test_the_status_page_shows_a_spec_run_s_tickets_and_marks_its_ticket_runs(
    store: Store,
) -> None:
    _first, second, _a, _b, c = a_spec_run(store)
    spec_view = PageRun(
        run=second,
        usage=None,
        duration="3m",
        session="spec-review",
        last_lines=(),
        tickets=spec_ticket_lines(second, store),
    )
    ticket_view = PageRun(run=c, usage=None, duration="1m", session="implement", last_lines=())
    source = ScriptedSource([page(spec_view, ticket_view)])
    client = TestClient(make_app(source, token=BEARER["Authorization"].split()[1]))
    client.headers.update(BEARER)

    html = client.get("/", headers={"Host": "127.0.0.1:8765"}).text
    data = client.get("/api/status", headers={"Host": "127.0.0.1:8765"}).json()

    assert f"Spec run {second.id} · acme/widgets#1" in html
    assert "<li>#4 running</li>" in html
    assert f"Ticket of Spec run {second.id} · implement" in html
    [spec_json, ticket_json] = data["in_flight"]
    assert spec_json["tickets"][-1] == "#4 running"
    assert ticket_json["parent_run_id"] == second.id
