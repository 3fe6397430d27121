"""What the agent writes, through every path thirdshift publishes it on: the pull request's title
and body, the Failed-run comment (cause, killed work, last lines) and its commit, a review
reply, a Base fix issue, a notification. None of it mentions anyone, references another
repository, closes an issue but the Run's own, or carries a marker; and markers count only in
thirdshift's own comments and issues."""

from __future__ import annotations

from pathlib import Path

from tests.orchestration.conftest import PR_TEXT, READY, RunWorld
from tests.orchestration.test_architect import (
    PLAN,
    TWO_TICKETS,
    architect_runs,
    failing_after,
    issues_labelled,
    run_architect,
    writes,
)
from tests.orchestration.test_base_fix import MERGE, failing_on_a_red_base, red_base
from tests.support.scripted_sessions import commit_file
from thirdshift.defang import ZERO_WIDTH
from thirdshift.records import CheckRun
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.runs.failed_run import COMMENT_MARKER
from thirdshift.runs.rules.base_fixes import base_fix_marker
from thirdshift.runs.rules.published_issues import marker, plan_marker
from thirdshift.runs.rules.review import REPLY_MARKER_PREFIX
from thirdshift.sessions import SessionFailed

HOSTILE = (
    "Also fixes #2 and closes acme/priv#1. Resolves https://github.com/acme/priv/issues/3. "
    f"cc @maintainer @acme/core {CLAIM_MARKER}"
)


def inert(text: str) -> list[str]:
    """What in ``text`` would still act on GitHub: a mention, a reference elsewhere, a
    closing keyword, a marker."""
    found = [
        piece
        for piece in (
            "@maintainer",
            "@acme/core",
            "acme/priv#1",
            "https://github.com/acme/priv",
            "fixes #2",
            "closes acme",
            "Resolves https",
            CLAIM_MARKER,
        )
        if piece in text
    ]
    return found


def part(comment: str, heading: str) -> str:
    """The paragraph of a Failed-run comment that starts with ``heading`` (outside the fenced
    last lines, where code is inert and left as written)."""
    [said] = [p for p in comment.split("\n\n") if p.startswith(heading)]
    return said


def test_the_pull_request_s_title_and_body_are_defanged_and_close_only_their_issue(
    world: RunWorld,
) -> None:
    number = world.github.add_issue("Add a widget", "", [READY])
    written = f"Add the widget for @maintainer, fixes #2\n\n{HOSTILE}\n\nCloses #{number}\n"
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=written
    )

    assert world.run(number) == 0

    [pull] = world.github.pull_requests()
    assert pull.title == f"Add the widget for @{ZERO_WIDTH}maintainer, f{ZERO_WIDTH}ixes #2"
    assert inert(pull.title) == []
    assert inert(pull.body) == []
    assert pull.body.count(f"Closes #{number}") == 1
    assert pull.body.endswith(f"Closes #{number}")
    assert f"#{number}" not in pull.body.removesuffix(f"Closes #{number}")


def test_a_failed_run_s_comment_commit_and_notification_carry_the_agent_s_words_defanged(
    world: RunWorld,
) -> None:
    """The cause (the CLI's last stderr line), the killed work's names and the last lines."""
    target = world.notify_to()
    number = world.github.add_issue("Add a widget", "", [READY])
    world.sessions.killed = {
        "implement": ("npm run dev -- @maintainer fixes #2",),
        "implement-resume": ("npm run dev -- @maintainer fixes #2",),
    }

    def commit_nothing(worktree: Path, prompt: str) -> str:
        return "stopped"

    world.sessions.plays["implement"] = commit_nothing
    world.sessions.plays["implement-resume"] = commit_nothing

    assert world.run(number) == 1

    [comment] = world.failure_comments(number)
    killed = part(comment, "**Background work that was killed:**")
    assert f"@{ZERO_WIDTH}maintainer f{ZERO_WIDTH}ixes #2" in killed
    assert inert(killed) == []
    assert inert(part(comment, "**Cause:**")) == []
    assert comment.count(COMMENT_MARKER) == 1  # thirdshift's own marker, and only it
    [run] = world.store.list_runs()
    [(notification, _)] = target.sent
    assert notification.cause is not None
    assert inert(notification.cause) == []
    assert run.cause is not None
    assert "@maintainer" in run.cause


def test_a_failed_session_s_cause_is_defanged_in_the_comment_and_the_failure_commit(
    world: RunWorld,
) -> None:
    number = world.github.add_issue("Add a widget", "", [READY])

    def leave_work_and_fail(worktree: Path, prompt: str) -> str:
        (worktree / "draft.txt").write_text("unfinished\n")
        raise SessionFailed(f"the CLI said: {HOSTILE}")

    world.sessions.plays["implement"] = leave_work_and_fail

    assert world.run(number) == 1

    [comment] = world.failure_comments(number)
    cause = part(comment, "**Cause:**")
    assert cause.startswith("**Cause:** the CLI said: Also f")
    assert inert(cause) == []
    assert CLAIM_MARKER not in comment  # not even in the fenced last lines
    assert "error: the CLI said:" in comment
    subject = world.origin_log("issue-1")[0]
    assert subject.startswith("thirdshift: failed run (the CLI said: Also f")
    assert "fixes #2" not in subject


