"""One test body, two adapters: each test here runs against the real adapter on the GitHub
stand-in and against the in-process fake the orchestration tests use, so the fake cannot drift
from what the adapter does (adr/0002). The bodies reach GitHub only through the roles of
``GitHubPort``; the set-up the roles have no method for (another user's issue or comment, a
pushed branch) is the ``Side``'s."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.fake_github import FakeGitHub, bare_origin
from tests.support.scripted_sessions import git
from tests.support.stand_in_scenario import NAME, OWNER, ROLES, TOKENS, Sandbox
from thirdshift.clock import SystemClock
from thirdshift.errors import GitHubError, NotFound
from thirdshift.github import GitHub
from thirdshift.runs.ports import GitHubPort
from thirdshift.scrub import Scrubber

MARKER = "<!-- thirdshift:failed-run -->"


@dataclass(frozen=True)
class Side:
    """GitHub as the roles see it, acting as ``me`` (a user with write), with the set-up the
    roles lack: ``open_issue`` as an admin, ``comment`` on it and ``edit`` its title and body
    as a triager, ``push`` of a branch, and ``sub_issues`` read back (no role lists them yet)."""

    github: GitHubPort
    me: str
    open_issue: Callable[[str, Sequence[str]], int]
    comment: Callable[[int, str], None]
    edit: Callable[[int, str, str], None]
    push: Callable[[str, dict[str, str]], str]
    sub_issues: Callable[[int], tuple[int, ...]]


def _adapter_side(sandbox: Sandbox) -> Side:
    token = TOKENS["wes"]
    github = GitHub(sandbox.stand_in.api_url, token, scrub=Scrubber([token]), clock=SystemClock())
    repo = sandbox.github("ada").get_repo(f"{OWNER}/{NAME}")

    def open_issue(title: str, labels: Sequence[str]) -> int:
        return repo.create_issue(title, body="Say hello.", labels=list(labels)).number

    def comment(number: int, body: str) -> None:
        sandbox.github("tia").get_repo(f"{OWNER}/{NAME}").get_issue(number).create_comment(body)

    def edit(number: int, title: str, body: str) -> None:
        sandbox.github("tia").get_repo(f"{OWNER}/{NAME}").get_issue(number).edit(
            title=title, body=body
        )

    def sub_issues(number: int) -> tuple[int, ...]:
        return github.sub_issues(OWNER, NAME, number)

    return Side(github, "wes", open_issue, comment, edit, sandbox.push, sub_issues)


def _fake_side(root: Path) -> Side:
    fake = FakeGitHub(bare_origin(root), login="wes")
    for login, role in ROLES.items():
        if login != "wes":
            fake.add_user(login, role)

    def push(branch: str, files: dict[str, str]) -> str:
        work = root / f"push-{branch}"
        if not work.exists():
            git(root, "clone", "-q", str(fake.origin), str(work))
        git(work, "checkout", "-q", "-B", branch)
        for path, text in files.items():
            (work / path).write_text(text)
        git(work, "add", "--all")
        git(work, "commit", "-q", "-m", f"Change on {branch}")
        git(work, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
        return git(work, "rev-parse", "HEAD")

    def open_issue(title: str, labels: Sequence[str]) -> int:
        issue = fake.world.create_issue(fake.repo_state, title, "Say hello.", "ada")
        fake.world.add_labels(fake.repo_state, issue, list(labels), "ada")
        return issue.number

    def comment(number: int, body: str) -> None:
        fake.add_comment(number, body, author="tia")

    def edit(number: int, title: str, body: str) -> None:
        fake.edit_issue(number, "tia", title=title, body=body)

    def sub_issues(number: int) -> tuple[int, ...]:
        return fake.sub_issues(OWNER, NAME, number)

    return Side(fake, "wes", open_issue, comment, edit, push, sub_issues)


@pytest.fixture(params=["adapter", "fake"])
def side(request: pytest.FixtureRequest, tmp_path: Path) -> Side:
    if request.param == "adapter":
        return _adapter_side(request.getfixturevalue("sandbox"))
    return _fake_side(tmp_path)


# -- Identity ---------------------------------------------------------------------------------


def test_the_token_user_and_its_repository(side: Side) -> None:
    """``authenticated_login`` names the token's user and ``repo`` the default branch."""
    gh = side.github
    assert gh.authenticated_login() == side.me
    repo = gh.repo(OWNER, NAME)
    assert (repo.owner, repo.name, repo.default_branch) == (OWNER, NAME, "main")


