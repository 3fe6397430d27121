"""People acting on a Run's branch and pull request, end to end: the GitHub stand-in (real
bare repositories that refuse non-fast-forward pushes, CI on every push), real git, and the
real claude CLI with scripted turns. A person pushes to the Issue branch while the session
works; a person turns the pull request back to draft during a Merge run's CI watch; the Base
branch gains a conflicting commit just before the Self-merge, so GitHub reports the pull
request unmergeable. thirdshift acts with the maintainer's token, and so does the person: what
makes a commit foreign is that thirdshift did not make it, not who signed it."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.support.run_world import (
    CALC_FIXED,
    CHECK,
    CHECK_COMMAND,
    NAME,
    OWNER,
    TOKEN,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)

pytestmark = pytest.mark.real_cli

ISSUE_MARKER = "calc.add(2, 3) returns -1"
CONFLICT_MARKER = "stopped with conflicts in"
REVIEW_MARKER = "people pushed these commits to"
PUSHED = ".a-person-pushed-to-issue-1"  # the file that ends the session's wait
PULL_PATH = re.compile(rf"^/api/v3/repos/{OWNER}/{NAME}/pulls/\d+$")


def people_world(
    tmp_path: Path,
    implement: list[dict[str, Any]],
    *,
    conflict: list[dict[str, Any]] | None = None,
    review: list[dict[str, Any]] | None = None,
    checks: dict[str, str] | None = None,
) -> RunWorld:
    """The one set-up of this module: the calculator with a red add(), its issue, an
    ``implement`` session and, when given, a ``conflict`` Repair session and a ``review`` of
    the commits people pushed."""
    sessions = [{"name": "implement", "marker": ISSUE_MARKER, "turns": implement}]
    if conflict is not None:
        sessions.append({"name": "conflict", "marker": CONFLICT_MARKER, "turns": conflict})
    if review is not None:
        sessions.append({"name": "review", "marker": REVIEW_MARKER, "turns": review})
    return start_world(tmp_path, sessions, checks=checks)


def fix_add(*, also: str = "", wait_for: str | None = None) -> list[dict[str, Any]]:
    """Fix add() and commit (after ``also``, a further command); with ``wait_for``, the same
    command then waits until a file of that name appears in the Worktree (the session's sandbox
    hides the test's temporary directory) and removes it: the test acts while the session
    works."""
    command = write_file_command("calc.py", CALC_FIXED) + (f" && {also}" if also else "")
    command += " && git add -A && git commit -qm 'Make add() add'"
    if wait_for is not None:
        # A command line of its own, naming the file, for wait_for_process to find.
        waits = f'iter(lambda: os.path.exists("{wait_for}"), True)'
        command += f" && python3 -c 'import os, time; [time.sleep(0.1) for _ in {waits}]'"
        command += f" && rm {wait_for}"
    return [
        {"tool_calls": [bash(command, "fix and commit")]},
        {"tool_calls": [bash(pull_request_file("Make add() add", "Closes #1"), "pr")]},
        {"text": "Fixed add() and wrote the pull request."},
    ]


def reflog(world: RunWorld, branch: str) -> list[tuple[str, str]]:
    """(old, new) of every update of ``branch`` in the stand-in's bare repository."""
    log = world.stand_in.git.path(OWNER, NAME) / "logs" / "refs" / "heads" / branch
    return [(line.split()[0], line.split()[1]) for line in log.read_text().splitlines()]


def is_ancestor(world: RunWorld, older: str, newer: str) -> bool:
    done = subprocess.run(
        ["git", "merge-base", "--is-ancestor", older, newer],
        cwd=world.stand_in.git.path(OWNER, NAME),
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def progress(stderr: str) -> list[str]:
    """The Run's progress lines without their time stamps."""
    return [line.split("] ", 1)[-1] for line in stderr.strip().splitlines()]


def merge_requests(world: RunWorld) -> list[dict[str, Any]]:
    return [
        r
        for r in world.stand_in.requests
        if r["method"] == "PUT" and str(r["path"]).endswith("/merge")
    ]


def graphql(world: RunWorld, query: str, variables: dict[str, Any]) -> Any:
    """A GraphQL request to the stand-in as the maintainer."""
    request = urllib.request.Request(
        world.stand_in.web_url + "/api/graphql",
        data=json.dumps({"query": query, "variables": variables}).encode(),
        method="POST",
        headers={"Authorization": f"bearer {TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def wait_until(what: str, ready: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = ready()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout}s")


def test_a_commit_a_person_pushes_during_the_session_is_merged_in_and_never_overwritten(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """issue-1 is on origin already (a person started it). While the implement session works,
    the person pushes another commit to issue-1 over HTTP. thirdshift's push merges it in with a
    merge commit, says so naming it, and the Run ends ready. Every update of issue-1 on origin
    was a fast-forward (the reflog of the bare repository), and the person's commit is in the
    final head. Before CI is trusted, a Repair session reviews the person's commits against
    the issue: its prompt names them."""
    review = [{"text": "The person's note is right and changes no code; nothing to fix."}]
    world = people_world(tmp_path, fix_add(wait_for=PUSHED), review=review)
    worlds.append(world)
    person = world.clone("person")
    world.git("checkout", "-q", "-b", "issue-1", cwd=person)
    (person / "NOTES.md").write_text("add() is wrong for negative numbers too.\n")
    world.git("add", "NOTES.md", cwd=person)
    world.git("commit", "-qm", "Note what else add() gets wrong", cwd=person)
    world.git("push", "-q", "origin", "issue-1", cwd=person)
    started_from = world.git("rev-parse", "HEAD", cwd=person)

    process = world.start_thirdshift("run", world.issue_url)
    world.wait_for_process(PUSHED)
    (person / "NOTES.md").write_text("add() is wrong for negative numbers too.\nChecked.\n")
    world.git("commit", "-qam", "Check add() by hand", cwd=person)
    world.git("push", "-q", "origin", "issue-1", cwd=person)
    theirs = world.git("rev-parse", "HEAD", cwd=person)
    (world.home / "worktrees" / "acme-calculator-issue-1" / PUSHED).touch()
    stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == 0, stderr
    [pull] = world.pulls()
    assert stdout == pull["html_url"] + "\n"
    assert (pull["state"], pull["draft"]) == ("open", False)
    lines = progress(stderr)
    said = [line for line in lines if "has commits thirdshift did not make" in line]
    assert len(said) == 1, stderr
    assert said[0].startswith(
        f"issue-1 on origin has commits thirdshift did not make ({theirs[:7]}"
    )
    assert "Check add() by hand" in said[0]
    assert said[0].endswith("; merged them in")
    reviewing = [line for line in lines if line.startswith("commits thirdshift did not make were")]
    assert len(reviewing) == 1, stderr
    assert reviewing[0].endswith("; starting Repair 1 of 5")
    [asked] = world.model_requests("review")[:1]
    assert "Check add() by hand" in json.dumps(asked["body"])
    assert f"pull request {pull['html_url']} is ready" in stderr
    final = pull["head"]["sha"]
    assert world.stand_in.git.resolve(OWNER, NAME, "issue-1") == final
    assert is_ancestor(world, theirs, final)
    clone = world.clone()
    assert world.git("log", "-1", "--format=%s", final, cwd=clone) == (
        "thirdshift: merge the commits pushed to issue-1 meanwhile"
    )
    assert world.git("show", f"{final}:NOTES.md", cwd=clone).endswith("Checked.")
    assert world.git("show", f"{final}:calc.py", cwd=clone) == CALC_FIXED.strip()
    updates = reflog(world, "issue-1")
    assert [new for _, new in updates][:2] == [started_from, theirs]
    assert updates[-1][1] == final
    for old, new in updates[1:]:
        assert is_ancestor(world, old, new), f"issue-1 went from {old} to {new}: not a fast-forward"


SLOW_CHECKS = {CHECK: f"sleep 5 && {CHECK_COMMAND}"}


def test_a_pull_request_a_person_turns_back_to_draft_during_the_ci_watch_is_never_merged(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """`run --merge`: while CI runs on the ready pull request, the maintainer turns it back to
    a draft (GraphQL's convertPullRequestToDraft, as GitHub offers it). CI goes green, but
    thirdshift neither marks it ready again nor merges it: the Run ends refused (exit 1) with
    the cause naming the draft as its last line before the session log, and the pull request
    stays an open, unmerged draft, the issue open."""
    world = people_world(tmp_path, fix_add(), checks=SLOW_CHECKS)
    worlds.append(world)

    process = world.start_thirdshift("run", "--merge", world.issue_url)

    def ready_with_ci_running() -> Any:
        ready = [pull for pull in world.pulls("open") if not pull["draft"]]
        if not ready:
            return None
        idle, runs = world.client.check_runs(OWNER, NAME, ready[0]["head"]["sha"])
        return ready[0] if runs and not idle else None

    pull = wait_until("a ready pull request with CI running", ready_with_ci_running, 90)
    answer = graphql(
        world,
        "mutation($input: ConvertPullRequestToDraftInput!) {"
        " convertPullRequestToDraft(input: $input) { pullRequest { isDraft } } }",
        {"input": {"pullRequestId": pull["node_id"]}},
    )
    assert answer["data"]["convertPullRequestToDraft"]["pullRequest"]["isDraft"] is True
    drafted_at = len(world.stand_in.requests)  # the person's mutation is logged by now
    stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == 1, stderr
    assert stdout == pull["html_url"] + "\n"
    idle, runs = world.client.check_runs(OWNER, NAME, pull["head"]["sha"])
    assert idle
    assert [(r.name, r.conclusion) for r in runs] == [(CHECK, "success")]
    lines = progress(stderr)
    assert lines[-2].endswith(
        f"pull request {pull['html_url']} was turned back to a draft, so it is not merged; "
        "mark it ready and run thirdshift with --merge again to merge it"
    ), stderr
    assert lines[-1].startswith("session log: ")
    assert not any(line.startswith("merged ") for line in lines)
    after = world.rest("GET", f"/repos/{OWNER}/{NAME}/pulls/{pull['number']}")
    assert (after["state"], after["draft"], after["merged"]) == ("open", True, False)
    assert merge_requests(world) == []
    since = list(world.stand_in.requests)[drafted_at:]
    assert [r for r in since if r["path"] == "/api/graphql"] == []  # never marked ready again
    assert world.issue()["state"] == "open"
    assert world.stand_in.git.resolve(OWNER, NAME, "issue-1") == pull["head"]["sha"]


def test_a_pull_request_github_reports_unmergeable_is_not_merged(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """`run --merge`: the session changes README.md. When CI is green and thirdshift asks
    GitHub whether the pull request can be merged, a person has just pushed a different
    README.md to main (real git over HTTP), so the stand-in's trial merge conflicts and it says
    `mergeable: false` (dirty). thirdshift does not merge: it says GitHub cannot merge it, and
    its next round merges main in, which conflicts, so it starts a conflict Repair (the right
    thing to do). That Repair declines to pick a heading, so the Run fails naming the merge it
    could not finish; the pull request is never merged and the stand-in still reports it
    unmergeable. (A push to main earlier in the CI watch never reaches the question: the loop
    sees the Base branch moved once CI is green and merges it in first, straight into the
    same conflict Repair. So the stand-in lets the push land while it answers that read.)"""
    heading = "# calculator\n\nadd() adds.\n"
    decline = [{"text": "Both headings are deliberate; a person should choose."}]
    world = people_world(
        tmp_path,
        fix_add(also=write_file_command("README.md", heading)),
        conflict=decline,
        checks={CHECK: f"sleep 2 && {CHECK_COMMAND}"},  # green well after the pull request opens
    )
    worlds.append(world)
    person = world.clone("person")
    (person / "README.md").write_text("# calculator, on main\n")
    world.git("commit", "-qam", "Retitle the README", cwd=person)

    moved = threading.Event()

    def push_to_main_before_the_merge_check(method: str, path: str) -> None:
        """The first read of the pull request once CI on issue-1 is done is the Self-merge's
        question; the person's push lands just before it is answered."""
        if method == "GET" and PULL_PATH.match(path) and not moved.is_set():
            head = world.stand_in.git.resolve(OWNER, NAME, "issue-1")
            if head is not None:
                idle, runs = world.client.check_runs(OWNER, NAME, head)
                if idle and runs:
                    moved.set()
                    world.git("push", "-q", "origin", "main", cwd=person)

    world.stand_in.before_answer = push_to_main_before_the_merge_check

    result = world.thirdshift("run", "--merge", world.issue_url)

    assert moved.is_set()
    assert result.returncode == 1, result.stderr
    lines = progress(result.stderr)
    merge_at = [i for i, line in enumerate(lines) if line.startswith("merging the pull request")]
    assert len(merge_at) == 1, result.stderr
    assert lines[merge_at[0] + 1] == "the merge failed: GitHub says it cannot be merged (dirty)"
    assert "merging origin/main conflicted in README.md; starting Repair 1 of 5" in lines
    assert "aborted the unfinished merge" in lines
    assert lines[-2] == "the merge of origin/main is still in progress after the Repair"
    assert merge_requests(world) == []
    [pull] = world.pulls()
    after = world.rest("GET", f"/repos/{OWNER}/{NAME}/pulls/{pull['number']}")
    assert after["merged"] is False
    assert after["merged_at"] is None
    assert (after["state"], after["mergeable"], after["mergeable_state"]) == (
        "open",
        False,
        "dirty",
    )
    assert after["draft"] is True  # the Failed run's doing, after the refusal
    clone = world.clone()
    assert world.git("show", "origin/issue-1:README.md", cwd=clone) == heading.strip()
    assert len(world.git("log", "-1", "--format=%P", "origin/issue-1", cwd=clone).split()) == 1
    assert world.issue()["state"] == "open"
    main = world.git("rev-parse", "HEAD", cwd=person)
    assert world.stand_in.git.resolve(OWNER, NAME, "main") == main  # nothing merged into main
