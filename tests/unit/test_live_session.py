"""One session while its CLI runs: what the supervisor's and the egress proxy's callbacks do
with its output (Session log, Session events, cost), with a scripted stream reader."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from thirdshift.harnesses import CutLine, Observation, StreamOutcome, harness_named
from thirdshift.harnesses.egress import Refusal
from thirdshift.records import SessionEvent, Usage
from thirdshift.scrub import Scrubber
from thirdshift.sessions.event_writer import EventWriter
from thirdshift.sessions.ledger import NO_BUDGETS, Budgets, Spent
from thirdshift.sessions.live_session import LiveSession, Meter, SessionLog

SECRET = "planted-secret-value-123"
WORKTREE = Path("/srv/worktree")


@dataclass
class ScriptedReader:
    """Reads ``event <text>`` as one Session event with its progress line, ``cost <usd>`` as
    the cost so far, and ``result`` as the turn's result."""

    cost_usd: float = 0.0
    seen_result: bool = False

    @property
    def session_id(self) -> str | None:
        return None

    @property
    def result_seen(self) -> bool:
        return self.seen_result

    @property
    def usage_so_far(self) -> Usage:
        return Usage(cost_usd=self.cost_usd)

    def feed(self, line: bytes) -> Observation:
        word, _, rest = line.decode().partition(" ")
        if word == "event":
            return Observation(
                progress=(rest,), events=(SessionEvent(seq=0, kind="message", summary=rest),)
            )
        if word == "cost":
            self.cost_usd = float(rest)
        if word == "result":
            self.seen_result = True
        return Observation()

    def finish(self, exit_status: int | None, stopped_after_result: bool) -> StreamOutcome:
        return StreamOutcome(session_id=None, final_message=None, failed=False)


@dataclass
class Live:
    """A ``LiveSession`` and what it wrote: its Session log, progress lines and events."""

    session: LiveSession
    meter: Meter
    log: io.BytesIO
    writer: EventWriter
    events: list[SessionEvent] = field(default_factory=list)
    progress: list[str] = field(default_factory=list)

    def log_lines(self) -> list[str]:
        return self.log.getvalue().decode().splitlines()

    def recorded(self) -> list[SessionEvent]:
        assert self.writer.close(5.0) == 0
        return self.events


def _live(
    *,
    log_cap: int = 1 << 20,
    budgets: Budgets = NO_BUDGETS,
    spent: Spent | None = None,
) -> Live:
    scrub = Scrubber([SECRET])
    events: list[SessionEvent] = []
    progress: list[str] = []
    log = io.BytesIO()
    writer = EventWriter(events.extend, warn=progress.append)
    meter = Meter(harness_named("claude"), None, lambda usage: usage, budgets, spent)
    session = LiveSession(
        "implement",
        log=SessionLog(log, log_cap, scrub),
        reader=ScriptedReader(),
        writer=writer,
        meter=meter,
        worktree=WORKTREE,
        scrub=scrub,
        progress=lambda line: progress.append(scrub(line)),  # as CliOutside.progress does
    )
    return Live(session, meter, log, writer, events, progress)


def test_a_line_goes_scrubbed_to_the_log_and_its_progress_loses_the_worktree_prefix() -> None:
    """A stdout line is kept in the Session log, scrubbed; the reader's progress line is printed
    with the Worktree's prefix taken off."""
    live = _live()
    live.session.on_line(f"event edited {WORKTREE}/src/app.py with {SECRET}".encode())
    assert live.log_lines() == ["event edited /srv/worktree/src/app.py with [REDACTED]"]
    assert live.progress == ["implement: edited src/app.py with [REDACTED]"]


def test_a_cut_line_leaves_its_head_and_a_note_in_the_log_and_says_what_was_dropped() -> None:
    """A cut line's head and a ``thirdshift.cut`` note go to the Session log; a progress line
    and a ``cut`` Session event say how many bytes were dropped."""
    live = _live()
    live.session.on_cut(CutLine(head=b"x" * 1024, dropped_bytes=5000))
    head, note = live.log_lines()
    assert head == "x" * 1024
    assert json.loads(note) == {"type": "thirdshift.cut", "kept_bytes": 1024, "dropped_bytes": 5000}
    said = "a stdout line over the cap (1 KiB) was cut: 5000 bytes dropped"
    assert live.progress == [f"implement: {said}"]
    assert [(e.seq, e.kind, e.summary) for e in live.recorded()] == [(1, "cut", said)]


