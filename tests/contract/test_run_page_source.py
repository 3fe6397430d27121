"""A Run's page built by the status page's real source from a real store (SQLite and
PostgreSQL) and real Session logs: its record with its live Lease, a bar per Session, its
Repairs, each Session replayed from its Session events, a Spec run's Tickets linked both ways,
the Session log downloaded scrubbed (a session of that Run only, a missing file said plainly),
and what it says of a Run that does not exist or of a database that is away."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from starlette.testclient import TestClient

from tests.support.failed_run import CAUSE, plant_failed_run, session_log_lines
from thirdshift.records import Run, SessionEvent, Usage
from thirdshift.run_states import RunState
from thirdshift.scrub import Scrubber
from thirdshift.store import Store
from thirdshift.web import StorePageSource, make_app

SECRET = "ghp_" + "planted0secret0value0" * 2
TOKEN = "t" * 32
WEB = "https://github.example"


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()


def source_of(store: Store, logs: Path | None = None) -> StorePageSource:
    return StorePageSource(
        store, lambda: None, Scrubber([SECRET]), fresh_seconds=0, web_root=WEB, logs=logs
    )


def a_repaired_run(store: Store, logs: Path) -> tuple[Run, list[int]]:
    """Run on acme/widgets#11 under its live Lease: an implement session whose events name
    the secret (a store that kept one must still not show it), then repair-1, both priced."""
    repository = store.ensure_repository("acme", "widgets")
    lease = store.acquire_lease(repository, 11, "daemon night-1:host:1:ab", timedelta(minutes=5))
    assert lease is not None
    run = store.start_run_under(
        lease, repository, 11, base_branch="main", issue_branch="issue-11", harness="claude"
    )
    assert run is not None
    logs.mkdir(parents=True, exist_ok=True)
    ids = []
    for kind, cost in (("implement", 0.25), ("repair-1", 0.5)):
        log = logs / f"acme-widgets-issue-11-{kind}.jsonl"
        log.write_text("".join(json.dumps(line) + "\n" for line in session_log_lines(SECRET)))
        session = store.start_session(
            run.id, kind, harness="claude", log_path=str(log), prompt=f"Brief of {kind}."
        )
        store.add_session_events(
            session.id,
            [
                SessionEvent(
                    1, "tool_call", "$ python3 -m unittest", "Bash", "python3 -m unittest"
                ),
                SessionEvent(2, "tool_result", "FAILED (failures=1)", "Bash", exit_status=1),
                SessionEvent(3, "tool_call", "commit", "Bash", "git commit -qam 'Fix add()'"),
                SessionEvent(4, "message", f"Fixed add(); the token was {SECRET}"),
            ],
        )
        store.end_session(
            session.id,
            state="ended",
            final_message="Done.",
            usage=Usage(turns=2, input_tokens=900, output_tokens=100, cost_usd=cost,
                        cost_source="reported", model="claude-x"),
        )  # fmt: skip
        ids.append(session.id)
    run = store.update_run(run.id, pull_request_number=12, head_sha="c" * 40)
    return run, ids


def test_a_run_page_shows_its_record_lease_timeline_repairs_and_replay_scrubbed(
    store: Store, tmp_path: Path
) -> None:
    run, (implement, repair) = a_repaired_run(store, tmp_path / "logs")

    page = source_of(store).run_page(run.id)

    assert (page.status, page.subject, page.state) == (200, "acme/widgets#11", "running")
    fields = {field.label: field for field in page.fields}
    assert fields["Issue"].href == f"{WEB}/acme/widgets/issues/11"
    assert (fields["Pull request"].value, fields["Pull request"].href) == (
        "#12",
        f"{WEB}/acme/widgets/pull/12",
    )
    assert fields["Harness"].value == "claude (claude-x)"
    assert fields["Head"].value == "c" * 40
    assert fields["Cost"].value.startswith("$0.7500, 2 session(s), 1800 tokens in")
    assert page.lease is not None
    assert "daemon night-1:host:1:ab" in page.lease
    assert [(s.session_id, s.kind) for s in page.sessions] == [
        (implement, "implement"),
        (repair, "repair-1"),
    ]
    assert [s.session_id for s in page.repairs] == [repair]
    bars = page.chart()
    assert len(bars) == 2
    assert all(0 <= bar["start"] <= bar["end"] for bar in bars)
    assert (bars[1]["tokens"], bars[1]["cost_usd"], bars[1]["model"]) == (1000, 0.5, "claude-x")
    assert [line.text for line in page.sessions[0].lines] == [
        "$ python3 -m unittest",
        "↳ exit 1: FAILED (failures=1)",
        "commit",
        "agent: Fixed add(); the token was [REDACTED]",
    ]
    assert page.sessions[0].lines[2].detail == "git commit -qam 'Fix add()'"
    assert SECRET not in json.dumps(dataclasses.asdict(page), default=str)
    client = TestClient(
        make_app(source_of(store), token=TOKEN),
        base_url="http://127.0.0.1:8765",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    shown = client.get(f"/runs/{run.id}")
    assert shown.status_code == 200
    assert f'href="{run.id}/sessions/{repair}/log"' in shown.text
    assert SECRET not in shown.text


def test_a_session_log_downloads_scrubbed_for_its_own_run_only(
    store: Store, tmp_path: Path
) -> None:
    run, (implement, _repair) = a_repaired_run(store, tmp_path / "logs")
    other = plant_failed_run(store, "acme", "widgets", 9, tmp_path / "other", SECRET)
    source = source_of(store, tmp_path / "logs")

    log = source.session_log(run.id, implement)
    assert log.lines is not None
    downloaded = b"".join(log.lines).decode()
    elsewhere = source.session_log(other.run.id, implement)

    assert log.name == "acme-widgets-issue-11-implement.jsonl"
    assert SECRET not in downloaded
    assert "[REDACTED]" in downloaded
    assert len(downloaded.splitlines()) == len(session_log_lines(SECRET))
    assert json.loads(downloaded.splitlines()[0])["type"] == "system"
    assert (elsewhere.lines, elsewhere.status) == (None, 404)
    assert f"Run {other.run.id} has no session {implement}" in elsewhere.problem


def test_a_session_log_not_on_this_machine_is_a_404_that_says_where_it_lives(
    store: Store, tmp_path: Path
) -> None:
    planted = plant_failed_run(store, "acme", "widgets", 9, tmp_path / "logs", SECRET)
    planted.log_path.unlink()
    [session] = store.run_sessions(planted.run.id)

    log = source_of(store, tmp_path / "logs").session_log(planted.run.id, session.id)

    assert (log.lines, log.status) == (None, 404)
    assert log.problem.startswith(
        f"the Session log of Run {planted.run.id}'s repair-2 session "
        f"({planted.log_path.name}) is not on this machine"
    )
    assert "THIRDSHIFT_HOME of the machine that ran the Run" in log.problem
    assert str(tmp_path) not in log.problem


def test_a_failed_run_s_page_shows_its_cause_and_no_lease(store: Store, tmp_path: Path) -> None:
    planted = plant_failed_run(store, "acme", "widgets", 9, tmp_path / "logs", SECRET)

    page = source_of(store).run_page(planted.run.id)

    assert page.outcome == f"failed: {CAUSE}"
    assert page.lease is None
    assert [s.kind for s in page.repairs] == ["repair-2"]
    assert page.sessions[0].error == "CI still red"
    assert page.sessions[0].lines == ()


def test_a_spec_run_s_tickets_link_their_ticket_runs_and_a_ticket_run_links_back(
    store: Store,
) -> None:
    repository = store.ensure_repository("acme", "widgets")
    spec = store.start_run(repository, 1, kind="spec", base_branch="main", issue_branch="spec-1")

    def ticket(number: int) -> Run:
        return store.start_run(
            repository, number, kind="merge", base_branch="spec-1",
            issue_branch=f"issue-{number}", parent_run_id=spec.id,
        )  # fmt: skip

    landed = ticket(2)
    store.finish_run(landed.id, RunState.SUCCEEDED, head_sha="a" * 40, pull_request_number=12)
    store.record_landing(landed.id, "a" * 40)
    failed = ticket(3)
    store.finish_run(failed.id, RunState.FAILED, cause="the agent gave up")
    source = source_of(store)

    tree = source.run_page(spec.id)
    back = source.run_page(failed.id)

    assert tree.is_spec_run
    assert [(t.number, t.status) for t in tree.tickets] == [
        (2, f"landed by Run {landed.id}, PR #12"),
        (3, "failed: the agent gave up"),
    ]
    assert tree.tickets[0].landed_by is not None
    assert tree.tickets[0].landed_by.run_id == landed.id
    assert [r.run_id for r in tree.tickets[1].runs] == [failed.id]
    assert {f.label: f.value for f in tree.fields}["Spec branch"] == "spec-1"
    assert back.spec_run is not None
    assert back.spec_run.run_id == spec.id
    assert back.tickets == ()


def test_a_run_that_does_not_exist_is_not_found(store: Store) -> None:
    page = source_of(store).run_page(4040)

    assert (page.found, page.status, page.database_error) == (False, 404, None)


def test_a_run_id_beyond_what_a_database_keeps_is_not_found_rather_than_an_error(
    store: Store,
) -> None:
    huge = 10**20
    page = source_of(store).run_page(huge)
    log = source_of(store).session_log(huge, 1)

    assert (page.found, page.status, page.database_error) == (False, 404, None)
    assert (log.lines, log.status) == (None, 404)


def test_while_the_database_is_unreachable_the_run_page_and_its_logs_say_so() -> None:
    """Refused connections: a 503 page and a 503 log, each saying ``database unreachable``;
    stderr hears of the outage once."""
    down = Store.open("postgresql+psycopg://thirdshift@127.0.0.1:1/test", migrate=False)
    said: list[str] = []
    source = StorePageSource(
        down, lambda: None, Scrubber([SECRET]), fresh_seconds=0, warn=said.append
    )
    try:
        pages = [source.run_page(3) for _ in range(2)]
        log = source.session_log(3, 4)
    finally:
        down.close()

    for page in pages:
        assert page.status == 503
        assert page.database_error is not None
        assert page.database_error.startswith("database unreachable: ")
    assert (log.lines, log.status) == (None, 503)
    assert log.problem.startswith("database unreachable: ")
    assert said == [f"status page: {pages[0].database_error}"]


def test_a_log_path_outside_the_home_s_session_logs_is_never_read(
    store: Store, tmp_path: Path
) -> None:
    """Whoever may write the database (an Actions job holds its URL) points a session's log at
    another file of the host, directly or through a link inside the logs: the page serves
    neither, and says where Session logs live."""
    logs = tmp_path / "logs"
    planted = plant_failed_run(store, "acme", "widgets", 9, logs, SECRET)
    [session] = store.run_sessions(planted.run.id)
    private = tmp_path / "id_ed25519"
    private.write_text("PRIVATE KEY\n")
    (logs / "link.jsonl").symlink_to(private)
    source = source_of(store, logs)
    for path in (private, logs / "link.jsonl", logs / ".." / "id_ed25519"):
        with store._session() as db:  # the attacker's write, not a store operation
            db.execute(
                sa.text("UPDATE sessions SET log_path = :path WHERE id = :id"),
                {"path": str(path), "id": session.id},
            )
            db.commit()
        log = source.session_log(planted.run.id, session.id)
        assert (log.lines, log.status) == (None, 404), path
        assert "is not in this daemon's home" in log.problem
    assert source_of(store, None).session_log(planted.run.id, session.id).lines is None
