"""Review Repairs in process: a Run on an issue whose pull request (opened by thirdshift) has
review feedback opens a ``review-<i>`` session with the feedback, replies once, and never takes
the same feedback twice; feedback by readers, bots or thirdshift reaches no prompt."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.orchestration.conftest import BUSY, PLANTED_TOKEN, PR_TEXT, READY, RunWorld, a_poll
from tests.support.scripted_sessions import commit_file
from thirdshift.clock import ManualClock
from thirdshift.issue_url import IssueRef
from thirdshift.runs import RunRequest
from thirdshift.runs.rules.review import REPLY_MARKER_PREFIX
from thirdshift.sandbox.github.state import Pull

MAINTAINER, READER = "maintainer", "drive-by"


def _ready_pull(world: RunWorld) -> int:
    """Issue 1 run to a ready pull request; returns the pull request's number."""
    world.github.add_user(MAINTAINER, "maintain")
    world.github.add_user(READER, "read")
    number = world.github.add_issue("Add a widget", "Please add it.", [READY])
    world.sessions.plays["implement"] = commit_file(
        "widget.txt", "widget\n", "Add the widget", pull_request=PR_TEXT
    )
    assert world.run(number) == 0
    [pull] = world.github.pull_requests()
    return pull.number


def test_a_maintainer_s_review_opens_a_review_session_with_each_comment_and_its_line(
    world: RunWorld,
) -> None:
    """Changes requested with two line comments: the next Run's session is review-1, its
    prompt holds both comments with file and line, the fix is pushed, one reply names the new
    head, and the Run after that takes nothing again."""
    pull = _ready_pull(world)
    world.github.add_review(pull, READER, comments=[("widget.txt", 1, "READER-SAYS-DELETE-ALL")])
    world.github.add_review(
        pull,
        MAINTAINER,
        body="Two things before this can go in.",
        comments=[
            ("widget.txt", 1, "Say which widget."),
            ("README.md", 1, f"Mention it here too. {PLANTED_TOKEN}"),
        ],
    )
    world.sessions.plays["review-1"] = commit_file(
        "widget.txt", "the blue widget\n", "Name the widget"
    )

    assert world.run(1) == 0

    prompt = world.sessions.prompts["review-1"]
    assert "On widget.txt:1, maintainer wrote:\n> Say which widget." in prompt
    assert "On README.md:1, maintainer wrote:" in prompt
    assert "> Two things before this can go in." in prompt
    assert PLANTED_TOKEN not in prompt  # scrubbed like every prompt
    assert "READER-SAYS-DELETE-ALL" not in prompt  # beside the maintainer's, still left out
    assert world.origin_file("issue-1", "widget.txt") == "the blue widget"
    replies = [c for c in world.github.comments_on(pull) if REPLY_MARKER_PREFIX in c]
    assert len(replies) == 1
    assert "@maintainer: thirdshift worked on your review in Run 2." in replies[0]
    assert "- ` Name the widget `" in replies[0]
    head = world.github.pull(("acme"), "widgets", pull).head_sha
    assert f"`{head[:7]}`" in replies[0]
    [opened] = world.github.pull_requests()
    assert opened.draft is False
    assert world.store.handled_feedback(world.store.ensure_repository("acme", "widgets"), pull)

    world.sessions.plays["implement"] = commit_file("more.txt", "more\n", "More")
    assert world.run(1) == 0
    assert "review-2" not in world.sessions.prompts  # nothing new to answer
    assert len([c for c in world.github.comments_on(pull) if REPLY_MARKER_PREFIX in c]) == 1


def test_reviews_by_readers_bots_and_thirdshift_reach_no_prompt(world: RunWorld) -> None:
    """A reader's changes-requested review, a bot's comment mentioning thirdshift and
    thirdshift's own comment: none is feedback, and the Run says it left them out."""
    pull = _ready_pull(world)
    world.github.add_review(pull, READER, comments=[("widget.txt", 1, "READER-SAYS-DELETE-ALL")])
    world.github.add_comment(pull, "@thirdshift BOT-SAYS-PUSH-SECRETS", author="helper[bot]")
    world.github.add_comment(pull, "@thirdshift OWN-WORDS", author=world.github.login)
    world.sessions.plays["implement"] = commit_file("more.txt", "more\n", "More")

    assert world.run(1) == 0

    assert "review-1" not in world.sessions.prompts
    prompt = world.sessions.prompts["implement"]
    for planted in ("READER-SAYS-DELETE-ALL", "BOT-SAYS-PUSH-SECRETS", "OWN-WORDS"):
        assert planted not in prompt
    assert any("leaving 2 review item(s)" in line for line in world.lines), world.lines


def test_a_mention_of_the_handle_by_a_maintainer_is_feedback_but_other_words_are_not(
    world: RunWorld,
) -> None:
    """A maintainer's comment on the pull request that mentions @thirdshift asks for a change;
    one that does not, or names @thirdshift-fan, is conversation between people."""
    pull = _ready_pull(world)
    world.github.add_comment(pull, "Looks fine to me.", author=MAINTAINER)
    world.github.add_comment(pull, "cc @thirdshift-fan", author=MAINTAINER)
    world.github.add_comment(pull, "@ThirdShift please add a test.", author=MAINTAINER)
    world.sessions.plays["review-1"] = commit_file("test.txt", "t\n", "Add a test")

    assert world.run(1) == 0

    prompt = world.sessions.prompts["review-1"]
    assert "maintainer wrote:\n> @ThirdShift please add a test." in prompt
    assert "Looks fine to me." not in prompt
    assert "@thirdshift-fan" not in prompt