def test_permission_gives_each_users_role(side: Side) -> None:
    """``permission`` answers the role name: admin, write, triage, read, none."""
    github = side.github
    roles = {login: github.permission(OWNER, NAME, login) for login in TOKENS}
    assert roles == {"ada": "admin", "wes": "write", "tia": "triage", "rex": "read", "olga": "none"}


# -- IssueLabels ------------------------------------------------------------------------------


def test_the_issue_record_and_a_missing_issue(side: Side) -> None:
    """``issue`` gives the text, its author, state and labels; a number nobody opened is
    NotFound."""
    number = side.open_issue("Greet people", ("ready-for-agent",))
    info = side.github.issue(OWNER, NAME, number)
    assert [info.title, info.body, info.author] == ["Greet people", "Say hello.", "ada"]
    assert (info.number, info.state, info.labels, info.is_pull_request) == (
        number,
        "open",
        ("ready-for-agent",),
        False,
    )
    with pytest.raises(NotFound):
        side.github.issue(OWNER, NAME, 999)


def test_ensure_label_twice_makes_one_label_an_issue_can_carry(side: Side) -> None:
    """``ensure_label`` a second time is fine; the label it made goes on an issue."""
    gh = side.github
    number = side.open_issue("Labels", ())
    gh.ensure_label(OWNER, NAME, "in-progress", "fbca04", "thirdshift is working on it")
    gh.ensure_label(OWNER, NAME, "in-progress", "000000", "another description")
    gh.add_label(OWNER, NAME, number, "in-progress")
    assert gh.issue(OWNER, NAME, number).labels == ("in-progress",)


def test_labels_are_added_and_removed_one_at_a_time_keeping_the_others(side: Side) -> None:
    """add_label and remove_label touch one label; removing one the issue lacks is fine."""
    github = side.github
    number = side.open_issue("Labels", ("bug",))
    github.add_label(OWNER, NAME, number, "in-progress")
    github.add_label(OWNER, NAME, number, "in-progress")
    assert sorted(github.issue(OWNER, NAME, number).labels) == ["bug", "in-progress"]
    github.remove_label(OWNER, NAME, number, "bug")
    github.remove_label(OWNER, NAME, number, "bug")
    assert github.issue(OWNER, NAME, number).labels == ("in-progress",)


def test_of_two_runs_taking_one_label_only_the_first_is_told_it_took_it(side: Side) -> None:
    """take_label is the Claim between Runs sharing no database: GitHub answers the second
    removal 404, and the adapter says False instead of raising; the other labels stay."""
    github = side.github
    number = side.open_issue("Claimed twice", ("ready-for-agent", "bug"))
    assert github.take_label(OWNER, NAME, number, "ready-for-agent") is True
    assert github.take_label(OWNER, NAME, number, "ready-for-agent") is False
    assert github.issue(OWNER, NAME, number).labels == ("bug",)


def test_close_issue_closes_it_and_closing_again_is_fine(side: Side) -> None:
    """``close_issue`` leaves the issue closed, however often it is called."""
    number = side.open_issue("Greet people", ())
    github = side.github
    github.close_issue(OWNER, NAME, number)
    github.close_issue(OWNER, NAME, number)
    assert github.issue(OWNER, NAME, number).state == "closed"


# -- MarkedComments ---------------------------------------------------------------------------


