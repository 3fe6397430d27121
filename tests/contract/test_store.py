"""The store's contract, one body run on SQLite and on PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from thirdshift.clock import ManualClock
from thirdshift.errors import StoreError
from thirdshift.records import DatabaseRole, KeptResult, SessionEvent, Usage
from thirdshift.run_states import RunState
from thirdshift.sessions.preamble import follow_up_preamble
from thirdshift.store import Store, utcnow


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    opened = Store.open(database_url)
    yield opened
    opened.close()


def test_opening_migrates_to_the_newest_schema(store: Store, database_url: str) -> None:
    """A fresh database gets every table and the Alembic head revision."""
    engine = sa.create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    inspector = sa.inspect(engine)
    assert {
        "repositories",
        "runs",
        "sessions",
        "session_events",
        "claims",
        "activity",
        "review_feedback",
    } <= set(inspector.get_table_names())
    ledger = {column["name"] for column in inspector.get_columns("sessions")}
    runs = {column["name"] for column in inspector.get_columns("runs")}
    with engine.connect() as connection:
        version = connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()
    assert version == "0012"
    assert "text_sha256" in runs  # migration 0009: the text a Run started on
    assert {"cli_version", "input_tokens", "cache_write_tokens", "cost_usd", "cost_source"} <= (
        ledger
    )


def test_revision_is_the_alembic_head_the_database_was_migrated_to(
    store: Store, database_url: str
) -> None:
    """What `thirdshift doctor` reports: the revision alembic_version holds."""
    engine = sa.create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as connection:
        version = connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    engine.dispose()
    assert store.revision() == version


def test_the_role_is_postgresql_s_and_says_whether_it_is_a_superuser(
    store: Store, database_url: str
) -> None:
    """What `thirdshift doctor` warns of. The test server's user (postgres) is a superuser;
    SQLite has no roles."""
    if database_url.startswith("sqlite"):
        assert store.role() is None
    else:
        assert store.role() == DatabaseRole(sa.make_url(database_url).username or "", True)


@pytest.mark.postgres
def test_a_role_of_its_own_is_no_superuser(postgres_role_url: str) -> None:
    store = Store.open(postgres_role_url)
    try:
        assert store.role() == DatabaseRole(sa.make_url(postgres_role_url).username or "", False)
        assert store.revision() is not None  # it migrated its own schema
    finally:
        store.close()


def test_opening_twice_is_harmless(store: Store, database_url: str) -> None:
    """A second Store on an up-to-date database migrates nothing and sees the same rows."""
    store.ensure_repository("octo", "widgets")
    again = Store.open(database_url)
    assert again.ensure_repository("octo", "widgets") == store.ensure_repository("octo", "widgets")
    again.close()


def test_sqlite_runs_in_wal_mode(tmp_path: object) -> None:
    """The default SQLite database uses write-ahead logging so readers never block the daemon."""
    url = f"sqlite:///{tmp_path}/wal.db"
    opened = Store.open(url)
    engine = sa.create_engine(url)
    with engine.connect() as connection:
        mode = connection.execute(sa.text("PRAGMA journal_mode")).scalar()
    engine.dispose()
    opened.close()
    assert mode == "wal"


def test_a_run_is_recorded_updated_and_finished(store: Store) -> None:
    """A Run keeps its branch, head, cause and last Session log, and lists newest first."""
    repository = store.ensure_repository("octo", "widgets")
    first = store.start_run(repository, 7, base_branch="main", issue_branch="issue-7")
    second = store.start_run(repository, 8, harness="claude")
    store.update_run(first.id, head_sha="abc123", pull_request_number=12)
    finished = store.finish_run(
        first.id, RunState.FAILED, cause="CI-fix budget spent", last_session_log="/logs/x.jsonl"
    )
    assert finished.state == "failed"
    assert finished.head_sha == "abc123"
    assert finished.ended_at is not None
    assert finished.ended_at >= finished.started_at
    assert finished.started_at.tzinfo is not None
    assert [run.id for run in store.list_runs()] == [second.id, first.id]
    assert [run.id for run in store.list_runs(state=RunState.FAILED)] == [first.id]
    assert store.get_run(first.id) == finished
    assert store.get_run(10_000) is None


def test_updating_an_unknown_run_column_is_refused(store: Store) -> None:
    """A typo in a column name is an error, not a silently ignored write."""
    run = store.start_run(store.ensure_repository("octo", "widgets"), 1)
    with pytest.raises(StoreError, match="no column"):
        store.update_run(run.id, heed_sha="x")


def test_sessions_and_their_events_are_kept_in_order(store: Store) -> None:
    """A Session's normalized events come back in sequence, and the last N on request."""
    run = store.start_run(store.ensure_repository("octo", "widgets"), 3)
    session = store.start_session(
        run.id, "implement", harness="claude", log_path="/logs/a.jsonl", prompt="do it"
    )
    store.add_session_events(
        session.id,
        [
            SessionEvent(seq=i, kind="tool_call", tool="Bash", summary=f"$ step {i}")
            for i in range(1, 6)
        ],
    )
    assert [e.summary for e in store.session_events(session.id)] == [
        f"$ step {i}" for i in range(1, 6)
    ]
    assert [e.seq for e in store.session_events(session.id, last=2)] == [4, 5]
    ended = store.end_session(
        session.id,
        state="ended",
        harness_session_id="sess-1",
        final_message="done",
        killed_work=["npm test"],
    )
    assert ended.killed_work == "npm test"
    assert store.run_sessions(run.id) == [ended]


