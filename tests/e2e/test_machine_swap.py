"""Work survives a machine swap: three Runs on one issue, each from a home of its own (a fresh
machine: no Worktree, no Harness transcript), sharing one PostgreSQL database. Each Run opens
with what the database holds, never with a native resume; the real claude CLI, the stand-in."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.real_cli import argv_logging, logged_argvs
from tests.support.run_world import (
    CALC_FIXED,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)
from thirdshift.store import Store

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"
STEP = "echo first-machine-step > NOTES.md"
FIRST = [
    {"tool_calls": [bash(STEP, "notes")]},
    {
        "tool_calls": [
            bash(
                "git add NOTES.md && git commit -qm 'Notes' && "
                "python3 -c 'import time; time.sleep(300)'",
                "commit, then a long check",
            )
        ]
    },
]
FINISH = [
    {"tool_calls": [bash(write_file_command("calc.py", CALC_FIXED), "fix")]},
    {"tool_calls": [bash("git add calc.py && git commit -qm 'Make add() add'", "commit")]},
    {"tool_calls": [bash(pull_request_file("Make add() add", "Closes #1"), "pr")]},
    {"text": "Fixed."},
]


def first_request(world: RunWorld, session: str) -> dict[str, Any]:
    [request, *_] = [r for r in world.model_requests(session) if r.get("turn") == 0]
    body: dict[str, Any] = request["body"]
    return body


@pytest.fixture
def argv_logging_claude() -> Iterator[Path]:
    """A directory to put first on PATH whose ``claude`` logs its argv (``argv_logging``)."""
    with argv_logging("claude") as directory:
        yield directory


def move_to(world: RunWorld, home: str, argvs: list[list[str]]) -> None:
    """The next command runs on another machine: the old home is gone (its claude argvs kept
    in ``argvs`` first), a new one is used."""
    argvs += logged_argvs(world.home, "claude")
    shutil.rmtree(world.home)
    world.home = world.tmp / home


def test_a_run_interrupted_on_one_machine_is_continued_on_others_from_the_database(
    tmp_path: Path, worlds: list[RunWorld], postgres_url: str, argv_logging_claude: Path
) -> None:
    """Run 1 is stopped mid-session (SIGTERM): its work is pushed, its record is in
    PostgreSQL. Its home is deleted. Run 2, from a fresh home, opens a fresh conversation
    (no native resume) whose prompt carries Run 1's session inline, its step included; its
    provider refuses, so it fails too. Run 3, from a third home, carries Run 2 inline and Run 1
    as a pointer, and finishes the issue. No claude argv of the three Runs has --resume."""
    world = start_world(
        tmp_path,
        [
            # Later prompts quote earlier ones, so several markers match: the session with
            # turns left plays (docs/model-script.md).
            {"name": "third", "marker": "(Run 2, session implement)", "turns": FINISH},
            {
                "name": "second",
                "marker": "(Run 1, session implement)",
                "turns": [{"error": "api_error", "status": 400, "message": "scripted refusal"}],
            },
            {"name": "first", "marker": MARKER, "turns": FIRST},
        ],
    )
    worlds.append(world)
    world.settings["THIRDSHIFT_DATABASE_URL"] = postgres_url
    world.settings["PATH"] = f"{argv_logging_claude}{os.pathsep}{world.env()['PATH']}"
    world.settings["THIRDSHIFT_HARNESS_PATHS"] = json.dumps([str(argv_logging_claude)])
    argvs: list[list[str]] = []

    process = world.start_thirdshift("run", world.issue_url)
    world.wait_for_process("time.sleep(300)")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    move_to(world, "home-2", argvs)

    second = world.thirdshift("run", world.issue_url)

    assert second.returncode == 1, second.stderr
    opening = first_request(world, "second")
    # A fresh conversation: no turn of the model's is carried, nothing was natively resumed.
    assert [m for m in opening["messages"] if m["role"] == "assistant"] == []
    prompt = json.dumps(opening)
    assert "The session just before this one (Run 1, session implement):" in prompt
    assert "first-machine-step" in prompt.split("Its steps, oldest first:", 1)[1]
    assert "Its Run ended failed: interrupted" in prompt
    move_to(world, "home-3", argvs)

    third = world.thirdshift("run", world.issue_url)

    assert third.returncode == 0, third.stderr
    opening = first_request(world, "third")
    assert [m for m in opening["messages"] if m["role"] == "assistant"] == []
    prompt = json.dumps(opening)
    assert "The session just before this one (Run 2, session implement):" in prompt
    assert "- Run 1, session implement:" in prompt  # the older Run, as a pointer
    [pull] = world.pulls()
    assert pull["draft"] is False
    store = Store.open(postgres_url)
    try:
        runs = sorted(store.list_runs(), key=lambda run: run.id)
        sessions = [row for run in runs for row in store.run_sessions(run.id)]
    finally:
        store.close()
    argvs += logged_argvs(world.home, "claude")
    # One session a Run (the first one's stopped), each a fresh claude: nothing resumed.
    assert len(argvs) == 3
    assert all(argv[:1] == ["-p"] for argv in argvs)
    assert all({"--resume", "-r", "--continue", "-c"}.isdisjoint(argv) for argv in argvs)
    assert [run.state for run in runs] == ["failed", "failed", "succeeded"]
    assert all(row.resumed_from_id is None for row in sessions)
    assert len({row.harness_session_id for row in sessions}) == len(sessions)
