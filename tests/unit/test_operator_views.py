"""The operator views' rules: one JSON shape per entity, the lines `runs` and `show` print, and
a Session log read back (condensed, raw, followed) against a scripted database and a real file."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from thirdshift.clock import ManualClock
from thirdshift.errors import NotRecorded
from thirdshift.harnesses import harness_named
from thirdshift.records import (
    Activity,
    Lease,
    Repository,
    Run,
    SessionRecord,
    Usage,
    UsageTotal,
    add_usage,
)
from thirdshift.report import logs, shapes, views
from thirdshift.run_states import RunKind, RunState

T0 = datetime(2026, 3, 1, 23, 0, tzinfo=UTC)
REPO = Repository(1, "acme", "calculator")
TRANSCRIPTS = Path(__file__).parents[1] / "fixtures" / "transcripts"


def run(**changes: object) -> Run:
    base = Run(
        id=2, repository=REPO, issue_number=7, kind=RunKind.DELIVERY,
        state=RunState.SUCCEEDED, base_branch="main", issue_branch="issue-7", head_sha="abc123",
        pull_request_number=3, harness="claude",
        model=None, cause=None, killed_work=None, last_session_log=None, started_at=T0,
        ended_at=T0 + timedelta(seconds=65),
    )  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def session(**changes: object) -> SessionRecord:
    base = SessionRecord(
        id=5, run_id=2, kind="implement", harness="claude", model=None, harness_session_id="s1",
        resumed_from_id=None, log_path="/logs/x.jsonl", state="ended", prompt="brief",
        final_message="done", killed_work=None, error=None, started_at=T0,
        ended_at=T0 + timedelta(seconds=60),
        usage=Usage(turns=3, cost_usd=0.25, cost_source="reported", model="claude-x"),
    )  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def total(*sessions: SessionRecord) -> UsageTotal:
    summed: UsageTotal | None = None
    for one in sessions:
        summed = add_usage(
            summed, "2", "Run 2", one.harness, one.usage, one.started_at, one.ended_at
        )
    assert summed is not None
    return summed


# -- shapes ------------------------------------------------------------------------------------


def test_every_shape_names_its_type_and_version_and_gives_times_in_utc() -> None:
    """Scripts tell entities apart by `type`; times are ISO 8601 UTC whatever zone the record
    had, a zone-less time being the store's UTC."""
    paris = T0.astimezone(__import__("zoneinfo").ZoneInfo("Europe/Paris"))
    lease = Lease(1, 7, "daemon-a", 3, 2, paris, T0.replace(tzinfo=None))
    activity = Activity(9, "pickup", "daemon-a", "picked up #7", T0, "acme/calculator", 7, 2)
    made = [
        shapes.run_shape(run(), None),
        shapes.session_shape(session()),
        shapes.lease_shape(lease),
        shapes.activity_shape(activity),
        shapes.usage_shape(Usage()),
        shapes.usage_total_shape(total(session())),
    ]
    assert [(s["type"], s["version"]) for s in made] == [
        ("run", 1), ("session", 1), ("lease", 1), ("activity", 1), ("usage", 1),
        ("usage_total", 1),
    ]  # fmt: skip
    assert made[2]["acquired_at"] == "2026-03-01T23:00:00+00:00"
    assert made[2]["expires_at"] == "2026-03-01T23:00:00+00:00"
    assert made[0]["duration_seconds"] == 65
    assert made[1]["usage"]["cost_usd"] == 0.25
    assert json.loads(json.dumps(made)) == made  # plain values only


def test_a_run_view_nests_each_entity_in_its_own_shape() -> None:
    """`show --json` repeats the run, session and activity shapes `runs --json` and others
    print: one shape per entity, wherever it appears."""
    earlier = run(id=1, state="failed", cause="interrupted", pull_request_number=None)
    usage = {2: total(session())}
    view = shapes.run_view_shape(
        run(), usage=usage, lease=None, sessions=[session()], earlier_runs=[earlier], activity=[]
    )
    assert view["run"] == shapes.run_shape(run(), usage[2])
    assert view["sessions"] == [shapes.session_shape(session())]
    assert view["earlier_runs"] == [shapes.run_shape(earlier, None)]
    assert (view["type"], view["lease"], view["activity"]) == ("run_view", None, [])


def test_a_running_run_has_no_end_and_no_duration() -> None:
    shape = shapes.run_shape(run(state="running", ended_at=None), None)
    assert (shape["ended_at"], shape["duration_seconds"], shape["usage"]) == (None, None, None)


# -- the lines people read ----------------------------------------------------------------------