def test_upsert_marked_comment_edits_rather_than_duplicates(side: Side) -> None:
    """Twice → one comment, carrying the marker and the second body; others' are left alone."""
    number = side.open_issue("Greet people", ())
    side.comment(number, f"quoting it: {MARKER}")
    github = side.github
    first = github.upsert_marked_comment(OWNER, NAME, number, MARKER, "The Run failed: one.")
    second = github.upsert_marked_comment(OWNER, NAME, number, MARKER, "The Run failed: two.")
    assert second.id == first.id
    assert second.body == f"The Run failed: two.\n\n{MARKER}"
    comments = github.issue_comments(OWNER, NAME, number)
    assert [(c.author, c.body) for c in comments] == [
        ("tia", f"quoting it: {MARKER}"),
        ("wes", f"The Run failed: two.\n\n{MARKER}"),
    ]


# -- ApprovalReads ----------------------------------------------------------------------------


def test_who_added_a_label_and_who_edited_the_text(side: Side) -> None:
    """``labelling`` names who added the label last (None for a label never added);
    ``text_edits`` is empty until someone edits, then names the title's and the body's editor."""
    gh = side.github
    number = side.open_issue("Approve me", ("ready-for-agent",))
    labelling = gh.labelling(OWNER, NAME, number, "ready-for-agent")
    assert labelling is not None
    assert labelling.login == "ada"
    assert gh.labelling(OWNER, NAME, number, "wontfix") is None
    assert gh.text_edits(OWNER, NAME, number) == ()
    side.edit(number, "Approve me, edited", "Say hello loudly.")
    edits = gh.text_edits(OWNER, NAME, number)
    assert sorted((e.part, e.editor) for e in edits) == [("body", "tia"), ("title", "tia")]
    assert gh.issue(OWNER, NAME, number).title == "Approve me, edited"


# -- Publishing -------------------------------------------------------------------------------


def test_issues_opened_linked_and_found_by_label(side: Side) -> None:
    """``open_issue`` opens an issue of ``me`` with its labels; ``issues_labelled`` finds the
    labelled ones lowest first; linking with ``block_issue`` or ``add_sub_issue`` twice is
    fine."""
    gh = side.github
    theirs = side.open_issue("A plan of theirs", ("architect-plan",))
    side.open_issue("Unlabelled", ())
    mine = gh.open_issue(OWNER, NAME, title="A plan", body="Do it.", labels=["architect-plan"])
    assert (mine.title, mine.body, mine.labels, mine.author) == (
        "A plan",
        "Do it.",
        ("architect-plan",),
        side.me,
    )
    found = gh.issues_labelled(OWNER, NAME, "architect-plan")
    assert [(i.number, i.is_pull_request) for i in found] == [(theirs, False), (mine.number, False)]
    for _ in range(2):
        gh.block_issue(OWNER, NAME, mine.number, theirs)
        gh.add_sub_issue(OWNER, NAME, theirs, mine.number)
    assert gh.issues_labelled(OWNER, NAME, "architect-plan", state="closed") == ()


def test_sub_issues_are_kept_in_the_order_they_were_added(side: Side) -> None:
    """Not by number: ``add_sub_issue`` appends, and adding one again moves nothing."""
    gh = side.github
    spec = side.open_issue("Spec", ())
    first, second, third = (side.open_issue(t, ()) for t in ("One", "Two", "Three"))
    for ticket in (third, first, second, third):
        gh.add_sub_issue(OWNER, NAME, spec, ticket)
    assert side.sub_issues(spec) == (third, first, second)


# -- PullRequests -----------------------------------------------------------------------------


