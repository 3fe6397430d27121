"""`thirdshift runs`, `show` and `logs` on a database filled by real Runs (the stand-in, the
real claude CLI): a Run followed live with `logs --follow` and stopped by SIGTERM, then a
Continuation that ends with a ready pull request. One world for the whole module."""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    stop_world,
    write_file_command,
)

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"
TURNS: list[dict[str, Any]] = [
    {"tool_calls": [bash(write_file_command("calc.py", CALC_FIXED), "fix")]},
    {"tool_calls": [bash("sleep 3 && git commit -qam 'Make add() add'", "commit")]},
    {"tool_calls": [bash("echo following-marker", "say")]},
    {"hang": True},
    {"tool_calls": [bash(pull_request_file("Make add() add", "Closes #1"), "pr")]},
    {"text": "Finished what the earlier Run started."},
]


@dataclass
class Filled:
    world: RunWorld
    followed: list[str]
    """What `logs 1 --follow` printed up to the line of the third turn, while the Run ran."""
    follow_exit: int | None
    follow_rest: str
    progress: list[str]
    """The Continuation's progress lines, without their stamps."""


def _lines(stream: Any, into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Filled]:
    world = start_world(
        tmp_path_factory.mktemp("views"), [{"name": "implement", "marker": MARKER, "turns": TURNS}]
    )
    try:
        yield _fill(world)
    finally:
        stop_world(world)


def _fill(world: RunWorld) -> Filled:
    run = world.start_thirdshift("run", world.issue_url)
    deadline = time.monotonic() + 120
    while not any(r.get("turn") == 1 for r in world.model.requests()):
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline, "the session never reached its second turn"
        time.sleep(0.1)
    follow = world.start_thirdshift("logs", "1", "--follow")
    assert follow.stdout is not None
    arrived: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_lines, args=(follow.stdout, arrived), daemon=True).start()
    followed: list[str] = []
    while not any("following-marker" in line for line in followed):
        line = arrived.get(timeout=60)
        assert line is not None, f"logs --follow ended early: {followed}, {follow.stderr}"
        followed.append(line)
    # The third turn's line came while the session (hanging at its fourth) still ran.
    assert run.poll() is None
    assert follow.poll() is None
    # A second follow of the same live session, stopped by Ctrl-C: exit 0, as tail -f.
    interrupted = world.start_thirdshift("logs", "1", "--follow", "--raw")
    assert interrupted.stdout is not None
    assert interrupted.stdout.readline().startswith("{")
    interrupted.send_signal(signal.SIGINT)
    assert interrupted.wait(timeout=30) == 0, interrupted.communicate()
    # The stop must come once the CLI asked for the hanging turn: a stop before that leaves the
    # hang to the Continuation, which then waits out the whole test (a CI failure under load).
    while not any(r.get("turn") == 3 for r in world.model.requests()):
        assert run.poll() is None, run.communicate()
        assert time.monotonic() < deadline + 120, "the session never asked for its fourth turn"
        time.sleep(0.1)
    run.send_signal(signal.SIGTERM)
    run.communicate(timeout=120)
    assert follow.stderr is not None
    try:
        follow_exit: int | None = follow.wait(timeout=30)
    except subprocess.TimeoutExpired:
        follow_exit = None
    rest: list[str] = []
    while (line := arrived.get(timeout=10)) is not None:
        rest.append(line)
    world.rest("POST", "/repos/acme/calculator/issues/1/labels", {"labels": ["ready-for-agent"]})
    again = world.thirdshift("run", world.issue_url)
    assert again.returncode == 0, again.stderr
    progress = [line.split("] ", 1)[-1] for line in again.stderr.splitlines()]
    return Filled(world, followed, follow_exit, "\n".join(rest) + follow.stderr.read(), progress)


def test_logs_follow_prints_a_running_session_s_lines_as_they_arrive_and_ends_with_it(
    filled: Filled,
) -> None:
    """`logs --follow` started mid-session printed the later turns' progress lines before the
    session ended, and exited 0 once SIGTERM ended the session (and Ctrl-C ends a follow with
    exit 0: checked while filling)."""
    assert filled.followed[0].startswith("implement: ")
    assert any("following-marker" in line for line in filled.followed)
    assert filled.follow_exit == 0, filled.follow_rest


