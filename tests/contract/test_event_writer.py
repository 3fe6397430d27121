"""The Session events writer on a real store that refuses for a while (adr/0028)."""

from __future__ import annotations

from pathlib import Path

from tests.support.store_outage import Outage, store_with_outage
from thirdshift.clock import ManualClock
from thirdshift.records import SessionEvent
from thirdshift.sessions.event_writer import EventWriter


def _event(seq: int) -> SessionEvent:
    return SessionEvent(seq=seq, kind="message", summary=f"event {seq}")


def test_events_put_while_the_store_refuses_are_written_once_it_is_back(tmp_path: Path) -> None:
    """``put`` never raises while the store is away; the writer tries again with backoff and
    the session's end finds every event recorded once, in order."""
    clock = ManualClock()
    outage = Outage(clock, 20)
    store = store_with_outage(f"sqlite:///{tmp_path / 'db.sqlite'}", clock, outage)
    run = store.start_run(store.ensure_repository("acme", "widgets"), 1)
    session = store.start_session(run.id, "implement", harness="claude", log_path="l", prompt="p")
    said: list[str] = []
    outage.start()
    writer = EventWriter(
        lambda events: store.add_session_events(session.id, events),
        warn=said.append,
        sleep=clock.advance,  # each backoff moves the test's time on
    )

    writer.put([_event(1), _event(2)])
    writer.put([_event(3)])
    unwritten = writer.close(30)

    assert unwritten == 0
    assert outage.refused > 0
    assert [event.seq for event in store.session_events(session.id)] == [1, 2, 3]
    assert writer.count == 3
    assert writer.recent() == ("event 1", "event 2", "event 3")
    assert len([line for line in said if line.startswith("warning:")]) == 1
    store.close()


def test_a_store_that_stays_away_leaves_the_session_s_end_bounded(tmp_path: Path) -> None:
    """The end waits no longer than its bound, and says how many events were not written."""
    clock = ManualClock()
    outage = Outage(clock, 10**9)
    store = store_with_outage(f"sqlite:///{tmp_path / 'db.sqlite'}", clock, outage)
    run = store.start_run(store.ensure_repository("acme", "widgets"), 1)
    session = store.start_session(run.id, "implement", harness="claude", log_path="l", prompt="p")
    outage.start()
    writer = EventWriter(
        lambda events: store.add_session_events(session.id, events), warn=lambda _line: None
    )

    writer.put([_event(1), _event(2)])

    assert writer.close(0.5) == 2
    assert writer.count == 2
    store.close()
