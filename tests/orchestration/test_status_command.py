"""`thirdshift status` in process, from a daemon's state file in a real home and pass-over lines
in a real SQLite store: the next poll, the issues waiting for a slot, the Harness pauses and
what was passed over, in text and in `--json`."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import thirdshift.bootstrap  # noqa: F401  (loaded here, not inside a command that reads the time)
from thirdshift.cli import main
from thirdshift.clock import ManualClock
from thirdshift.daemon.activity import ActivityLog
from thirdshift.daemon.state import (
    DaemonProcess,
    DaemonState,
    HarnessHolds,
    MissingHarness,
    PauseState,
    PollState,
    RunningState,
    write_state,
)
from thirdshift.scrub import Scrubber
from thirdshift.store import Store

NOW = datetime.now(UTC)
NEXT_POLL = NOW + timedelta(seconds=42)
PAUSED_UNTIL = NOW + timedelta(minutes=5)


@pytest.fixture(autouse=True)
def _now_is_now() -> None:
    """Each test's daemon state is written now: a state read a minute later is no longer
    live, and the whole suite takes longer than that after this module is imported."""
    global NOW, NEXT_POLL, PAUSED_UNTIL
    NOW = datetime.now(UTC)
    NEXT_POLL = NOW + timedelta(seconds=42)
    PAUSED_UNTIL = NOW + timedelta(minutes=5)


READERS_REASON = "drive-by added ready-for-agent with read permission; a maintainer must add it"


def clock_text(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def publish(home: Path, *, pid: int | None = None) -> None:
    """What a daemon watching acme/widgets writes: its poll, two Ready issues waiting for a
    slot, claude paused after an overload, codex's CLI gone, the rate limit GitHub last
    reported."""
    write_state(
        home / "daemons",
        DaemonState(
            daemon=DaemonProcess(
                "night-1", os.getpid() if pid is None else pid, NOW - timedelta(hours=1)
            ),
            updated_at=NOW,
            stopping=False,
            polls=(PollState("acme/widgets", NOW, None, NEXT_POLL, (9, 12)),),
            running=(),
            holds=HarnessHolds(
                (PauseState("claude", PAUSED_UNTIL, "overloaded (529)"),),
                missing=(
                    MissingHarness("codex", "codex is not installed: gone; run scripts/install"),
                ),
            ),
            rate_limit_remaining=4870,
        ),
    )


def pass_over(home: Path, issue: int, reason: str, *, at: datetime) -> None:
    """A pass-over as the daemon's Activity log writes it, at ``at``."""
    clock = ManualClock(at)
    store = Store.open(f"sqlite:///{home / 'thirdshift.db'}", clock=clock)
    try:
        log = ActivityLog(
            store, daemon="night-1", directory=home / "activity", clock=clock,
            scrub=Scrubber([]), progress=lambda _line: None,
        )  # fmt: skip
        log.pass_over(store.ensure_repository("acme", "widgets"), issue, reason)
    finally:
        store.close()


def status(*args: str) -> str:
    result = CliRunner().invoke(main, ["status", *args])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture
def filled(home: Path) -> Path:
    publish(home)
    pass_over(home, 8, "the repository's daily cost budget is spent", at=NOW - timedelta(hours=3))
    pass_over(home, 8, READERS_REASON, at=NOW - timedelta(hours=2))  # the newest reason wins
    pass_over(home, 5, "an open blocker: #4", at=NOW - timedelta(days=1, hours=1))  # too old
    return home


def test_status_shows_the_next_poll_the_queue_the_pauses_and_what_was_passed_over(
    filled: Path,
) -> None:
    shown = status().splitlines()

    assert shown[0].startswith("daemon night-1 (pid ")
    assert shown[1:5] == [
        f"  acme/widgets: last poll {clock_text(NOW)}, next {clock_text(NEXT_POLL)}; "
        "waiting for a slot: #9, #12",
        f"  paused: claude (overloaded (529)) until {clock_text(PAUSED_UNTIL)}",
        "  paused: codex (its CLI is not installed) until it is back; run scripts/install",
        "  GitHub rate limit: 4870 requests left",
    ]
    assert shown[-2:] == [
        "Passed over in the last day:",
        f"  acme/widgets#8: {READERS_REASON}",
    ]
    assert "Leases held: none" in shown
    assert "Runs running: none" in shown