def test_a_run_line_names_its_issue_outcome_pull_request_harness_and_cost() -> None:
    line = views.run_line(run(), total(session()))
    assert line == (
        "Run 2  acme/calculator#7  run  succeeded  ready  PR #3  2026-03-01 23:00:00 UTC  1m 05s  "
        "claude (claude-x)  $0.2500"
    )


def test_a_run_line_gives_the_cause_of_a_run_that_did_not_succeed() -> None:
    failed = run(state="failed", cause="Declined CI fix", pull_request_number=None)
    assert "  run  failed  Declined CI fix  no PR  " in views.run_line(failed, None)
    assert "  run  running  -  PR #3  " in views.run_line(run(state="running", ended_at=None), None)


def test_a_run_with_an_unpriced_session_says_so_beside_its_cost() -> None:
    unpriced = session(id=6, usage=Usage(input_tokens=10))
    assert views.run_line(run(), total(session(), unpriced)).endswith("$0.2500 + unpriced")
    assert views.run_line(run(harness=None), None).endswith("  -  -")


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"kind": "merge"}, "merged"),
        ({"state": "failed", "cause": "Declined CI fix"}, "failed: Declined CI fix"),
        ({"state": "refused", "cause": "merge refused"}, "Policy refusal: merge refused"),
        ({"state": "crashed", "cause": None}, "crashed: no cause recorded"),
        ({"state": "running", "ended_at": None}, "running"),
    ],
)
def test_the_outcome_of_a_run_follows_its_state(changes: dict[str, object], said: str) -> None:
    assert views.outcome(run(**changes)) == said


def test_show_bounds_each_prompt_and_names_what_a_resume_resumed() -> None:
    """Text mode shows the top of each prompt (where the preamble is) and says where the rest
    is; a Resume names the session it resumed; the Lease and earlier Runs are listed."""
    prompt = "\n".join(f"line {n}" for n in range(30))
    first = session(prompt=prompt)
    resume = session(id=6, kind="implement-resume", resumed_from_id=5, prompt="go on")
    lease = Lease(1, 7, "thirdshift run on host", 4, 2, T0, T0 + timedelta(minutes=5))
    earlier = run(id=1, state="failed", cause="interrupted")
    lines = views.show_lines(
        run(),
        usage={2: total(first, resume)},
        lease=lease,
        sessions=[first, resume],
        earlier_runs=[earlier],
        activity=[Activity(1, "end", "d", "Run 2 ended", T0, "acme/calculator", 7, 2)],
        prompt_lines=4,
    )
    text = "\n".join(lines)
    assert "       | line 3\n       | … 26 more line(s): `thirdshift show 2 --json`" in text
    assert "line 4" not in text
    assert "  2. implement-resume (resumes session 5, implement): claude (claude-x)" in text
    assert "  Lease: thirdshift run on host, fencing token 4, Run 2, until 2026-03-01 23:05:00" in (
        text
    )
    assert "Earlier Runs on acme/calculator#7 (1):\n  Run 1  acme/calculator#7  run  failed" in text
    assert "  2026-03-01 23:00:00 UTC end: Run 2 ended" in text


# -- Session logs --------------------------------------------------------------------------------


def test_a_log_condensed_gives_the_progress_lines_its_harness_reader_gives() -> None:
    """The same reader a Run feeds: the condensed log is the Run's progress lines, prefixed
    with the Session kind as the Run prints them."""
    transcript = TRANSCRIPTS / "claude-2.1.328-captured-background-completed.jsonl"
    raw = transcript.read_bytes().splitlines()
    reader = harness_named("claude").reader()
    expected = [f"implement: {p}" for line in raw for p in reader.feed(line).progress]
    condenser = logs.Condenser("implement", harness_named("claude").reader())
    shown = [text for line in raw for text in condenser.lines(line)]
    assert shown == expected
    assert shown


def test_condensed_lines_lose_the_worktree_prefix_and_keep_thirdshift_s_own_notes() -> None:
    condenser = logs.Condenser("repair-1", None)
    assert condenser.lines(b'{"a": 1}') == ['{"a": 1}']  # raw: the line as it is
    condensed = logs.Condenser(
        "repair-1", harness_named("claude").reader(), worktree="/home/w/acme-calculator-issue-7"
    )
    note = json.dumps(
        {"type": "thirdshift.stderr", "text": "boom\n\n/home/w/acme-calculator-issue-7/x"}
    )
    assert condensed.lines(note.encode()) == ["repair-1: stderr: boom", "repair-1: stderr: x"]
    budget = json.dumps({"type": "thirdshift.budget", "text": "budget reached"})
    assert condensed.lines(budget.encode()) == ["repair-1: budget reached"]