def test_a_pull_request_opened_read_updated_and_listed(side: Side) -> None:
    """``create_pull`` gives the record ``pull`` reads back; ``update_pull`` changes only what
    it is given; ``pulls_for_head`` lists it without mergeability; it is an issue too."""
    gh = side.github
    sha = side.push("issue-1", {"a.txt": "a\n"})
    pull = gh.create_pull(
        OWNER, NAME, head="issue-1", base="main", title="Add a", body="Closes #1", draft=True
    )
    assert (pull.state, pull.merged, pull.draft) == ("open", False, True)
    assert (pull.head_ref, pull.head_sha, pull.base_ref) == ("issue-1", sha, "main")
    assert (pull.title, pull.body, pull.author) == ("Add a", "Closes #1", side.me)
    assert gh.pull(OWNER, NAME, pull.number) == pull
    assert gh.issue(OWNER, NAME, pull.number).is_pull_request is True

    updated = gh.update_pull(OWNER, NAME, pull.number, body="Closes #1\n\nMore.")
    assert (updated.title, updated.body, updated.base_ref) == (
        "Add a",
        "Closes #1\n\nMore.",
        "main",
    )
    assert gh.update_pull(OWNER, NAME, pull.number) == gh.pull(OWNER, NAME, pull.number)

    listed = gh.pulls_for_head(OWNER, NAME, "issue-1")
    assert [(p.number, p.state, p.mergeable) for p in listed] == [(pull.number, "open", None)]
    assert gh.pulls_for_head(OWNER, NAME, "issue-1", "closed") == ()
    assert gh.pulls_for_head(OWNER, NAME, "issue-99") == ()


def test_mark_ready_and_convert_to_draft_flip_draft(side: Side) -> None:
    """The two GraphQL mutations turn a pull request to draft and back; repeating is fine."""
    side.push("issue-8", {"h.txt": "h\n"})
    github = side.github
    pull = github.create_pull(
        OWNER, NAME, head="issue-8", base="main", title="Work on issue-8", body="Closes #1"
    )
    github.convert_to_draft(OWNER, NAME, pull.number)
    github.convert_to_draft(OWNER, NAME, pull.number)
    assert github.pull(OWNER, NAME, pull.number).draft is True
    github.mark_ready(OWNER, NAME, pull.number)
    github.mark_ready(OWNER, NAME, pull.number)
    assert github.pull(OWNER, NAME, pull.number).draft is False


def test_a_second_pull_request_from_one_head_is_refused(side: Side) -> None:
    """While one is open from ``head`` into ``base``, GitHub refuses (422) to open another."""
    gh = side.github
    side.push("issue-3", {"c.txt": "c\n"})
    first = gh.create_pull(OWNER, NAME, head="issue-3", base="main", title="Add c", body="c")
    with pytest.raises(GitHubError) as caught:
        gh.create_pull(OWNER, NAME, head="issue-3", base="main", title="Add c", body="c")
    assert caught.value.status == 422
    assert [p.number for p in gh.pulls_for_head(OWNER, NAME, "issue-3")] == [first.number]


def test_deleting_a_head_branch_closes_its_pull_request(side: Side) -> None:
    """``delete_branch`` twice is fine; as on GitHub, the open pull request from it closes."""
    gh = side.github
    side.push("issue-4", {"d.txt": "d\n"})
    pull = gh.create_pull(OWNER, NAME, head="issue-4", base="main", title="Add d", body="d")
    gh.delete_branch(OWNER, NAME, "issue-4")
    gh.delete_branch(OWNER, NAME, "issue-4")
    closed = gh.pull(OWNER, NAME, pull.number)
    assert (closed.state, closed.merged) == ("closed", False)


def test_only_a_merge_into_the_default_branch_closes_what_the_body_closes(side: Side) -> None:
    """As on GitHub: merged into ``spec-7``, ``Closes #n`` leaves issue n open; the pull
    request of ``spec-7`` into main, merged, closes it."""
    gh = side.github
    ticket = side.open_issue("A Ticket", ())
    side.push("spec-7", {"s.txt": "s\n"})
    sha = side.push("issue-9", {"t.txt": "t\n"})
    body = f"Closes #{ticket}"
    into_spec = gh.create_pull(OWNER, NAME, head="issue-9", base="spec-7", title="T", body=body)
    assert gh.merge_pull(OWNER, NAME, into_spec.number, sha=sha, title="T", message="").merged
    assert gh.pull(OWNER, NAME, into_spec.number).merged
    assert gh.issue(OWNER, NAME, ticket).state == "open"
    spec = gh.create_pull(OWNER, NAME, head="spec-7", base="main", title="Spec", body=body)
    gh.merge_pull(OWNER, NAME, spec.number, sha=spec.head_sha, title="Spec", message="")
    assert gh.issue(OWNER, NAME, ticket).state == "closed"