def test_status_json_carries_the_same_in_the_documented_shapes(filled: Path) -> None:
    state = json.loads(status("--json"))

    assert (state["type"], state["version"]) == ("status", 1)
    [daemon] = state["daemons"]
    assert (daemon["type"], daemon["version"], daemon["live"]) == ("daemon_state", 1, True)
    assert daemon["repositories"] == [
        {
            "repository": "acme/widgets",
            "last_poll_at": NOW.isoformat(),
            "last_poll_error": None,
            "next_poll_at": NEXT_POLL.isoformat(),
            "queued": [9, 12],
            "next_architect_at": None,
        }
    ]
    assert daemon["pauses"] == [
        {"harness": "claude", "until": PAUSED_UNTIL.isoformat(), "condition": "overloaded (529)"}
    ]
    assert daemon["missing_harnesses"] == [
        {"harness": "codex", "problem": "codex is not installed: gone; run scripts/install"}
    ]
    [passed] = state["passed_over"]
    assert (passed["type"], passed["kind"], passed["issue_number"]) == ("activity", "pass-over", 8)
    assert passed["message"] == f"passed over: {READERS_REASON}"
    assert (state["leases"], state["running"]) == ([], [])


def test_a_daemon_whose_process_is_gone_shows_as_not_running_without_its_old_plans(
    home: Path,
) -> None:
    gone = subprocess.Popen(["true"])  # a pid that has exited
    gone.wait()
    publish(home, pid=gone.pid)

    shown = status().splitlines()

    assert shown[0] == f"daemon night-1: not running (last seen {clock_text(NOW)})"
    assert not any("waiting for a slot" in line or "paused:" in line for line in shown)
    assert json.loads(status("--json"))["daemons"][0]["live"] is False


def test_a_state_file_written_before_it_had_a_type_shows_as_daemon_state_1(home: Path) -> None:
    publish(home)
    [path] = (home / "daemons").iterdir()
    older = json.loads(path.read_text())
    del older["type"], older["version"]
    path.write_text(json.dumps(older))

    [daemon] = json.loads(status("--json"))["daemons"]

    assert (daemon["type"], daemon["version"], daemon["daemon"]) == ("daemon_state", 1, "night-1")


def test_status_says_so_when_no_daemon_has_run_in_this_home(home: Path) -> None:
    assert status().splitlines()[0] == (
        "no daemon has run in this home (thirdshift daemon writes its state here)"
    )


def test_status_shows_when_the_architect_schedule_next_asks_and_an_architect_run_by_name(
    home: Path,
) -> None:
    architect_at = NOW + timedelta(days=3)
    write_state(
        home / "daemons",
        DaemonState(
            daemon=DaemonProcess("night-1", os.getpid(), NOW - timedelta(hours=1)),
            updated_at=NOW,
            stopping=False,
            polls=(PollState("acme/widgets", NOW, None, NEXT_POLL, (), architect_at),),
            running=(RunningState("acme/widgets", 0, 31, NOW - timedelta(minutes=2)),),
            holds=HarnessHolds(),
            rate_limit_remaining=None,
        ),
    )
    shown = status().splitlines()
    assert shown[1] == (
        f"  acme/widgets: last poll {clock_text(NOW)}, next {clock_text(NEXT_POLL)}; "
        f"next Architect run {clock_text(architect_at)}"
    )
    assert shown[2] == "  running: acme/widgets (Architect run) (Run 31, for 2m 00s)"
    state = json.loads(status("--json"))
    [poll] = state["daemons"][0]["repositories"]
    assert poll["next_architect_at"] == architect_at.isoformat()
