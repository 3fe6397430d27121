"""Whether a Session log holds the result of its turn, read by the Harness's own reader: what
lets a Rescue leave a session that had done its work unopened (adr/0028)."""

from __future__ import annotations

import threading
from pathlib import Path

from thirdshift.clock import ManualClock
from thirdshift.harnesses import AgentSandbox, harness_named
from thirdshift.home import Home
from thirdshift.records import Watchdogs
from thirdshift.scrub import Scrubber
from thirdshift.sessions.cli_parts import SessionBounds, SessionParts
from thirdshift.sessions.cli_sessions import CliSessions, HarnessChoice
from thirdshift.sessions.sealed_space import AgentSeal
from thirdshift.store import Store

TRANSCRIPT = (
    Path(__file__).parent.parent
    / "fixtures"
    / "transcripts"
    / "claude-2.1.328-captured-background-completed.jsonl"
)


def _source(tmp_path: Path) -> CliSessions:
    return CliSessions(
        harnesses=HarnessChoice(harness_named("claude")),
        parts=SessionParts(
            store=Store.open(f"sqlite:///{tmp_path / 'db.sqlite'}"),
            environ={},
            scrub=Scrubber([]),
            clock=ManualClock(),
            progress=lambda _line: None,
            interrupt=threading.Event(),
        ),
        bounds=SessionBounds(
            watchdogs=Watchdogs(idle_seconds=60, wall_seconds=600, post_result_seconds=5),
            grace_seconds=1,
        ),
        seal=AgentSeal(sandbox=AgentSandbox(sealed=False), home=Home(tmp_path / "home"), hidden=()),
        logs_dir=tmp_path / "logs",
    )


def test_a_session_log_with_its_result_line_ended_its_turn(tmp_path: Path) -> None:
    log = tmp_path / "implement.jsonl"
    log.write_bytes(TRANSCRIPT.read_bytes())

    assert _source(tmp_path).turn_ended("claude", log)


def test_a_session_log_cut_before_its_result_did_not(tmp_path: Path) -> None:
    lines = TRANSCRIPT.read_bytes().splitlines(keepends=True)
    log = tmp_path / "implement.jsonl"
    log.write_bytes(b"".join(line for line in lines if b'"type":"result"' not in line))

    source = _source(tmp_path)
    assert not source.turn_ended("claude", log)
    assert not source.turn_ended("claude", tmp_path / "missing.jsonl")
    assert not source.turn_ended("codex", log)  # not a Harness this source runs