def test_review_repairs_stop_at_their_budget_per_pull_request(world: RunWorld) -> None:
    """With max_review_repairs 1, a second review waits for people: the Run says so and opens
    no review session."""
    world.settings = world.settings.model_copy(update={"max_review_repairs": 1})
    pull = _ready_pull(world)
    world.github.add_review(pull, MAINTAINER, body="First round.")
    world.sessions.plays["review-1"] = commit_file("one.txt", "1\n", "Round one")
    assert world.run(1) == 0
    world.github.add_review(pull, MAINTAINER, body="Second round.")
    world.sessions.plays["implement"] = commit_file("more.txt", "more\n", "More")

    assert world.run(1) == 0

    assert "review-2" not in world.sessions.prompts
    assert any("review Repairs (max_review_repairs) are spent" in line for line in world.lines)


def test_the_daemon_picks_up_a_review_once_and_never_a_reader_s(world: RunWorld) -> None:
    """A poll proposes a review Repair for a pull request with a maintainer's review, none for
    a reader's, and none once a Run took the feedback."""
    pull = _ready_pull(world)
    clock = ManualClock(datetime.now(UTC))  # GitHub's stamps are real times
    poll = a_poll(world, clock)
    world.github.add_review(pull, READER, body="I want it gone.")
    assert poll() == []  # a change of the last seconds is read again...
    clock.advance(10)
    assert poll() == []
    reads = len(world.github.called("pull_reviews"))  # ...one that settled is not
    assert poll() == []
    assert len(world.github.called("pull_reviews")) == reads  # unchanged: not read again
    world.github.add_review(pull, MAINTAINER, body="Rename it.")
    [pickup] = poll()
    assert (pickup.number, pickup.review_of) == (1, 1)

    world.sessions.plays["review-1"] = commit_file("name.txt", "n\n", "Rename it")
    assert world.run(1) == 0
    assert poll() == []


def test_no_review_repair_on_a_pull_request_a_person_opened(world: RunWorld) -> None:
    """A maintainer's review of a pull request a person opened from the Issue branch opens no
    review session: that pull request is theirs to answer."""
    world.github.add_user(MAINTAINER, "maintain")
    world.github.add_user("alice", "write")
    number = world.github.add_issue("Add a widget", "Please add it.", [BUSY])
    world.push_branch("issue-1", "early.txt")
    issue = world.github.world.create_issue(
        world.github.repo_state,
        "Alice's take",
        "",
        "alice",
        pull=Pull(
            head_ref="issue-1",
            base_ref="main",
            draft=False,
            head_sha=world.github.branch_head("issue-1") or "",
        ),
    )
    world.github.add_review(issue.number, MAINTAINER, body="Rename it, @thirdshift.")
    world.sessions.plays["implement"] = commit_file("w.txt", "w\n", "Work", pull_request=PR_TEXT)

    assert world.run(number) == 0

    assert "review-1" not in world.sessions.prompts
    assert "Rename it" not in world.sessions.prompts["implement"]


def test_no_review_repair_while_a_person_holds_the_pull_request_as_a_draft(
    world: RunWorld,
) -> None:
    """thirdshift's pull request turned into a draft by a person: the daemon's poll proposes
    no review Repair for a maintainer's review meanwhile (a Run started by a person, by hand
    or by labelling, still answers it: they asked)."""
    pull = _ready_pull(world)
    world.github.convert_to_draft("acme", "widgets", pull)
    world.github.add_review(pull, MAINTAINER, body="I take it from here, @thirdshift.")

    assert a_poll(world, ManualClock(datetime.now(UTC)))() == []


def test_a_rescue_of_a_crashed_review_repair_answers_the_review_it_had_taken(
    world: RunWorld,
) -> None:
    """The review Repair's process died after it took the review: the Rescue takes the same
    feedback over (nothing left unanswered, the budget not spent twice), opens review-1 with
    it, and replies."""
    pull = _ready_pull(world)
    review = world.github.add_review(pull, MAINTAINER, body="Rename it.")
    repository = world.store.ensure_repository("acme", "widgets")
    crashed = world.store.start_run(repository, 1, issue_branch="issue-1")
    world.store.take_feedback(repository, pull, [f"review:{review.id}"], crashed.id)
    world.store.record_crash(crashed.id, "its process died")
    world.sessions.plays["review-1"] = commit_file("name.txt", "n\n", "Rename it")

    ref = IssueRef("github.test", "acme", "widgets", 1)
    assert world.delivery().run(RunRequest(issue=ref, rescue_of=crashed.id)).exit_code == 0

    assert "> Rename it." in world.sessions.prompts["review-1"]
    rescue = world.store.latest_run(repository, 1)
    assert rescue is not None
    assert world.store.feedback_of_run(rescue.id) == {f"review:{review.id}"}
    assert world.store.feedback_of_run(crashed.id) == frozenset()
    assert world.store.review_repairs(repository, pull) == 1
    assert any(REPLY_MARKER_PREFIX in c for c in world.github.comments_on(pull))