def test_runs_lists_the_runs_newest_first_in_text_and_json(filled: Filled) -> None:
    """One line per Run: the Continuation ready with its pull request, the stopped Run failed
    with its cause; `--json` gives the run shape with its usage total; the filters work."""
    world = filled.world
    text = world.thirdshift("runs")
    assert text.returncode == 0, text.stderr
    second, first = text.stdout.splitlines()
    assert second.startswith("Run 2  acme/calculator#1  run  succeeded  ready  PR #2  ")
    assert "claude (" in second
    assert "$" in second
    assert first.startswith("Run 1  acme/calculator#1  run  failed  interrupted")
    assert "no PR" not in second

    lines = [json.loads(line) for line in world.thirdshift("runs", "--json").stdout.splitlines()]
    assert [(r["type"], r["version"], r["id"], r["state"]) for r in lines] == [
        ("run", 1, 2, "succeeded"),
        ("run", 1, 1, "failed"),
    ]
    assert lines[0]["pull_request_number"] == 2
    assert lines[0]["issue"] == "acme/calculator#1"
    assert lines[0]["usage"]["type"] == "usage_total"
    assert lines[0]["usage"]["cost_usd"] > 0
    assert lines[0]["started_at"].endswith("+00:00")
    assert lines[1]["cause"].startswith("interrupted")

    only_failed = world.thirdshift("runs", "--state", "failed", "--json").stdout.splitlines()
    assert [json.loads(line)["id"] for line in only_failed] == [1]
    other = world.thirdshift("runs", "--repo", "acme/other")
    assert (other.returncode, other.stdout) == (0, "")
    assert world.thirdshift("runs", "--limit", "0").returncode == 2
    assert world.thirdshift("runs", "--repo", "nonsense").returncode == 2


def test_show_gives_one_run_whole_in_text_and_json(filled: Filled) -> None:
    """The record, its sessions with their prompts (the preamble at the top), the earlier Run
    on the issue and no Lease once the Run gave it up; JSON with the whole prompt."""
    world = filled.world
    text = world.thirdshift("show", "2")
    assert text.returncode == 0, text.stderr
    out = text.stdout
    assert out.startswith("Run 2: acme/calculator#1 (run), succeeded\n")
    assert "  outcome: ready\n" in out
    assert "  Issue branch: issue-1\n" in out
    assert "  pull request: #2\n" in out
    assert "  Lease: none\n" in out
    assert "Sessions (1):\n  1. implement: claude" in out
    assert "     prompt (" in out
    assert "Earlier Runs on acme/calculator#1 (1):\n  Run 1  acme/calculator#1" in out

    view = json.loads(world.thirdshift("show", "2", "--json").stdout)
    assert (view["type"], view["version"]) == ("run_view", 1)
    assert view["run"]["id"] == 2
    assert view["lease"] is None
    [session] = view["sessions"]
    assert (session["type"], session["kind"], session["harness"]) == (
        "session",
        "implement",
        "claude",
    )
    assert session["usage"]["type"] == "usage"
    assert MARKER in session["prompt"]
    assert Path(session["log_path"]).is_file()
    assert [run["id"] for run in view["earlier_runs"]] == [1]
    assert view["earlier_runs"][0]["usage"]["sessions"] == 1

    stopped = json.loads(world.thirdshift("show", "1", "--json").stdout)
    [first] = stopped["sessions"]
    assert first["state"] == "failed"
    assert stopped["run"]["last_session_log"] == first["log_path"]

    missing = world.thirdshift("show", "99")
    assert missing.returncode == 1
    assert "no Run 99 in the database" in missing.stderr
    assert "thirdshift runs" in missing.stderr


def test_logs_reads_a_session_log_condensed_or_raw_and_names_what_is_missing(
    filled: Filled,
) -> None:
    """Condensed lines are the progress lines the Run printed (without their stamps); --raw is
    the JSONL stream; an unknown Session kind, Run or a log gone exits 1 naming it."""
    world = filled.world
    condensed = world.thirdshift("logs", "2")
    assert condensed.returncode == 0, condensed.stderr
    assert condensed.stdout
    shown = condensed.stdout.splitlines()
    printed = [line for line in filled.progress if line.startswith("implement: ")]
    # The Run's own lines around the session (where it logs, how it ended) are not the log's.
    own = ("implement: logging the session to", "implement: session ended after")
    assert shown == [line for line in printed if not line.startswith(own)]
    assert len(shown) > 1

    raw = world.thirdshift("logs", "2", "--raw", "--session", "implement")
    assert raw.returncode == 0, raw.stderr
    assert all(json.loads(line) for line in raw.stdout.splitlines())

    unknown = world.thirdshift("logs", "2", "--session", "repair-1")
    assert unknown.returncode == 1
    assert "Run 2 has no session of kind 'repair-1'; its sessions are: implement" in (
        unknown.stderr
    )
    assert world.thirdshift("logs", "99").returncode == 1

    log = Path(
        json.loads(world.thirdshift("show", "1", "--json").stdout)["sessions"][0]["log_path"]
    )
    log.rename(log.with_suffix(".moved"))
    gone = world.thirdshift("logs", "1")
    assert gone.returncode == 1
    assert str(log) in gone.stderr
    assert "THIRDSHIFT_HOME of the machine that ran the Run" in gone.stderr