def test_the_session_log_stops_at_its_cap_warns_once_and_ends_with_what_it_dropped() -> None:
    """Past its cap the Session log keeps no line, says so once, and ends with the CLI's
    stderr (scrubbed) and a ``thirdshift.log_capped`` count of the lines it dropped."""
    live = _live(log_cap=10)
    for line in (b"12345678", b"more", b"and more"):
        live.session.on_line(line)
    live.session.log.end(f"bad key {SECRET}\n")
    kept, stderr, capped = live.log_lines()
    assert kept == "12345678"
    assert live.progress == [
        "implement: the Session log reached its cap (10 bytes, session_log_cap_bytes): later "
        "lines are counted, not kept"
    ]
    assert json.loads(stderr) == {"type": "thirdshift.stderr", "text": "bad key [REDACTED]\n"}
    assert json.loads(capped) == {
        "type": "thirdshift.log_capped",
        "cap_bytes": 10,
        "dropped_lines": 2,
        "dropped_bytes": 14,
    }


def test_stream_events_and_egress_refusals_share_one_numbering_and_are_scrubbed() -> None:
    """The proxy's refusals are ``network`` Session events numbered with the stream's, and
    every event's text is scrubbed before it is recorded."""
    live = _live()
    live.session.on_line(f"event read {SECRET}".encode())
    live.session.refused(Refusal(host="example.org", port=443, reason="not allowed"))
    live.session.on_line(b"event done")
    recorded = live.recorded()
    assert [(e.seq, e.kind, e.summary, e.target) for e in recorded] == [
        (1, "message", "read [REDACTED]", None),
        (
            2,
            "network",
            "agent network: refused connect to example.org:443 (not allowed)",
            "example.org:443",
        ),
        (3, "message", "done", None),
    ]


def test_the_session_is_halted_once_its_cost_so_far_reaches_a_budget() -> None:
    """The cost so far is checked after each line: at the budget the session is halted, with
    the budget it reached."""
    spent = Spent(run_usd=1.0, repository_today_usd=1.0, repository="acme/widgets")
    live = _live(budgets=Budgets(per_run_usd=2.0), spent=spent)
    live.session.on_line(b"cost 0.5")
    assert not live.meter.halt.is_set()
    live.session.on_line(b"cost 1.25")
    assert live.meter.halt.is_set()
    assert live.meter.over is not None
    assert "the cost budget per Run is reached: $2.25 spent of $2.00" in live.meter.over


def test_a_session_past_its_result_is_not_halted_by_a_budget() -> None:
    """Once the turn's result is out the session has done its work: a budget reached after it
    does not halt it (the check after the session decides)."""
    spent = Spent(run_usd=1.0, repository_today_usd=1.0, repository="acme/widgets")
    live = _live(budgets=Budgets(per_run_usd=2.0), spent=spent)
    live.session.on_line(b"result")
    live.session.on_line(b"cost 5")
    assert not live.meter.halt.is_set()
    assert live.meter.over is None


def test_what_a_session_measured_never_goes_down() -> None:
    """A later, smaller figure from the stream never lowers what was already measured."""
    live = _live()
    assert live.meter.measured(Usage(cost_usd=1.5)).cost_usd == 1.5
    assert live.meter.measured(Usage(cost_usd=0.5)).cost_usd == 1.5


def test_a_failed_egress_proxy_halts_its_session_once_and_says_why() -> None:
    """Without its proxy the agent has no network: the session is halted (and only it), with
    one progress line naming the proxy's failure."""
    live = _live()
    live.session.proxy_failed("the agent's egress proxy stopped (OSError: gone)")
    live.session.proxy_failed("a second report")
    assert live.meter.halt.is_set()
    assert live.session.proxy_failure == "the agent's egress proxy stopped (OSError: gone)"
    assert live.progress == [
        "implement: the agent's egress proxy stopped (OSError: gone); stopping the session"
    ]
