"""Whole Runs on the real Qwen Code CLI (the pinned qwen), on the GitHub stand-in with the
scripted model server: a Run to a ready pull request, a Run stopped by SIGTERM mid-session and
salvaged, and the Harness switches both ways (a qwen outage continues on claude; a claude
Repair's outage continues on qwen through the preamble). One world serves the whole file: each
test files its own issue and plays its own model script."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.real_cli import argv_logging, cli_path, logged_argvs
from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    RunWorld,
    bash,
    pull_request_file,
    running,
    start_world,
    stop_world,
    write_file_command,
)
from thirdshift.records import SessionRecord
from thirdshift.sandbox.model.server import ModelScript
from thirdshift.store import Store

pytestmark = pytest.mark.real_cli

CLAUDE_MODEL = "claude-sonnet-4-5"
REPAIR_MARKER = "CI is red on"
# How long a Run may take whose qwen retries a provider that refuses every request (its bounded
# retries take about 80 s on an idle machine); a loaded machine may raise it.
STORM_TIMEOUT = float(os.environ.get("THIRDSHIFT_TEST_QWEN_STORM_SECONDS", "400"))
CALC_WRONG = '"""Arithmetic."""\n\n\ndef add(a: int, b: int) -> int:\n    return a * b\n'


def shell(command: str, description: str = "run a command") -> dict[str, Any]:
    """A qwen tool call: its shell tool is ``run_shell_command``."""
    return {"name": "run_shell_command", "input": {"command": command, "description": description}}


def commit_calc(text: str, message: str) -> str:
    return (
        write_file_command("calc.py", text)
        + f" && git commit -qam '{message}' && "
        + pull_request_file(message, "Fixed.\n\nCloses #1")
    )


FIX = commit_calc(CALC_FIXED, "Make add() add")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunWorld]:
    made = start_world(tmp_path_factory.mktemp("qwen-world"), [])
    cli_path("qwen")
    try:
        yield made
    finally:
        stop_world(made)


@pytest.fixture(scope="module")
def wrappers() -> Iterator[Path]:
    """A directory to put first on PATH whose ``qwen`` logs its argv (``argv_logging``)."""
    with argv_logging("qwen") as directory:
        yield directory


def new_issue(world: RunWorld, marker: str, sessions: list[dict[str, Any]]) -> None:
    """File an issue whose body holds ``marker``, play ``sessions`` from now on, and start
    from the configuration every test shares."""
    issue = world.rest(
        "POST",
        f"/repos/{OWNER}/{NAME}/issues",
        {"title": f"add() is wrong ({marker})", "body": marker, "labels": ["ready-for-agent"]},
    )
    world.issue_number = int(issue["number"])
    world.restart_model(ModelScript.from_dict({"sessions": sessions}))
    world.settings.clear()


def qwen_argvs(world: RunWorld) -> list[list[str]]:
    return logged_argvs(world.home, "qwen")


def last_run_sessions(world: RunWorld) -> tuple[str, list[SessionRecord]]:
    store = Store.open(f"sqlite:///{world.home / 'thirdshift.db'}")
    try:
        run = max(store.list_runs(), key=lambda r: r.id)
        return run.state, store.run_sessions(run.id)
    finally:
        store.close()


def green_main(world: RunWorld) -> None:
    """The maintainer fixes add() on main (this file's last test needs a green base)."""
    clone = world.clone("maintainer")
    world.git("checkout", "-q", "main", cwd=clone)
    world.git("pull", "-q", "origin", "main", cwd=clone)
    (clone / "calc.py").write_text(CALC_FIXED)
    world.git("commit", "-qam", "Fix add() on main", cwd=clone)
    world.git("push", "-q", "origin", "main", cwd=clone)


def test_a_run_on_qwen_reaches_a_ready_pull_request(world: RunWorld, wrappers: Path) -> None:
    """``run --harness qwen``: the real qwen fixes the issue and commits; the Run ends with a
    ready pull request; qwen ran once, on the Anthropic provider, with no resume; its session
    is recorded as qwen's with the CLI's version."""
    marker = "QWEN-RUN-READY"
    new_issue(
        world,
        marker,
        [
            {
                "name": "qwen",
                "marker": marker,
                "turns": [{"tool_calls": [shell(FIX)]}, {"text": "Fixed."}],
            }
        ],
    )
    world.settings["PATH"] = f"{wrappers}{os.pathsep}{world.env()['PATH']}"
    world.settings["THIRDSHIFT_HARNESS_PATHS"] = json.dumps([str(wrappers)])
    before = len(qwen_argvs(world))

    result = world.thirdshift("run", "--harness", "qwen", world.issue_url)

    assert result.returncode == 0, result.stderr
    pull = next(p for p in world.pulls() if p["head"]["ref"] == f"issue-{world.issue_number}")
    assert pull["draft"] is False
    assert result.stdout == pull["html_url"] + "\n"
    [argv] = qwen_argvs(world)[before:]
    assert argv[argv.index("--auth-type") + 1] == "anthropic"
    assert "--resume" not in argv
    state, sessions = last_run_sessions(world)
    assert state == "succeeded"
    assert [(s.kind, s.harness, s.state) for s in sessions] == [("implement", "qwen", "ended")]
    assert sessions[0].usage.cli_version == "0.24.4"
    assert sessions[0].usage.input_tokens


def test_sigterm_mid_session_stops_qwen_s_tree_and_salvages_the_run(world: RunWorld) -> None:
    """SIGTERM while qwen runs a slow command: qwen and the command are gone within the grace,
    the work so far is committed and pushed on the Issue branch, and the Run is a failed one
    (interrupted), exit 1."""
    marker = "QWEN-RUN-SIGTERM"
    slow = "echo 'half done' > WIP.md && python3 -c 'import time; time.sleep(307)'"
    new_issue(
        world,
        marker,
        [{"name": "qwen", "marker": marker, "turns": [{"tool_calls": [shell(slow)]}]}],
    )
    world.settings["THIRDSHIFT_HARNESS"] = "qwen"

    process = world.start_thirdshift("run", world.issue_url)
    world.wait_for_process("time.sleep(307)")
    stopped = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == 1, stderr
    assert "SIGTERM: stopping; the work will be saved" in stderr
    assert not running("time.sleep(307)", within=world.tmp)
    assert not running("@qwen-code/qwen-code", within=world.tmp)
    assert "interrupted" in stderr
    clone = world.clone()
    branch = f"origin/issue-{world.issue_number}"
    assert world.git("show", f"{branch}:WIP.md", cwd=clone) == "half done"
    assert world.git("log", "-1", "--format=%s", branch, cwd=clone) == (
        "thirdshift: failed run (interrupted)"
    )
    state, sessions = last_run_sessions(world)
    assert state == "failed"
    assert [(s.harness, s.state) for s in sessions] == [("qwen", "failed")]
    # The stop grace and the salvage (a commit and a push), with room for a loaded machine.
    assert time.monotonic() - stopped < 120


def test_a_qwen_run_rate_limited_past_its_retries_continues_on_claude(world: RunWorld) -> None:
    """Every request of qwen's answered 429: after its own retries it gives up, and the Run
    goes on with claude (harness_fallbacks) in a fresh session opened with the brief."""
    marker = "QWEN-RUN-STORM"
    switched = "stopped when its model provider was rate-limited (429)"
    new_issue(
        world,
        marker,
        [
            {
                "name": "claude",
                "marker": switched,
                "turns": [{"tool_calls": [bash(FIX, "fix")]}, {"text": "Fixed on claude."}],
            },
            # A short Retry-After, which qwen honours: at its own backoff (1.5 s, doubling) its
            # seven attempts would take over a minute.
            {
                "name": "qwen",
                "marker": marker,
                "turns": [{"error": "rate_limit", "retry_after_s": 0.05}] * 60,
            },
        ],
    )
    world.settings.update(
        {
            "THIRDSHIFT_HARNESS": "qwen",
            "THIRDSHIFT_HARNESS_FALLBACKS": json.dumps(["claude"]),
            "THIRDSHIFT_HARNESS_MODELS": json.dumps({"claude": CLAUDE_MODEL}),
        }
    )

    result = world.thirdshift("run", world.issue_url, timeout=STORM_TIMEOUT)

    assert result.returncode == 0, result.stderr
    assert (
        "implement: qwen's provider is rate-limited (429) after its retries; continuing on "
        "claude in a fresh session" in result.stderr
    )
    [opening, *_] = [r for r in world.model_requests("claude") if r.get("turn") == 0]
    assert marker in json.dumps(opening["body"])
    state, sessions = last_run_sessions(world)
    assert state == "succeeded"
    assert [(s.harness, s.state) for s in sessions] == [("qwen", "failed"), ("claude", "ended")]
    assert sessions[1].model == CLAUDE_MODEL


def test_a_claude_repair_whose_provider_is_overloaded_continues_on_qwen(
    world: RunWorld, wrappers: Path
) -> None:
    """claude's fix leaves CI red; its Repair meets 529s past its retries and continues on
    qwen: qwen's first request carries the conversation (the brief, the Repair's prompt and
    claude's steps from our database), its argv has no resume and no Claude Model, and the Run
    ends ready."""
    marker = "QWEN-RUN-REPAIR"
    switched = "stopped when its model provider was overloaded (529)"
    new_issue(
        world,
        marker,
        [
            {
                "name": "qwen",
                "marker": switched,
                "turns": [{"tool_calls": [shell(FIX)]}, {"text": "Fixed add() on qwen."}],
            },
            {
                "name": "repair",
                "marker": REPAIR_MARKER,
                # With CLAUDE_CODE_MAX_RETRIES=1, claude asks twice before it gives up.
                "turns": [{"error": "overloaded"}, {"error": "overloaded"}],
            },
            {
                "name": "implement",
                "marker": marker,
                "turns": [
                    {"tool_calls": [bash(commit_calc(CALC_WRONG, "Make add() multiply"), "fix")]},
                    {"text": "Done."},
                ],
            },
        ],
    )
    world.settings.update(
        {
            "CLAUDE_CODE_MAX_RETRIES": "1",
            "PATH": f"{wrappers}{os.pathsep}{world.env()['PATH']}",
            "THIRDSHIFT_HARNESS_PATHS": json.dumps([str(wrappers)]),
            "THIRDSHIFT_MODEL": CLAUDE_MODEL,
            "THIRDSHIFT_HARNESS_FALLBACKS": json.dumps(["qwen"]),
        }
    )
    before = len(qwen_argvs(world))
    green_main(world)  # so that CI is red from the branch's own change, and a Repair starts

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 0, result.stderr
    assert "starting Repair 1" in result.stderr
    assert "continuing on qwen in a fresh session" in result.stderr
    [opening, *_] = [r for r in world.model_requests("qwen") if r.get("turn") == 0]
    request = json.dumps(opening["body"])
    assert "This session continues an earlier one" in request
    assert REPAIR_MARKER in request
    assert "Make add() multiply" in request  # claude's step, from our database
    assert CLAUDE_MODEL not in request
    [argv] = qwen_argvs(world)[before:]
    assert "--resume" not in argv
    assert CLAUDE_MODEL not in argv
    assert "--model" not in argv  # qwen's own default Model, not claude's
    state, sessions = last_run_sessions(world)
    assert state == "succeeded"
    assert [(s.harness, s.state) for s in sessions] == [
        ("claude", "ended"),
        ("claude", "failed"),
        ("qwen", "ended"),
    ]
    assert sessions[2].kind.startswith("repair")
    assert sessions[2].resumed_from_id is None