def test_a_repeated_event_sequence_number_is_refused(store: Store) -> None:
    """Two events cannot claim the same place in one Session."""
    run = store.start_run(store.ensure_repository("octo", "widgets"), 3)
    session = store.start_session(run.id, "implement", harness="codex", log_path="l", prompt="p")
    store.add_session_events(session.id, [SessionEvent(seq=1, kind="message", summary="a")])
    with pytest.raises(StoreError):
        store.add_session_events(session.id, [SessionEvent(seq=1, kind="message", summary="b")])


def test_the_same_event_written_again_is_recorded_once(store: Store) -> None:
    """A write tried again after its commit's answer was lost adds nothing twice."""
    run = store.start_run(store.ensure_repository("octo", "widgets"), 3)
    session = store.start_session(run.id, "implement", harness="codex", log_path="l", prompt="p")
    first = [SessionEvent(seq=1, kind="message", summary="a")]
    store.add_session_events(session.id, first)
    store.add_session_events(session.id, [*first, SessionEvent(seq=2, kind="message", summary="b")])
    assert [event.summary for event in store.session_events(session.id)] == ["a", "b"]


def test_a_lease_is_exclusive_until_it_expires(store: Store) -> None:
    """Only one owner holds an issue's Lease; an expired one is taken over with a higher
    fencing token."""
    repository = store.ensure_repository("octo", "widgets")
    now = utcnow()
    first = store.acquire_lease(repository, 5, "daemon-a", timedelta(minutes=5), now=now)
    assert first is not None
    assert first.fencing_token == 1
    assert store.acquire_lease(repository, 5, "daemon-b", timedelta(minutes=5), now=now) is None
    later = first.expires_at + timedelta(seconds=1)
    taken = store.acquire_lease(repository, 5, "daemon-b", timedelta(minutes=5), now=later)
    assert taken is not None
    assert (taken.owner, taken.fencing_token) == ("daemon-b", 2)
    assert store.lease_of(repository, 5) == taken


def test_the_holder_reacquiring_keeps_its_fencing_token(store: Store) -> None:
    """Asking again for a Lease you hold extends it without bumping the token."""
    repository = store.ensure_repository("octo", "widgets")
    now = utcnow()
    first = store.acquire_lease(repository, 5, "daemon-a", timedelta(minutes=1), now=now)
    again = store.acquire_lease(
        repository, 5, "daemon-a", timedelta(minutes=5), now=now + timedelta(seconds=10)
    )
    assert first is not None
    assert again is not None
    assert again.fencing_token == first.fencing_token
    assert again.expires_at > first.expires_at


def test_a_lost_lease_cannot_be_renewed_or_released(store: Store) -> None:
    """After a takeover the old holder's renew and release do nothing: the token fences it."""
    repository = store.ensure_repository("octo", "widgets")
    now = utcnow()
    old = store.acquire_lease(repository, 9, "daemon-a", timedelta(seconds=30), now=now)
    assert old is not None
    new = store.acquire_lease(
        repository, 9, "daemon-b", timedelta(minutes=5), now=now + timedelta(minutes=1)
    )
    assert new is not None
    assert store.renew_lease(old, timedelta(minutes=5)) is None
    assert store.release_lease(old) is False
    renewed = store.renew_lease(new, timedelta(minutes=10))
    assert renewed is not None
    assert renewed.expires_at > new.expires_at
    run = store.start_run(repository, 9)
    assert store.attach_run_to_lease(new, run.id)
    assert store.lease_of(repository, 9) is not None
    assert store.release_lease(new) is True
    assert store.lease_of(repository, 9) is None


def test_fencing_tokens_never_restart_so_a_late_release_cannot_free_a_newer_lease(
    store: Store,
) -> None:
    """A holds token 1 and expires; B takes over with 2 and releases; C gets 3, not 1; A's
    late release and renewal then change nothing, and C still holds the issue."""
    repository = store.ensure_repository("octo", "widgets")
    now = utcnow()
    a = store.acquire_lease(repository, 4, "run-a", timedelta(seconds=30), now=now)
    assert a is not None
    b = store.acquire_lease(
        repository, 4, "run-b", timedelta(minutes=5), now=now + timedelta(minutes=1)
    )
    assert b is not None
    assert b.fencing_token == 2
    assert store.release_lease(b) is True
    c = store.acquire_lease(
        repository, 4, "run-c", timedelta(minutes=5), now=now + timedelta(minutes=2)
    )
    assert c is not None
    assert c.fencing_token == 3
    assert store.release_lease(a) is False
    assert store.renew_lease(a, timedelta(minutes=5)) is None
    assert store.release_lease(b) is False
    assert store.lease_of(repository, 4) == c


