"""`thirdshift run` at its edges: usage errors, pre-flight refusals that change nothing, a
Claim given back when nothing reached origin, and a Worktree kept when the work cannot be
pushed."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.real_cli import cli_path
from tests.support.run_world import (
    CALC_FIXED,
    CHECK,
    NAME,
    OWNER,
    TOKEN,
    RunWorld,
    bash,
    python_without_clis,
    start_world,
    write_file_command,
)

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"


def labels(world: RunWorld) -> list[str]:
    return [label["name"] for label in world.issue()["labels"]]


@pytest.mark.parametrize(
    "url",
    ["not-a-url", "https://github.com/acme/calculator/pull/1", "https://github.com/acme/issues/1"],
)
def test_a_malformed_issue_url_is_a_usage_error(
    tmp_path: Path, worlds: list[RunWorld], url: str
) -> None:
    """Exit 2, the usage and what a good Issue URL looks like; nothing on stdout."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    result = world.thirdshift("run", url)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "Usage: " in result.stderr
    assert "https://github.com/<owner>/<repo>/issues/<number>" in result.stderr


def test_a_closed_issue_is_refused_before_anything_changes(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """Pre-flight: exit 1 naming the fix; no label changed, no branch, no clone."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    world.rest("PATCH", f"/repos/{OWNER}/{NAME}/issues/1", {"state": "closed"})
    result = world.thirdshift("run", world.issue_url)
    assert result.returncode == 1
    assert "issue #1 is closed; reopen it to run thirdshift on it" in result.stderr
    assert labels(world) == ["ready-for-agent"]
    assert not (world.home / "repos" / OWNER / NAME).exists()  # no clone was made


def test_parallel_on_an_issue_without_sub_issues_is_a_usage_error_that_changes_nothing(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """--parallel asks for a Spec run: on an issue with no sub-issues, exit 2 saying so; no
    label changed, no clone, no Run recorded."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    result = world.thirdshift("run", "--parallel", "2", world.issue_url)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "#1 has no sub-issues; run it without --parallel" in result.stderr
    assert labels(world) == ["ready-for-agent"]
    assert not (world.home / "repos" / OWNER / NAME).exists()


def test_a_missing_base_branch_is_refused(tmp_path: Path, worlds: list[RunWorld]) -> None:
    """--base names a branch origin does not have: exit 1 naming it, labels untouched."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    result = world.thirdshift("run", "--base", "release", world.issue_url)
    assert result.returncode == 1
    assert "base branch release does not exist on origin" in result.stderr
    assert labels(world) == ["ready-for-agent"]


def test_a_harness_not_on_path_is_refused(tmp_path: Path, worlds: list[RunWorld]) -> None:
    """The CLI is looked for before anything happens, and the message says what to do."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    world.settings["PATH"] = os.pathsep.join(["/usr/bin", "/bin"])
    world.python = python_without_clis(tmp_path)
    result = world.thirdshift("run", world.issue_url)
    assert result.returncode == 1
    assert "claude (the claude Harness, the Run's Harness) is not installed" in result.stderr
    assert "run scripts/install in thirdshift's checkout" in result.stderr
    assert labels(world) == ["ready-for-agent"]


def test_a_fallback_harness_not_on_path_is_refused_before_anything_changes(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """harness_fallbacks names codex, which this machine lacks: found at the start, not after
    claude's provider has failed and its retries ran; labels untouched."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    only_claude = tmp_path / "only-claude"
    only_claude.mkdir()
    (only_claude / "claude").symlink_to(cli_path("claude"))
    world.settings["PATH"] = os.pathsep.join([str(only_claude), "/usr/bin", "/bin"])
    world.settings["THIRDSHIFT_HARNESS_FALLBACKS"] = '["codex"]'
    world.python = python_without_clis(tmp_path)

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 1
    assert (
        "codex (the codex Harness, a fallback in harness_fallbacks) is not installed"
    ) in result.stderr
    assert "or take it out of harness_fallbacks" in result.stderr
    assert labels(world) == ["ready-for-agent"]


def test_a_token_that_cannot_push_is_refused(tmp_path: Path, worlds: list[RunWorld]) -> None:
    """Read permission is not enough: exit 1 naming the user, the permission and the fix."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    world.client.add_user("maintainer", TOKEN, {f"{OWNER}/{NAME}": "read"})
    result = world.thirdshift("run", world.issue_url)
    assert result.returncode == 1
    assert "the token's user maintainer has no push permission on acme/calculator" in result.stderr
    assert TOKEN not in result.stderr


def test_a_second_run_on_a_claimed_issue_is_refused(tmp_path: Path, worlds: list[RunWorld]) -> None:
    """While one Run holds the issue's Lease, another on the same database stops before
    changing anything, naming the holder: exit 3, Not claimed."""
    stall = [{"tool_calls": [bash("python3 -c 'import time; time.sleep(30)'", "wait")]}]
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": stall}])
    worlds.append(world)
    first = world.start_thirdshift("run", world.issue_url)
    world.wait_for_process("time.sleep(30)")

    second = world.thirdshift("run", world.issue_url)

    assert second.returncode == 3
    assert "issue #1 is claimed by thirdshift run:" in second.stderr
    assert first.poll() is None  # the first Run goes on undisturbed
    first.terminate()
    first.communicate(timeout=120)


def test_no_token_is_a_configuration_error(tmp_path: Path, worlds: list[RunWorld]) -> None:
    """Without GITHUB_TOKEN the Run cannot start; the message names the variable."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    world.settings["GITHUB_TOKEN"] = ""
    result = world.thirdshift("run", world.issue_url)
    assert result.returncode == 1
    assert "GITHUB_TOKEN" in result.stderr


def test_a_run_that_pushed_nothing_releases_the_claim(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """The session commits nothing: a Failed run, nothing on origin, so in-progress comes off;
    ready-for-agent waits for a person to add it again."""
    world = start_world(
        tmp_path, [{"name": "implement", "marker": MARKER, "turns": [{"text": "I could not."}]}]
    )
    worlds.append(world)
    result = world.thirdshift("run", world.issue_url)
    assert result.returncode == 1
    assert "made no commits" in result.stderr
    assert "released the Claim on #1" in result.stderr
    assert labels(world) == []
    assert world.pulls() == []
    # No Worktree is left; its own repository stays beside it (adr/0042).
    left = sorted(p.name for p in (world.home / "worktrees").iterdir())
    assert left == ["acme-calculator-issue-1.git"]


def test_work_that_cannot_be_pushed_keeps_its_worktree_and_says_where(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """Write access is lost during the session: the push fails, the Worktree stays, the last
    lines name the worktree, the branch and its head, and the Claim is kept. Once access is
    back, the next Run adopts the kept work: it pushes it first and goes on to a pull request."""
    turns = [
        {
            "tool_calls": [
                bash(
                    write_file_command("calc.py", CALC_FIXED)
                    + " && git commit -qam 'Make add() add'"
                    + " && python3 -c 'import time; time.sleep(4)'",
                    "fix and wait",
                )
            ]
        },
        {"text": "Done."},
    ]
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": turns}])
    worlds.append(world)
    process = world.start_thirdshift("run", world.issue_url)
    world.wait_for_process("time.sleep(4)")
    world.client.add_user("maintainer", TOKEN, {f"{OWNER}/{NAME}": "read"})
    stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == 1, stderr
    assert "could not push the failed run's work, so it exists only locally" in stderr
    kept = [line for line in stderr.splitlines() if "keeping the worktree" in line]
    assert kept
    worktree = world.home / "worktrees" / "acme-calculator-issue-1"
    assert str(worktree) in kept[-1]
    assert "branch issue-1 at " in kept[-1]
    assert (worktree / "calc.py").read_text() == CALC_FIXED
    assert stdout == ""
    assert labels(world) == ["in-progress"]  # kept work is not an invitation to start over

    world.client.add_user("maintainer", TOKEN, {f"{OWNER}/{NAME}": "admin"})
    again = world.thirdshift("run", world.issue_url)

    assert again.returncode == 0, again.stderr
    assert f"the worktree {worktree} from an earlier Run holds" in again.stderr
    assert "pushing it to issue-1" in again.stderr
    [pull] = world.pulls()
    assert pull["head"]["ref"] == "issue-1"
    inspect = world.clone()
    world.git("checkout", "-q", "origin/issue-1", cwd=inspect)
    assert (inspect / "calc.py").read_text() == CALC_FIXED


def test_red_checks_that_also_fail_on_the_base_get_no_repair(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """main's own test is red and the session does not touch it: an Inherited failure, so no
    Repair is started and the Run fails naming the check and the Base commit."""
    note = "echo 'More docs.' >> README.md && git commit -qam 'Document the calculator'"
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": MARKER,
                "turns": [{"tool_calls": [bash(note, "docs")]}, {"text": "Documented."}],
            }
        ],
    )
    worlds.append(world)

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 1
    assert "Inherited failures (also failing on main at " in result.stderr
    assert "starting Repair" not in result.stderr
    # The Failed run's last lines name the check, the Base commit and what to do.
    base = world.rest("GET", f"/repos/{OWNER}/{NAME}/git/ref/heads/main")["object"]["sha"]
    last = "\n".join(result.stderr.strip().splitlines()[-3:])
    assert f"only from Inherited failures (also failing on main at {base[:7]}): {CHECK}" in last
    assert f"fix {CHECK} on main first, then run thirdshift on the issue again" in last


def test_ctrl_c_to_the_whole_process_group_saves_the_work(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """Ctrl-C in a terminal reaches every process of the foreground group: the session is
    stopped, the work committed and pushed, exit 1 with the cause `interrupted`."""
    stall = [
        {
            "tool_calls": [
                bash(
                    "echo 'draft' > DRAFT.md && python3 -c 'import time; time.sleep(300)'",
                    "long wait",
                )
            ]
        }
    ]
    world = start_world(tmp_path, [{"name": "implement", "marker": MARKER, "turns": stall}])
    worlds.append(world)
    process = world.start_thirdshift("run", world.issue_url, new_group=True)
    world.wait_for_process("time.sleep(300)")

    os.killpg(process.pid, signal.SIGINT)
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == 1, stderr
    assert "SIGINT: stopping; the work will be saved" in stderr
    assert stderr.strip().splitlines()[-2].endswith("] interrupted")
    subjects = world.git("log", "--format=%s", "origin/issue-1", cwd=world.clone())
    assert subjects.splitlines()[0] == "thirdshift: failed run (interrupted)"


@pytest.mark.parametrize("broken", ["home under a file", "logs is a file", "worktrees is a file"])
def test_an_unusable_home_is_one_line_and_changes_nothing_on_github(
    tmp_path: Path, worlds: list[RunWorld], broken: str
) -> None:
    """A local problem is the machine's: one line naming the path and the fix, exit 1, no
    traceback, and nothing claimed, labelled or posted."""
    world = start_world(tmp_path, [])
    worlds.append(world)
    if broken == "home under a file":
        (tmp_path / "a-file").write_text("not a directory\n")
        world.settings["THIRDSHIFT_HOME"] = str(tmp_path / "a-file" / "home")
        named = str(tmp_path / "a-file" / "home")
    else:
        world.home.mkdir()
        name = broken.split()[0]
        (world.home / name).write_text("not a directory\n")
        named = f"{world.home / name} is a file, not a directory"
    result = world.thirdshift("run", world.issue_url)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("thirdshift: ")
    assert named in lines[0]
    assert "Traceback" not in result.stderr
    assert labels(world) == ["ready-for-agent"]
    assert world.comments() == []
    assert world.pulls() == []


def test_sighup_saves_the_work_like_sigterm_and_a_second_signal_changes_nothing(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """A closed terminal (SIGHUP) mid-session, then SIGTERM during the salvage: the work is
    committed and pushed, the Run ends as a Failed run, exit 1."""
    stall = bash(
        "echo 'half done' > WIP.md && python3 -c 'import time; time.sleep(300)'", "long check"
    )
    world = start_world(
        tmp_path, [{"name": "implement", "marker": MARKER, "turns": [{"tool_calls": [stall]}]}]
    )
    worlds.append(world)

    process = world.start_thirdshift("run", world.issue_url)
    world.wait_for_process("time.sleep(300)")
    process.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == 1, stderr
    assert "SIGHUP: stopping; the work will be saved" in stderr
    lines = [line.split("] ", 1)[1] for line in stderr.strip().splitlines()]
    assert lines[-2] == "interrupted"
    clone = world.clone()
    assert world.git("show", "origin/issue-1:WIP.md", cwd=clone) == "half done"
