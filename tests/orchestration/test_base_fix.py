"""A red Base branch in process: only Inherited failures are red, so the Run fails saying what to
do; with ``base_fix`` on, it opens (once) an issue to fix the Base branch as a Merge run, makes
it a blocker of its own issue and puts that issue back to Ready, and the daemon's poll then takes
the Base fix first, as a Merge run, while the issue waits."""

from __future__ import annotations

from tests.orchestration.conftest import PR_TEXT, READY, RunWorld, a_poll
from tests.support.fake_github import open_here
from tests.support.scripted_sessions import commit_file
from thirdshift.records import CheckRun
from thirdshift.runs.rules.base_fixes import base_fix_marker

MERGE = "thirdshift-merge"


def red_base(world: RunWorld) -> str:
    """``lint`` fails on main's head and on every head of the issues' branches: an Inherited
    failure wherever it is watched."""
    base = world.github.branch_head("main") or ""
    world.github.checks[base] = [CheckRun(1, "lint", base, "completed", "failure", "u")]

    def on_call(called: str) -> None:
        if called != "check_runs":
            return
        for branch in ("issue-1", "issue-3"):
            head = world.github.branch_head(branch)
            if head is not None and head not in world.github.checks:
                world.github.checks[head] = [CheckRun(2, "lint", head, "completed", "failure", "u")]

    world.github.on_call = on_call
    return base


def failing_on_a_red_base(world: RunWorld) -> tuple[int, str]:
    world.github.add_user("maintainer", "maintain")
    number = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    return number, red_base(world)


def test_a_run_red_only_from_the_base_says_what_to_do_and_opens_nothing_by_default(
    world: RunWorld,
) -> None:
    number, base = failing_on_a_red_base(world)

    assert world.run(number) == 1

    [run] = world.store.list_runs()
    assert run.cause is not None
    assert f"only from Inherited failures (also failing on main at {base[:7]}): lint" in (run.cause)
    assert "fix lint on main first, then run thirdshift on the issue again" in run.cause
    assert world.github.called("open_issue") == []


def test_with_base_fix_on_the_run_opens_one_merge_run_issue_that_blocks_its_own(
    world: RunWorld,
) -> None:
    """The Base fix issue names the check and the Base commit, is labelled Ready and to merge,
    blocks the issue, which is Ready again; a second such failure finds the same issue."""
    world.settings = world.settings.model_copy(update={"base_fix": True})
    number, base = failing_on_a_red_base(world)

    assert world.run(number) == 1

    [fix] = [i for i in world.github.repo_state.issues.values() if i.title == "Fix lint on main"]
    assert fix.body is not None
    assert f"fail on `main` at `{base[:7]}`" in fix.body
    assert base_fix_marker("main", ["lint"]) in fix.body
    assert sorted(world.github.labels_of(fix.number)) == sorted([READY, MERGE])
    assert open_here(world.github.blockers("acme", "widgets", number)) == (fix.number,)
    assert READY in world.github.labels_of(number)
    [run] = world.store.list_runs()
    assert run.cause is not None
    assert f"opened {world.github.issue('acme', 'widgets', fix.number).html_url}" in run.cause
    assert f"#{number} waits for it" in run.cause

    assert world.run(number) == 1  # still red, still blocked: the same Base fix issue
    assert (
        len([i for i in world.github.repo_state.issues.values() if i.title.startswith("Fix lint")])
        == 1
    )


def test_the_merge_label_makes_a_merge_run_only_when_someone_who_may_merge_added_it(
    world: RunWorld,
) -> None:
    """Triage may say what the factory works on, not what it merges: the merge label added by
    a triage user runs as a plain Run; added by a maintainer, as a Merge run."""
    world.github.add_user("maintainer", "maintain")
    world.github.add_user("tia", "triage")
    by_triage = world.github.add_issue("One", "", [])
    world.github.label_issue(by_triage, READY, by="maintainer")
    world.github.label_issue(by_triage, MERGE, by="tia")
    by_maintainer = world.github.add_issue("Two", "", [])
    world.github.label_issue(by_maintainer, READY, by="maintainer")
    world.github.label_issue(by_maintainer, MERGE, by="maintainer")

    pickups = {pickup.number: pickup.merge for pickup in a_poll(world)()}

    assert pickups == {by_triage: False, by_maintainer: True}


def test_the_daemon_takes_the_base_fix_first_as_a_merge_run_while_the_issue_waits(
    world: RunWorld,
) -> None:
    world.settings = world.settings.model_copy(update={"base_fix": True})
    number, _base = failing_on_a_red_base(world)
    assert world.run(number) == 1
    [fix] = [i.number for i in world.github.repo_state.issues.values() if i.title.startswith("Fix")]
    poll = a_poll(world)

    [pickup] = poll()

    assert (pickup.number, pickup.merge) == (fix, True)
    assert any(f"blocked by #{fix}" in line for line in world.lines), world.lines


def test_a_base_fix_that_stays_red_opens_no_base_fix_of_its_own(world: RunWorld) -> None:
    """The Base fix's own Merge run is red from the same checks (its fix did not fix them):
    it fails like any Run, and opens, blocks and re-labels nothing."""
    world.settings = world.settings.model_copy(update={"base_fix": True})
    number, _base = failing_on_a_red_base(world)
    assert world.run(number) == 1
    [fix] = [i.number for i in world.github.repo_state.issues.values() if i.title.startswith("Fix")]
    world.sessions.plays["implement"] = commit_file("try.txt", "t\n", "Try to fix lint")

    assert world.run(fix, merge=True) == 1

    fixes = [
        i
        for i in world.github.repo_state.issues.values()
        if i.title.startswith("Fix") and i.pull is None
    ]
    assert [i.number for i in fixes] == [fix]
    assert open_here(world.github.blockers("acme", "widgets", fix)) == ()
    assert READY not in world.github.labels_of(fix)
