"""The first hour of a newcomer: an install whose agent CLIs are missing makes the demo and the
daemon stop at once with exit 2 and the fix, instead of retrying an issue forever; a CLI that
goes missing while the daemon runs holds its pickups until it is back."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.real_cli import cli_path
from tests.support.run_world import (
    CALC_FIXED,
    NAME,
    OWNER,
    RunWorld,
    bash,
    pull_request_file,
    python_without_clis,
    start_world,
    write_file_command,
)
from tests.support.warm_start import Started

SYSTEM_PATH = os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"])


def thirdshift(
    python: str, tmp_path: Path, *args: str, **settings: str
) -> subprocess.CompletedProcess[str]:
    """``thirdshift args`` of an install without node_modules, with only the system on PATH
    and ``settings`` (variables) over the test's environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("THIRDSHIFT_")}
    env["PATH"] = SYSTEM_PATH
    env["THIRDSHIFT_HOME"] = str(tmp_path / "home")
    return subprocess.run(
        [python, "-m", "thirdshift.cli", *args],
        env={**env, **settings},
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_demo_without_its_harness_cli_stops_before_any_server_with_exit_2(
    tmp_path: Path,
) -> None:
    root = tmp_path / "demo"
    result = thirdshift(python_without_clis(tmp_path), tmp_path, "demo", "--root", str(root))

    assert result.returncode == 2, result.stderr
    assert "claude (the claude Harness, the demo's --harness) is not installed" in result.stderr
    assert "run scripts/install in thirdshift's checkout" in result.stderr
    assert "harness_paths" not in result.stderr  # the demo's settings are its own
    # Nothing was started: no status page was announced, no stand-in made its repositories.
    assert "status page at" not in result.stderr
    assert not (root / "github").exists()


def test_a_daemon_with_a_harness_this_machine_lacks_exits_2_before_asking_github(
    tmp_path: Path,
) -> None:
    """codex is installed nowhere thirdshift looks; GitHub's address answers nothing, so a
    request made before the check would end otherwise."""
    result = thirdshift(
        python_without_clis(tmp_path),
        tmp_path,
        *("daemon", "--repo", "acme/calculator", "--harness", "codex"),
        THIRDSHIFT_GITHUB_API_URL="http://127.0.0.1:9",
        GITHUB_TOKEN="sandbox_not_a_real_token_0123456789",
    )

    assert result.returncode == 2, result.stderr
    assert "codex (the codex Harness, the Runs' Harness) is not installed" in result.stderr
    assert "npm install -g @openai/codex@" in result.stderr
    assert "127.0.0.1:9" not in result.stderr


@pytest.mark.real_cli
def test_a_harness_cli_gone_while_the_daemon_runs_holds_pickups_until_it_is_back(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """claude is found through harness_paths when the daemon starts, then removed (an upgrade
    half done): the daemon says once that no Run starts until it is back, and passes over the
    issue labelled Ready meanwhile; put back, it says so once and the Run ends with its pull
    request."""
    world = start_world(tmp_path, [implement_fix()])
    worlds.append(world)
    labels = f"/repos/{OWNER}/{NAME}/issues/{world.issue_number}/labels"
    world.rest("DELETE", f"{labels}/ready-for-agent")
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "claude").symlink_to(cli_path("claude"))
    world.python = python_without_clis(tmp_path)
    world.settings.update(
        {
            "PATH": os.pathsep.join([str(Path(world.python).parent), SYSTEM_PATH]),
            "THIRDSHIFT_HARNESS_PATHS": json.dumps([str(agents)]),
            "THIRDSHIFT_POLL_SECONDS": "1",
            "THIRDSHIFT_POLL_JITTER_SECONDS": "0",
            "THIRDSHIFT_SETTLE_SECONDS": "0",
            "THIRDSHIFT_MIN_FREE_DISK_MB": "0",
        }
    )
    daemon = world.start_thirdshift("daemon", "--repo", f"{OWNER}/{NAME}")
    said = Lines(daemon)
    polled(world.home)  # it started, with claude where harness_paths says
    (agents / "claude").unlink()
    gone = said.wait_for("no Run starts until the claude Harness is back")
    assert "claude (the claude Harness, the Runs' Harness) is not installed" in gone
    world.rest("POST", labels, {"labels": ["ready-for-agent"]})
    said.wait_for("pickups wait until the claude Harness is back")  # the pass-over
    assert world.pulls() == []
    status = world.thirdshift("status")
    assert "paused: claude (its CLI is not installed) until it is back" in status.stdout
    (agents / "claude").symlink_to(cli_path("claude"))
    said.wait_for("the claude Harness is back; pickups go on")
    said.wait_for("ended succeeded", timeout=240)
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=60)

    assert [pull["draft"] for pull in world.pulls()] == [False]
    assert sum("no Run starts until" in line for line in said.lines) == 1, said.lines
    assert sum("Harness is back; pickups go on" in line for line in said.lines) == 1


def polled(home: Path, timeout: float = 120) -> None:
    """Until the daemon's state file says it polled its repository."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for state in (home / "daemons").glob("*.json"):  # a state being written is .partial
            polls = json.loads(state.read_text()).get("repositories") or []
            if any(poll.get("last_poll_at") for poll in polls):
                return
        time.sleep(0.2)
    raise AssertionError(f"the daemon did not poll within {timeout}s")


class Lines:
    """A process's stderr lines as they come."""

    def __init__(self, process: Started) -> None:
        self.lines: list[str] = []
        assert process.stderr is not None
        self._stream = process.stderr
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._stream:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, text: str, timeout: float = 120) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = next((line for line in self.lines if text in line), None)
            if found is not None:
                return found
            time.sleep(0.2)
        raise AssertionError(f"no line with {text!r} in:\n" + "\n".join(self.lines))


def implement_fix() -> dict[str, Any]:
    return {
        "name": "implement",
        "marker": "calc.add(2, 3) returns -1",
        "turns": [
            {
                "tool_calls": [
                    bash(
                        write_file_command("calc.py", CALC_FIXED)
                        + " && git add calc.py && git commit -qm 'Make add() add' && "
                        + pull_request_file("Make add() add", "add() subtracted.\n\nCloses #1"),
                        "fix",
                    )
                ]
            },
            {"text": "Fixed add() and wrote the pull request."},
        ],
    }