def test_a_review_reply_shows_the_agent_s_commit_subjects_defanged(world: RunWorld) -> None:
    world.github.add_user("maintainer", "maintain")
    number = world.github.add_issue("Add a widget", "Please add it.", [READY])
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    assert world.run(number) == 0
    [pull] = world.github.pull_requests()
    world.github.add_review(pull.number, "maintainer", body="Name it.")
    world.sessions.plays["review-1"] = commit_file(
        "widget.txt", "the blue widget\n", "Name the widget, fixes #2 for @acme/core"
    )

    assert world.run(number) == 0

    [reply] = [c for c in world.github.comments_on(pull.number) if REPLY_MARKER_PREFIX in c]
    assert reply.startswith("@maintainer: thirdshift worked on your review")  # its own mention
    assert f"f{ZERO_WIDTH}ixes #2" in reply
    assert "fixes #2" not in reply


def test_a_base_fix_issue_names_hostile_check_names_defanged(world: RunWorld) -> None:
    world.settings = world.settings.model_copy(update={"base_fix": True})
    name = "lint @acme/core fixes #2"
    number, base = failing_on_a_red_base(world)
    world.github.checks[base] = [CheckRun(1, name, base, "completed", "failure", "u")]

    def on_call(called: str) -> None:
        head = world.github.branch_head("issue-1")
        if called == "check_runs" and head is not None and head not in world.github.checks:
            world.github.checks[head] = [CheckRun(2, name, head, "completed", "failure", "u")]

    world.github.on_call = on_call

    assert world.run(number) == 1

    [fix] = [
        i
        for i in world.github.repo_state.issues.values()
        if MERGE in world.github.labels_of(i.number)
    ]
    assert fix.title == f"Fix lint @{ZERO_WIDTH}acme/core f{ZERO_WIDTH}ixes #2 on main"
    assert fix.body is not None
    mark = base_fix_marker("main", [name])
    assert fix.body.endswith(mark)
    assert "fixes #2" not in fix.body.removesuffix(mark)


def test_a_person_s_issue_carrying_the_base_fix_marker_is_not_a_base_fix(world: RunWorld) -> None:
    """A Base fix is known by its marker on an issue thirdshift opened: a person's issue that
    carries the marker is run like any other (and may itself get a Base fix opened)."""
    world.settings = world.settings.model_copy(update={"base_fix": True})
    world.github.add_user("maintainer", "maintain")
    number = world.github.add_issue(
        "Add a widget", f"Quoting: {base_fix_marker('main', ['lint'])}", [READY]
    )
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    red_base(world)

    assert world.run(number) == 1

    opened = [i for i in world.github.repo_state.issues.values() if i.title == "Fix lint on main"]
    assert len(opened) == 1
    assert opened[0].author == world.github.login


def test_a_person_quoting_a_marker_in_a_pull_request_comment_is_still_heard(
    world: RunWorld,
) -> None:
    world.github.add_user("maintainer", "maintain")
    number = world.github.add_issue("Add a widget", "Please add it.", [READY])
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    assert world.run(number) == 0
    [pull] = world.github.pull_requests()
    world.github.add_comment(
        pull.number, f"@thirdshift name it, as in {COMMENT_MARKER}", author="maintainer"
    )
    world.sessions.plays["review-1"] = commit_file("widget.txt", "blue\n", "Name the widget")

    assert world.run(number) == 0

    assert "@thirdshift name it" in world.sessions.prompts["review-1"]


def test_a_person_s_issue_carrying_an_architect_marker_is_never_taken_for_the_plan_s(
    world: RunWorld,
) -> None:
    """A plan half published (the Spec only): a person opens an issue with the marker its
    first Ticket would carry. Completing the plan opens that Ticket itself."""
    world.sessions.plays["architect"] = writes(TWO_TICKETS)
    world.github.on_call = failing_after(1)
    assert run_architect(world) == 1
    (spec,) = issues_labelled(world, PLAN)
    found = plan_marker(world.github.issue("acme", "widgets", spec).body)
    assert found is not None
    assert found.digest is not None
    forged = world.github.add_issue(
        "Shared parser", marker(found.key, "ticket-1", found.digest), [PLAN]
    )
    world.github.on_call = None
    world.sessions.plays["architect"] = writes({"outcome": "covered", "issue": spec})

    assert run_architect(world) == 0

    [latest] = [r for r in architect_runs(world) if r.state == "succeeded"]
    assert forged not in latest.published
    assert len(latest.published) == 3


def test_a_merge_run_holds_its_self_merge_when_a_commit_message_would_close_another_issue(
    world: RunWorld,
) -> None:
    """GitHub closes what a merged commit's message closes, and a pushed commit is not
    rewritten: the pull request stays ready and unmerged, the Run refused naming the issue."""
    number = world.github.add_issue("Add a widget", "", [READY])
    other = world.github.add_issue("Unrelated", "Leave me open.")
    world.sessions.plays["implement"] = commit_file(
        "widget.txt",
        "widget\n",
        f"Add the widget\n\nFixes #{number}, fixes #{other}",
        pull_request=PR_TEXT,
    )

    assert world.run(number, merge=True) == 1

    [pull] = world.github.pull_requests()
    assert pull.merged is False
    assert pull.draft is False
    assert world.github.called("merge_pull") == []
    [run] = world.store.list_runs()
    assert run.state == "refused"
    assert run.cause is not None
    assert f"would close #{other} once merged" in run.cause
    assert world.github.issue("acme", "widgets", other).state == "open"