def test_earlier_runs_are_those_of_the_same_issue_however_busy_the_database(
    store: Store,
) -> None:
    """A Continuation finds its issue's earlier Run even behind many Runs of other issues."""
    repository = store.ensure_repository("octo", "widgets")
    other = store.ensure_repository("octo", "gadgets")
    first = store.start_run(repository, 7)
    for number in range(30):
        store.start_run(other, 7)
        store.start_run(repository, 100 + number)
    current = store.start_run(repository, 7)
    assert [run.id for run in store.earlier_runs(current)] == [first.id]


def test_concurrent_acquirers_get_exactly_one_lease(store: Store, database_url: str) -> None:
    """Eight threads with their own connections race for one issue; one wins."""
    repository = store.ensure_repository("octo", "widgets")
    stores = [Store.open(database_url, migrate=False) for _ in range(8)]
    barrier = threading.Barrier(len(stores))
    winners: list[str] = []

    def race(index: int, contender: Store) -> None:
        barrier.wait()
        lease = contender.acquire_lease(repository, 11, f"daemon-{index}", timedelta(minutes=5))
        if lease is not None:
            winners.append(lease.owner)

    threads = [threading.Thread(target=race, args=pair) for pair in enumerate(stores)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for contender in stores:
        contender.close()
    assert len(winners) == 1


def test_an_unreachable_database_names_the_url_without_its_password() -> None:
    """A bad database URL stops with a StoreError that hides the password."""
    with pytest.raises(StoreError) as caught:
        Store.open("postgresql://someone:hunter2@127.0.0.1:1/nowhere")
    message = str(caught.value)
    assert "127.0.0.1:1/nowhere" in message
    assert "hunter2" not in message


def test_several_processes_opening_one_new_database_at_once_all_work(database_url: str) -> None:
    """Four openers race to migrate a brand-new database: the migrations run once, under a
    lock, and every opener gets a working store."""
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []
    opened: list[Store] = []

    def open_it() -> None:
        barrier.wait()
        try:
            opened.append(Store.open(database_url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    try:
        assert errors == []
        assert len(opened) == 4
        repository = opened[0].ensure_repository("octo", "widgets")
        assert opened[3].start_run(repository, 1).id > 0
    finally:
        for store in opened:
            store.close()


class _ClockAhead:
    """A machine clock an hour fast, as on a host whose time drifted."""

    def now(self) -> datetime:
        return utcnow() + timedelta(hours=1)

    def monotonic(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        raise AssertionError("the store never waits")

    def salvaging(self, seconds: float) -> None:
        raise AssertionError("the store never salvages")


@pytest.mark.postgres
def test_a_host_whose_clock_runs_ahead_cannot_take_over_a_live_lease(
    postgres_url: str,
) -> None:
    """Expiry is judged by the database server's clock: a host an hour fast still finds a
    ten-minute Lease live; judged by its own clock it would have taken the issue over."""
    honest = Store.open(postgres_url)
    repository = honest.ensure_repository("octo", "widgets")
    held = honest.acquire_lease(repository, 3, "run-a", timedelta(minutes=10))
    assert held is not None
    fast = Store.open(postgres_url, clock=_ClockAhead(), database_time=True, migrate=False)
    naive = Store.open(postgres_url, clock=_ClockAhead(), database_time=False, migrate=False)
    try:
        assert fast.acquire_lease(repository, 3, "run-b", timedelta(minutes=10)) is None
        assert fast.lease_held(held) is True
        # The same host judging by its own clock would take a live Lease: what the fence stops.
        assert naive.acquire_lease(repository, 3, "run-c", timedelta(minutes=10)) is not None
    finally:
        fast.close()
        naive.close()
        honest.close()


def test_dead_runs_are_those_whose_lease_is_gone_or_held_by_a_later_run(store: Store) -> None:
    """A running Run with an expired, released or taken-over Lease is dead; one whose Lease is
    live (attached or not yet) is not; a crash is recorded once and never over an ending."""
    repository = store.ensure_repository("octo", "widgets")
    now = utcnow()
    ttl = timedelta(minutes=5)
    live = store.start_run(repository, 1)
    lease = store.acquire_lease(repository, 1, "a", ttl, now=now)
    assert lease is not None
    store.attach_run_to_lease(lease, live.id)
    starting = store.start_run(repository, 2)  # took its Lease, not attached yet
    assert store.acquire_lease(repository, 2, "b", ttl, now=now) is not None
    expired = store.start_run(repository, 3)
    assert store.acquire_lease(repository, 3, "c", timedelta(seconds=1), now=now - ttl)
    released = store.start_run(repository, 4)
    gone = store.acquire_lease(repository, 4, "d", ttl, now=now)
    assert gone is not None
    store.release_lease(gone)
    superseded = store.start_run(repository, 5)
    old = store.acquire_lease(repository, 5, "e", timedelta(seconds=1), now=now - ttl)
    assert old is not None
    successor = store.start_run(repository, 5)
    newer = store.acquire_lease(repository, 5, "f", ttl, now=now)
    assert newer is not None
    store.attach_run_to_lease(newer, successor.id)
    never = store.start_run(repository, 6)  # no Lease row at all
    finished = store.start_run(repository, 7)
    store.finish_run(finished.id, RunState.SUCCEEDED)

    dead = [run.id for run in store.dead_runs(repository, now=now)]
    assert dead == [expired.id, released.id, superseded.id, never.id]
    assert live.id not in dead
    assert starting.id not in dead
    assert successor.id not in dead

    assert store.record_crash(expired.id, "its Lease expired") is True
    assert store.record_crash(expired.id, "again") is False
    assert store.record_crash(finished.id, "too late") is False
    crashed = store.get_run(expired.id)
    assert crashed is not None
    assert crashed.state == "crashed"
    assert crashed.cause == "its Lease expired"
    assert crashed.ended_at is not None
    assert store.latest_run(repository, 5) == store.get_run(successor.id)


def test_activity_lines_are_kept_per_repository_in_order(store: Store) -> None:
    """The Activity log keeps each line with its repository, issue and Run."""
    widgets = store.ensure_repository("octo", "widgets")
    gadgets = store.ensure_repository("octo", "gadgets")
    store.add_activity("pickup", "picked up #3", daemon="d1", repository=widgets, issue_number=3)
    store.add_activity("poll", "gadgets failed", daemon="d1", repository=gadgets)
    store.add_activity("stop", "stopping", daemon="d1")
    lines = store.activity()
    assert [(a.kind, a.repository, a.issue_number) for a in lines] == [
        ("pickup", "octo/widgets", 3),
        ("poll", "octo/gadgets", None),
        ("stop", None, None),
    ]
    assert [a.message for a in store.activity(repository=widgets)] == ["picked up #3"]


def test_runs_list_by_repository_whatever_its_case_and_by_state(store: Store) -> None:
    """`thirdshift runs --repo` sees only that repository's Runs, newest first, and combines
    with the state and the limit."""
    widgets = store.ensure_repository("octo", "widgets")
    gadgets = store.ensure_repository("octo", "gadgets")
    first = store.start_run(widgets, 1)
    store.start_run(gadgets, 2)
    third = store.start_run(widgets, 3)
    store.finish_run(first.id, RunState.FAILED, cause="no pull request")
    assert [run.id for run in store.list_runs(repository="Octo/Widgets")] == [third.id, first.id]
    assert [run.id for run in store.list_runs(repository="octo/widgets", limit=1)] == [third.id]
    assert [
        run.id for run in store.list_runs(repository="octo/widgets", state=RunState.FAILED)
    ] == [first.id]
    assert store.list_runs(repository="octo/nothing") == []


def test_activity_lines_of_one_run_are_its_own(store: Store) -> None:
    """`thirdshift show` takes the Activity lines naming its Run, not its neighbours'."""
    widgets = store.ensure_repository("octo", "widgets")
    run = store.start_run(widgets, 1)
    other = store.start_run(widgets, 2)
    store.add_activity("pickup", "picked up #1", daemon="d1", repository=widgets, run_id=run.id)
    store.add_activity("pickup", "picked up #2", daemon="d1", repository=widgets, run_id=other.id)
    store.add_activity("end", "#1 ended", daemon="d1", repository=widgets, run_id=run.id)
    assert [a.message for a in store.activity(run_id=run.id)] == ["picked up #1", "#1 ended"]


def test_the_usage_ledger_adds_up_only_the_runs_asked_for(store: Store) -> None:
    """`thirdshift runs` prices each Run it lists from the ledger of those Runs alone; a
    session with no cost figure counts as unpriced."""
    widgets = store.ensure_repository("octo", "widgets")
    runs = [store.start_run(widgets, n) for n in (1, 2, 3)]
    for run, cost in zip(runs, (0.25, 0.5, None), strict=True):
        row = store.start_session(run.id, "implement", harness="claude", log_path="/l", prompt="p")
        store.end_session(row.id, state="ended", usage=Usage(cost_usd=cost))
    totals = {t.key: t for t in store.usage_ledger("run", runs=[runs[0].id, runs[2].id])}
    assert set(totals) == {str(runs[0].id), str(runs[2].id)}
    assert (totals[str(runs[0].id)].cost_usd, totals[str(runs[0].id)].unpriced_sessions) == (
        0.25,
        0,
    )
    assert totals[str(runs[2].id)].unpriced_sessions == 1


def test_a_run_keeps_the_digest_of_the_text_it_started_on(store: Store) -> None:
    """Read back with the Run (migration 0009); a Run recorded without one has none."""
    repository = store.ensure_repository("octo", "widgets")
    lease = store.acquire_lease(repository, 9, "run-a", timedelta(minutes=5))
    assert lease is not None
    run = store.start_run_under(lease, repository, 9, text_sha256="ab" * 32)
    assert run is not None
    assert run.text_sha256 == "ab" * 32
    latest = store.latest_run(repository, 9)
    assert latest is not None
    assert latest.text_sha256 == "ab" * 32
    assert store.start_run(repository, 10).text_sha256 is None


def test_a_run_is_recorded_under_its_lease_only_while_the_lease_is_held(store: Store) -> None:
    """A Run paused between taking its Lease and recording itself, past the Lease, records
    nothing: its successor's Run stays the issue's newest."""
    repository = store.ensure_repository("octo", "widgets")
    now = utcnow()
    paused = store.acquire_lease(repository, 8, "run-a", timedelta(seconds=30), now=now)
    assert paused is not None
    successor = store.acquire_lease(
        repository, 8, "run-b", timedelta(minutes=5), now=now + timedelta(minutes=1)
    )
    assert successor is not None
    newest = store.start_run_under(successor, repository, 8, issue_branch="issue-8")
    assert newest is not None

    assert store.start_run_under(paused, repository, 8, issue_branch="issue-8") is None

    assert store.latest_run(repository, 8) == newest
    assert [run.id for run in store.list_runs()] == [newest.id]
    lease = store.lease_of(repository, 8)
    assert lease is not None
    assert lease.run_id == newest.id


def test_an_architect_result_is_kept_only_under_the_lease_its_run_holds(store: Store) -> None:
    """Kept with the fencing token it was kept under while the Run holds the Lease; refused
    (nothing written) once another Run took the Lease over, and by a Lease of another Run."""
    repository = store.ensure_repository("octo", "widgets")
    now = utcnow()
    lease = store.acquire_lease(repository, 0, "architect-a", timedelta(minutes=5), now=now)
    assert lease is not None
    run = store.start_run_under(lease, repository, 0, kind="architect")
    assert run is not None
    assert store.kept_result(run.id) is None
    assert store.keep_architect_result(lease, run.id, '{"kept": 1}', head_sha="abc")
    kept = store.kept_result(run.id)
    assert kept is not None
    assert (kept.text, kept.fencing_token) == ('{"kept": 1}', lease.fencing_token)
    assert store.get_run(run.id).head_sha == "abc"  # type: ignore[union-attr]

    other = store.start_run(repository, 0, kind="architect")
    assert not store.keep_architect_result(lease, other.id, '{"kept": 2}')
    assert store.kept_result(other.id) is None

    successor = store.acquire_lease(
        repository, 0, "architect-b", timedelta(minutes=5), now=now + timedelta(minutes=6)
    )
    assert successor is not None
    assert not store.keep_architect_result(lease, run.id, '{"kept": 3}', head_sha="def")
    assert store.kept_result(run.id) == kept  # untouched by the Run that lost the Lease
    assert store.get_run(run.id).head_sha == "abc"  # type: ignore[union-attr]


def test_a_result_recorded_with_a_run_under_its_lease_carries_the_lease_s_token(
    store: Store,
) -> None:
    """A completing Architect run records the result it completes with itself, under its
    Lease; a Run recorded without a Lease keeps no token."""
    repository = store.ensure_repository("octo", "widgets")
    lease = store.acquire_lease(repository, 0, "architect-a", timedelta(minutes=5))
    assert lease is not None
    run = store.start_run_under(lease, repository, 0, kind="architect", architect_result="{}")
    assert run is not None
    assert store.kept_result(run.id) == KeptResult("{}", lease.fencing_token)
    unfenced = store.start_run(repository, 0, kind="architect", architect_result="{}")
    assert store.kept_result(unfenced.id) == KeptResult("{}", None)


def test_a_repository_is_one_whatever_the_case_of_its_name(store: Store) -> None:
    """GitHub ignores case in owner and name: two spellings are one repository, so one issue
    has one Lease however a daemon or a URL spells it."""
    first = store.ensure_repository("Octo-Org", "Widgets")
    assert store.ensure_repository("octo-org", "widgets") == first
    lease = store.acquire_lease(first, 1, "run-a", timedelta(minutes=5))
    assert lease is not None
    other = store.ensure_repository("OCTO-ORG", "WIDGETS")
    assert store.acquire_lease(other, 1, "run-b", timedelta(minutes=5)) is None


@pytest.mark.postgres
def test_a_run_is_not_recorded_under_a_lease_that_expired_untaken(postgres_url: str) -> None:
    """The Lease ran out and nobody took it yet: a Run is still not recorded under it (judged
    by the database's clock)."""
    store = Store.open(postgres_url)
    try:
        repository = store.ensure_repository("octo", "widgets")
        past = utcnow() - timedelta(hours=1)
        lapsed = store.acquire_lease(repository, 9, "run-a", timedelta(minutes=5), now=past)
        assert lapsed is not None
        assert store.start_run_under(lapsed, repository, 9) is None
        assert store.list_runs() == []
    finally:
        store.close()


def test_the_issue_s_history_runs_across_its_runs_with_each_run_s_outcome(store: Store) -> None:
    """A three-Run chain: two Failed runs, then the third's own ended sessions. The history is
    oldest first, counts every step (not only the newest handed over), and the last session of
    each earlier Run carries how it ended; the preamble puts the nearest inline and the older
    as pointers naming their Run."""
    repository = store.ensure_repository("octo", "widgets")

    def session(run_id: int, kind: str, steps: int, state: str = "ended") -> None:
        row = store.start_session(
            run_id, kind, harness="claude", log_path=f"/logs/{kind}.jsonl", prompt=f"{kind} it"
        )
        store.add_session_events(
            row.id,
            [
                SessionEvent(seq=i, kind="tool_call", tool="Bash", summary=f"$ {kind} {i}")
                for i in range(1, steps + 1)
            ],
        )
        store.end_session(row.id, state=state, harness_session_id=None, final_message=f"{kind}.")

    first = store.start_run(repository, 7)
    session(first.id, "implement", 3, state="failed")
    store.finish_run(first.id, RunState.FAILED, cause="the model gave up")
    second = store.start_run(repository, 7)
    session(second.id, "implement", 80)
    session(second.id, "repair-1", 2)
    store.finish_run(
        second.id,
        RunState.FAILED,
        cause="CI stayed red",
        pull_request_number=12,
        head_sha="abc1234ff",
    )
    third = store.start_run(repository, 7)
    session(third.id, "implement", 1)
    store.start_session(third.id, "repair-1", harness="claude", log_path="/l", prompt="now")

    history = store.issue_history(third, last_events=50)

    assert [(h.run_id, h.kind) for h in history] == [
        (first.id, "implement"),
        (second.id, "implement"),
        (second.id, "repair-1"),
        (third.id, "implement"),
    ]
    assert [h.step_count for h in history] == [3, 80, 2, 1]
    assert len(history[1].steps) == 50
    assert history[0].run_outcome == "ended failed: the model gave up"
    assert (history[2].run_outcome, history[2].pull_request, history[2].head) == (
        "ended failed: CI stayed red",
        12,
        "abc1234ff",
    )
    assert history[1].run_outcome is None
    assert store.issue_history(third, last_events=50, sessions=2) == history[-2:]

    text = follow_up_preamble(store.issue_history(second, last_events=50))
    assert f"- Run {first.id}, session implement: implement. (the Run ended failed: the model" in (
        text
    )
    assert f"The session just before this one (Run {second.id}, session repair-1):" in text


def test_the_usage_ledger_keeps_each_session_s_usage_and_adds_it_up_by_run_repository_and_day(
    database_url: str,
) -> None:
    """Each session's usage is kept as the stream gave it (a failed session's too); the ledger
    adds it up per Run, repository and UTC day with every Harness named; a session without a
    cost figure adds none and is counted as unpriced; the budget sums see the same figures."""
    clock = ManualClock(datetime(2026, 3, 1, 23, 0, tzinfo=UTC))
    store = Store.open(database_url, clock=clock)
    try:
        widgets = store.ensure_repository("octo", "widgets")
        gadgets = store.ensure_repository("octo", "gadgets")

        def session(run_id: int, harness: str, usage: Usage, state: str = "ended") -> None:
            row = store.start_session(
                run_id, "implement", harness=harness, log_path="/l", prompt="p", model="asked"
            )
            clock.advance(30)
            store.end_session(row.id, state=state, usage=usage)

        first = store.start_run(widgets, 1)
        session(
            first.id,
            "claude",
            Usage(
                turns=3,
                input_tokens=1000,
                cached_input_tokens=600,
                cache_write_tokens=100,
                output_tokens=50,
                cost_usd=0.25,
                cost_source="reported",
                model="claude-opus-5-5",
                cli_version="2.1.328",
            ),
            state="failed",
        )
        session(first.id, "codex", Usage(input_tokens=500, output_tokens=20, model=None))
        clock.advance(2 * 3600)  # past midnight, UTC
        second = store.start_run(gadgets, 2)
        session(second.id, "claude", Usage(turns=1, cost_usd=0.5, cost_source="reported"))

        [kept, _] = store.run_sessions(first.id)
        by_run = store.usage_ledger("run")
        by_repository = {t.key: t for t in store.usage_ledger("repository")}
        by_day = [(t.key, round(t.cost_usd, 4), t.sessions) for t in store.usage_ledger("day")]
        first_day = datetime(2026, 3, 1, tzinfo=UTC)
        widgets_on_first_day = store.repository_cost(
            "OCTO", "Widgets", first_day, first_day + timedelta(days=1)
        )
        widgets_next_day = store.repository_cost(
            "octo", "widgets", first_day + timedelta(days=1), first_day + timedelta(days=2)
        )
        only_gadgets = store.usage_ledger("run", repository="octo/gadgets")
        run_cost = store.run_cost(first.id)
    finally:
        store.close()

    assert kept.usage == Usage(
        turns=3,
        input_tokens=1000,
        cached_input_tokens=600,
        cache_write_tokens=100,
        output_tokens=50,
        cost_usd=0.25,
        cost_source="reported",
        model="claude-opus-5-5",
        cli_version="2.1.328",
    )
    assert [total.label for total in by_run] == [
        f"Run {second.id} (octo/gadgets#2)",
        f"Run {first.id} (octo/widgets#1)",
    ]
    widgets_total = by_repository["octo/widgets"]
    assert widgets_total.harnesses == ("claude (claude-opus-5-5)", "codex (asked)")
    assert (widgets_total.input_tokens, widgets_total.output_tokens) == (1500, 70)
    assert (widgets_total.cost_usd, widgets_total.unpriced_sessions) == (0.25, 1)
    assert widgets_total.duration_seconds == 60
    assert by_day == [("2026-03-02", 0.5, 1), ("2026-03-01", 0.25, 2)]
    assert (widgets_on_first_day, widgets_next_day, run_cost) == (0.25, 0.0, 0.25)
    assert [total.key for total in only_gadgets] == [str(second.id)]


def test_the_usage_ledger_refuses_a_grouping_it_does_not_have(store: Store) -> None:
    with pytest.raises(StoreError, match="no totals by 'week'"):
        store.usage_ledger("week")


def test_the_ledger_migration_goes_down_and_up_again_with_sessions_and_events_kept(
    database_url: str,
) -> None:
    """0004 adds the ledger's columns to a database holding sessions and their events, and can
    be taken back (foreign keys on) without losing a session."""
    from alembic import command

    from thirdshift.store.engine import alembic_config, make_engine

    store = Store.open(database_url)
    run = store.start_run(store.ensure_repository("octo", "widgets"), 1)
    row = store.start_session(run.id, "implement", harness="claude", log_path="/l", prompt="p")
    store.add_session_events(row.id, [SessionEvent(seq=1, kind="message", summary="hi")])
    store.end_session(row.id, state="ended", usage=Usage(input_tokens=5, cost_usd=0.1))
    store.close()
    engine = make_engine(database_url)
    try:
        command.downgrade(alembic_config(engine), "0003")
        columns = {column["name"] for column in sa.inspect(engine).get_columns("sessions")}
        command.upgrade(alembic_config(engine), "head")
    finally:
        engine.dispose()

    assert "cost_usd" not in columns
    reopened = Store.open(database_url)
    try:
        [kept] = reopened.run_sessions(run.id)
        events = reopened.session_events(kept.id)
    finally:
        reopened.close()
    assert (kept.kind, kept.usage.cost_usd) == ("implement", None)  # the figures went with 0004
    assert [event.summary for event in events] == ["hi"]


def test_a_run_end_may_be_announced_once_and_only_once_it_ended(store: Store) -> None:
    """``claim_notice`` is True for the first call on an ended Run and False for any other: a
    running Run, a second call, a second store on the same database."""
    run = store.start_run(store.ensure_repository("octo", "widgets"), 1)
    assert store.claim_notice(run.id) is False  # still running
    store.finish_run(run.id, RunState.FAILED, cause="boom")
    assert store.claim_notice(run.id) is True
    assert store.claim_notice(run.id) is False
    store.finish_run(run.id, RunState.FAILED, cause="recorded twice")
    assert store.claim_notice(run.id) is False


def test_a_run_holds_its_lease_while_it_is_attached_and_unexpired(store: Store) -> None:
    repository = store.ensure_repository("octo", "widgets")
    run = store.start_run(repository, 5)
    assert not store.holds_lease(run)  # no Lease at all
    lease = store.acquire_lease(repository, 5, "d:1", timedelta(minutes=10))
    assert lease is not None
    assert not store.holds_lease(run)  # held, but not by this Run yet
    store.attach_run_to_lease(lease, run.id)
    assert store.holds_lease(run)
    assert store.release_lease(lease)
    assert not store.holds_lease(run)


def test_a_holder_paused_inside_a_write_does_not_stall_the_takeover_of_its_lease(
    postgres_url: str,
) -> None:
    """A is stopped (SIGSTOP, a frozen VM) between renewing its Lease and committing, so it
    keeps the claims row locked. B's takeover after expiry does not wait on A forever: the
    server ends A's idle transaction, and B gets the Lease with the next fencing token; A's
    late commit fails as a database error, and A's renewal then finds the Lease lost."""
    a = Store.open(postgres_url, stall_seconds=1)
    # B's own lock bound is longer than A's idle bound: B waits out A, it does not give up
    # first (both at 1 s raced, and B sometimes lost on a busy machine).
    b = Store.open(postgres_url, stall_seconds=10)
    try:
        repository = a.ensure_repository("octo", "widgets")
        past = utcnow() - timedelta(minutes=10)
        held = a.acquire_lease(repository, 3, "run-a", timedelta(minutes=5), now=past)
        assert held is not None
        paused = a._engine.connect()  # A's renewal, cut off before its commit
        paused.execute(sa.text("UPDATE claims SET expires_at = expires_at WHERE issue_number = 3"))
        started = time.monotonic()
        taken = b.acquire_lease(repository, 3, "run-b", timedelta(minutes=5))
        waited = time.monotonic() - started
        assert taken is not None
        assert (taken.owner, taken.fencing_token) == ("run-b", 2)
        assert waited < 20, f"B waited {waited:.1f} s on A's lock"
        with pytest.raises(sa.exc.DBAPIError, match="idle-in-transaction timeout"):
            paused.commit()
        paused.close()
        assert a.renew_lease(held, timedelta(minutes=5)) is None
    finally:
        a.close()
        b.close()


def test_a_statement_waits_for_a_lock_only_so_long_then_fails_as_a_database_error(
    postgres_url: str,
) -> None:
    """A lock held by a live transaction (not idle: a slow statement) makes a write wait at
    most its bound, then fail with a StoreError its caller retries, never hang."""
    a = Store.open(postgres_url, stall_seconds=60)
    b = Store.open(postgres_url, stall_seconds=1)
    try:
        repository = a.ensure_repository("octo", "widgets")
        run = a.start_run(repository, 7)
        busy = a._engine.connect()
        busy.execute(sa.text("UPDATE runs SET cause = 'busy' WHERE id = :id"), {"id": run.id})
        started = time.monotonic()
        with pytest.raises(StoreError, match="database error"):
            b.record_crash(run.id, "gone")
        assert time.monotonic() - started < 20
        busy.rollback()
        busy.close()
        assert b.record_crash(run.id, "gone") is True
    finally:
        a.close()
        b.close()


def test_review_feedback_is_taken_once_and_counts_the_review_repairs_of_a_pull(
    store: Store,
) -> None:
    """A key another Run took stays that Run's; each pull request counts the Runs that took
    its feedback, its review Repairs."""
    repository = store.ensure_repository("octo", "widgets")
    first, second = store.start_run(repository, 3), store.start_run(repository, 3)
    assert store.take_feedback(repository, 12, ["review:1", "comment:7"], first.id) == (
        "review:1",
        "comment:7",
    )
    assert store.take_feedback(repository, 12, ["review:1", "review:2"], second.id) == ("review:2",)
    assert store.handled_feedback(repository, 12) == {"review:1", "comment:7", "review:2"}
    assert store.handled_feedback(repository, 13) == frozenset()
    assert store.review_repairs(repository, 12) == 2
    assert store.review_repairs(repository, 13) == 0


def test_a_rescue_takes_over_the_feedback_of_the_run_that_crashed(store: Store) -> None:
    """Keys the crashed Run took pass to its Rescue; others' stay theirs."""
    repository = store.ensure_repository("octo", "widgets")
    first, crashed, rescue = (store.start_run(repository, 3) for _ in range(3))
    store.take_feedback(repository, 12, ["review:1"], first.id)
    store.take_feedback(repository, 12, ["review:2"], crashed.id)
    taken = store.take_feedback(
        repository, 12, ["review:1", "review:2", "comment:9"], rescue.id, from_run=crashed.id
    )
    assert taken == ("review:2", "comment:9")
    assert store.feedback_of_run(crashed.id) == frozenset()
    assert store.feedback_of_run(first.id) == {"review:1"}
    assert store.review_repairs(repository, 12) == 2


def test_the_heads_recorded_for_an_issue_branch_are_those_of_its_own_runs(store: Store) -> None:
    """Each Run's last head along the way and the head it ended at count for its issue and
    branch only: a head of another issue, or of the issue's next branch, is not one of them."""
    repository = store.ensure_repository("octo", "widgets")
    failed = store.start_run(repository, 2, issue_branch="issue-2")
    store.record_branch_head(failed.id, "a" * 40)
    store.record_branch_head(failed.id, "b" * 40)
    store.finish_run(failed.id, RunState.FAILED, head_sha="c" * 40)
    crashed = store.start_run(repository, 2, issue_branch="issue-2")
    store.record_branch_head(crashed.id, "d" * 40)
    other = store.start_run(repository, 5, issue_branch="issue-5")
    store.record_branch_head(other.id, "e" * 40)
    later = store.start_run(repository, 2, issue_branch="issue-2-branch-2")
    store.record_branch_head(later.id, "f" * 40)

    assert store.recorded_heads(repository, 2, "issue-2") == {"b" * 40, "c" * 40, "d" * 40}
    assert store.recorded_heads(repository, 5, "issue-2") == frozenset()
