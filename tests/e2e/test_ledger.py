"""The usage ledger and the cost budgets, with the real claude CLI: what a session really used
is kept per session, and a budget reached ends the Run as a Failed run naming it, its work
saved. And what a person at a terminal sees of a Run."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"
FIX = bash(
    write_file_command("calc.py", CALC_FIXED) + " && git commit -qam 'Make add() add'", "fix"
)


def sessions(world: RunWorld) -> list[tuple[object, ...]]:
    with sqlite3.connect(world.home / "thirdshift.db") as db:
        return db.execute(
            "SELECT kind, harness, model, cli_version, input_tokens, output_tokens, cost_usd, "
            "cost_source, state, error FROM sessions ORDER BY id"
        ).fetchall()


def test_a_run_past_its_cost_budget_fails_naming_the_budget_with_its_work_saved(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The implement session's scripted usage costs more than the $0.50 budget per Run: the
    session's usage is in the ledger as claude reported it, and the Run ends as a Failed run
    whose cause names the budget and both amounts; the fix it made is on the Issue branch; the
    ledger command shows the session."""
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": MARKER,
                "turns": [
                    {"tool_calls": [FIX], "input_tokens": 400_000},
                    {"tool_calls": [bash(pull_request_file("Fix add()", "Closes #1"), "pr")]},
                    {"text": "Done."},
                ],
            }
        ],
    )
    worlds.append(world)
    world.settings["THIRDSHIFT_COST_BUDGET_PER_RUN_USD"] = "0.50"

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 1, result.stderr
    [(kind, harness, model, version, tokens_in, tokens_out, cost, source, state, error)] = sessions(
        world
    )
    assert (kind, harness, state, error) == ("implement", "claude", "ended", None)
    assert model
    assert version
    assert isinstance(tokens_in, int)
    assert tokens_in >= 400_000
    assert isinstance(tokens_out, int)
    assert tokens_out > 0
    assert isinstance(cost, float)
    assert cost > 0.5
    assert source == "reported"
    cause = f"after the implement session, the cost budget per Run is reached: ${cost:.2f} spent "
    cause += "of $0.50 (cost_budget_per_run_usd"
    assert cause in result.stderr
    [failure] = [c for c in world.comments() if "cost budget per Run" in c["body"]]
    assert "$0.50" in failure["body"]
    assert "Make add() add" in world.git("log", "--format=%s", "origin/issue-1", cwd=world.clone())

    ledger = world.thirdshift("usage", "--by", "run", "--json")

    assert ledger.returncode == 0, ledger.stderr
    [line] = [json.loads(text) for text in ledger.stdout.splitlines()]
    assert line["label"] == "Run 1 (acme/calculator#1)"
    assert line["harnesses"] == [f"claude ({model})"]
    assert (line["sessions"], line["cost_usd"], line["unpriced_sessions"]) == (1, cost, 0)

    # The next Run on the issue, with a daily budget the first Run already spent: no session
    # starts, the Run fails naming the budget, and the Session log it names says why.
    del world.settings["THIRDSHIFT_COST_BUDGET_PER_RUN_USD"]
    world.settings["THIRDSHIFT_COST_BUDGET_PER_REPOSITORY_DAY_USD"] = "0.5"
    world.rest("POST", "/repos/acme/calculator/issues/1/labels", {"labels": ["ready-for-agent"]})

    again = world.thirdshift("run", world.issue_url)

    assert again.returncode == 1, again.stderr
    refusal = "implement session not started: the daily cost budget of acme/calculator is "
    refusal += f"reached: ${cost:.2f} spent today (UTC) of $0.50"
    assert refusal in again.stderr
    assert len(sessions(world)) == 1  # nothing was started
    log = Path(again.stderr.strip().splitlines()[-1].split("session log: ", 1)[1])
    assert refusal in log.read_text()


def test_a_priced_session_is_stopped_the_moment_it_reaches_the_budget(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """With a price for the model, the running session's tokens are priced as they stream:
    the turn that crosses the budget stops the session there (the next turn would hang for
    ever), and the Failed run names the budget; the commit made before is kept on the branch."""
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": MARKER,
                "turns": [
                    {"tool_calls": [FIX]},
                    {"tool_calls": [bash("echo costly", "costly")], "input_tokens": 2_000_000},
                    {"hang": True},
                ],
            }
        ],
    )
    worlds.append(world)
    model = "sandbox-priced"
    world.settings["THIRDSHIFT_MODEL"] = model
    world.settings["THIRDSHIFT_COST_BUDGET_PER_RUN_USD"] = "1"
    world.settings["THIRDSHIFT_MODEL_PRICES"] = json.dumps({model: {"input": 1, "output": 1}})

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 1, result.stderr
    [(kind, _, _, _, tokens_in, _, cost, source, state, error)] = sessions(world)
    assert (kind, state) == ("implement", "failed")
    assert str(error).startswith(
        "implement session stopped: the cost budget per Run is reached: $2"
    )
    assert isinstance(tokens_in, int)
    assert tokens_in >= 2_000_000
    assert source == "price table"
    assert isinstance(cost, float)
    assert cost >= 2
    assert "of $1.00 (cost_budget_per_run_usd" in result.stderr
    # The costly turn's answer crossed the budget: claude was stopped with its own signals
    # (it may have asked for the next turn meanwhile, which would have hung forever).
    assert [r.get("turn") for r in world.model_requests("implement")][:2] == [0, 1]
    assert "Make add() add" in world.git("log", "--format=%s", "origin/issue-1", cwd=world.clone())


def test_on_a_terminal_a_run_keeps_a_live_status_line_under_its_progress_lines(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """stderr on a pseudo-terminal: the progress lines as always, and a status line redrawn in
    place (elapsed time, the step, CI's pending checks); the URL alone on stdout; the status line
    cleared at the end. Piped (every other test), the lines are plain."""
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": MARKER,
                "turns": [
                    {"tool_calls": [FIX]},
                    {"tool_calls": [bash(pull_request_file("Fix add()", "Closes #1"), "pr")]},
                    {"text": "Done."},
                ],
            }
        ],
    )
    worlds.append(world)
    # A CI watch long enough for the status line to be redrawn while it waits.
    world.settings["THIRDSHIFT_CI_GRACE_SECONDS"] = "3"
    controller, terminal = os.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "thirdshift.cli", "run", world.issue_url],
            env={**world.env(), "TERM": "xterm"},
            cwd=world.tmp,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=terminal,
            text=True,
        )
        world.processes.append(process)
        os.close(terminal)
        stdout, _ = process.communicate(timeout=240)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # the terminal's other end is closed: all is read
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(controller)

    text = shown.decode().replace("\r\n", "\n")  # the terminal ends lines with CR LF
    assert process.returncode == 0, text
    assert stdout == world.pulls()[0]["html_url"] + "\n"
    assert "] implement: session started" in text
    assert re.search(r"\r\x1b\[2K▸ \d+s · implement: session started", text)
    assert re.search(r"\r\x1b\[2K▸ \d+s · (CI: \d of \d pending · )?waiting up to 3s for CI", text)
    assert text.endswith("\r\x1b[2K")