def test_the_condenser_scrubs_what_it_shows() -> None:
    condenser = logs.Condenser("implement", None, scrub=lambda text: text.replace("sekrit", "***"))
    assert condenser.lines(b"a sekrit") == ["a ***"]


def test_the_last_session_or_the_last_of_a_kind_is_picked_and_a_missing_kind_is_named() -> None:
    first, resume = session(), session(id=6, kind="implement-resume")
    assert logs.pick_session(run(), [first, resume], None) == resume
    assert logs.pick_session(run(), [first, resume], "implement") == first
    with pytest.raises(NotRecorded, match="no session of kind 'repair-1'; its sessions are: "
                       "implement, implement-resume"):  # fmt: skip
        logs.pick_session(run(), [first, resume], "repair-1")
    with pytest.raises(NotRecorded, match="Run 2 has no sessions"):
        logs.pick_session(run(), [], None)


class ScriptedRows:
    """The database as a follow sees it: each look appends the next chunk to the log (the
    session writing), and once the chunks are written the session (or its Run) has ended."""

    def __init__(self, log: Path, chunks: list[bytes], *, ending: str = "session") -> None:
        self.log = log
        self.chunks = list(chunks)
        self.ending = ending
        self.looks = 0

    def _ended(self) -> bool:
        return not self.chunks

    def get_run(self, run_id: int) -> Run | None:
        ended = self._ended() and self.ending == "run"
        return run(state="crashed" if ended else "running", ended_at=None)

    def holds_lease(self, run: Run) -> bool:
        return not (self._ended() and self.ending == "lease")

    def run_sessions(self, run_id: int) -> list[SessionRecord]:
        self.looks += 1
        state = "ended" if self._ended() and self.ending == "session" else "running"
        if self.chunks:
            with self.log.open("ab") as out:
                out.write(self.chunks.pop(0))
        return [session(log_path=str(self.log), state=state)]


@pytest.mark.parametrize("ending", ["session", "run", "lease"])
def test_a_follow_prints_lines_as_the_log_grows_until_the_session_or_its_run_ends(
    tmp_path: Path, ending: str
) -> None:
    """Lines written while the session runs are printed, a line split across two writes once
    whole, the last line written before the end too; then the follow stops by itself. A
    crashed Run's session row stays running: the Run's state ends the follow as well, and so
    does a Lease no longer held (the Run died and nobody recorded it yet)."""
    log = tmp_path / "s.jsonl"
    log.write_bytes(b"one\n")
    rows = ScriptedRows(log, [b"two\nthr", b"ee\n", b"four\n"], ending=ending)
    clock = ManualClock()
    shown: list[str] = []
    one = session(log_path=str(log), state="running")

    logs.show_log(one, logs.Condenser("implement", None), shown.append, rows=rows, clock=clock)

    assert shown == ["one", "two", "three", "four"]
    assert clock.slept == [logs.POLL_SECONDS] * 3


def test_without_follow_the_log_is_read_once_even_while_it_runs(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_bytes(b"one\npartial")
    shown: list[str] = []
    logs.show_log(
        session(log_path=str(log), state="running"), logs.Condenser("k", None), shown.append
    )
    assert shown == ["one", "partial"]


def test_a_log_that_is_not_on_this_machine_is_named_with_where_it_lives(tmp_path: Path) -> None:
    gone = tmp_path / "gone.jsonl"
    with pytest.raises(NotRecorded) as raised:
        logs.show_log(session(log_path=str(gone)), logs.Condenser("k", None), print)
    message = str(raised.value)
    assert str(gone) in message
    assert "THIRDSHIFT_HOME of the machine that ran the Run" in message
    assert "`thirdshift show 2`" in message


def test_an_architect_run_is_named_by_its_repository_and_shows_what_it_published() -> None:
    architect = run(
        kind="architect", issue_number=None, issue_branch=None, pull_request_number=None,
        published=(31, 32, 33),
    )  # fmt: skip
    line = views.run_line(architect, None)
    assert "acme/calculator (Architect run)" in line
    assert "#0" not in line
    shown = views.show_lines(
        architect, usage={}, lease=None, sessions=[], earlier_runs=[], activity=[]
    )
    assert shown[0] == "Run 2: acme/calculator (Architect run) (architect), succeeded"
    assert "  published: #31, #32, #33" in shown
    shape = shapes.run_shape(architect, None)
    assert (shape["issue"], shape["published"]) == ("acme/calculator (Architect run)", [31, 32, 33])
    assert shape["issue_number"] == 0  # as documented: the Architect run has no issue
