"""The GitHub adapter (``thirdshift.github.adapter.GitHub``) against the real GitHub stand-in: every
method, the records it returns, its retries, rate-limit waits and error messages.

The methods whose behaviour the in-process fake must share (labels, the marked comment, drafts,
permissions, ...) are tested in ``test_github_roles.py``, one body against both.

Set-up that the adapter has no method for (opening issues, reading a workflow run's attempt) goes
through PyGithub as another user, as the stand-in's own contract tests do.

Over 500 lines on purpose: one test per adapter method and failure mode, sharing one sandbox.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from github import GithubException

from tests.support.fake_github import FakeGitHub, open_here
from tests.support.stand_in_scenario import FULL_NAME, NAME, OWNER, TOKENS, Sandbox
from thirdshift.clock import SystemClock
from thirdshift.errors import GitHubError, Interrupted, MergeRefused, NotFound, RateLimited
from thirdshift.github import GitHub, RequestCounts
from thirdshift.records import BlockingIssue, CheckRun, PullRequestInfo
from thirdshift.sandbox.github.limits import Faults
from thirdshift.sandbox.github.state import Pull
from thirdshift.scrub import Scrubber

MARKER = "<!-- thirdshift:failed-run -->"
CHATTY = "gadgets"
"""A second repository whose check prints a long log and fails."""
CHATTY_CHECKS = {
    "unit tests": 'for i in $(seq 1 300); do echo "test $i ok"; done; '
    'echo "FAILED test_add: 2 + 2 != 5"; exit 1',
}


@dataclass
class Seen:
    """What the adapter reported: progress lines and the waits it asked for. It is the
    adapter's clock too: real time (the stand-in's rate-limit resets are real), instant waits."""

    lines: list[str] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)

    def progress(self, line: str) -> None:
        self.lines.append(line)

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    def salvaging(self, seconds: float) -> None:
        """Waits are instant here, so a salvage's bound never matters."""


def adapter(
    sandbox: Sandbox, login: str = "wes", token: str | None = None, **options: Any
) -> tuple[GitHub, Seen]:
    """The adapter as ``login`` (or with ``token``), with a recorded, instant sleep."""
    seen = Seen()
    secret = token if token is not None else TOKENS[login]
    github = GitHub(
        sandbox.stand_in.api_url,
        secret,
        scrub=Scrubber([secret]),
        clock=seen,
        progress=seen.progress,
        **options,
    )
    return github, seen


@pytest.fixture
def faults(sandbox: Sandbox) -> Iterator[Sandbox]:
    """The sandbox, with injected faults cleared after the test (so teardown is clean)."""
    yield sandbox
    sandbox.client.clear_faults()


def open_issue(sandbox: Sandbox, title: str = "Greet people", labels: tuple[str, ...] = ()) -> int:
    repo = sandbox.github("ada").get_repo(FULL_NAME)
    return repo.create_issue(title, body="Say hello.", labels=list(labels)).number


def open_pull(sandbox: Sandbox, branch: str, files: dict[str, str]) -> tuple[PullRequestInfo, str]:
    sha = sandbox.push(branch, files)
    github, _ = adapter(sandbox)
    pull = github.create_pull(
        OWNER, NAME, head=branch, base="main", title=f"Work on {branch}", body="Closes #1"
    )
    return pull, sha


@pytest.fixture
def failing_check(sandbox: Sandbox) -> tuple[Sandbox, str]:
    """``acme/gadgets`` with a pushed head whose one check failed with a long log."""
    source = sandbox.workdir / "gadgets-source"
    source.mkdir()
    (source / "README.md").write_text("# gadgets\n")
    sandbox.client.add_repo(OWNER, CHATTY, source, CHATTY_CHECKS)
    sandbox.client.add_user(
        "wes", TOKENS["wes"], {FULL_NAME: "write", f"{OWNER}/{CHATTY}": "write"}
    )
    sha = sandbox.push(
        "issue-7", {"calc.py": "def add(a, b):\n    return a - b\n"}, repo=f"{OWNER}/{CHATTY}"
    )
    sandbox.client.wait_for_checks(OWNER, CHATTY, sha, timeout=60)
    return sandbox, sha


# -- the token, repositories, permissions ---------------------------------------------------


def test_authenticated_login_names_the_tokens_user(sandbox: Sandbox) -> None:
    """``authenticated_login`` answers the login the token belongs to."""
    github, _ = adapter(sandbox, "tia")
    assert github.authenticated_login() == "tia"


def test_a_bad_token_is_refused_naming_github_token_and_the_fix(sandbox: Sandbox) -> None:
    """A token GitHub does not know gives a 401 GitHubError that names GITHUB_TOKEN."""
    github, _ = adapter(sandbox, token="no-such-token-at-all")
    with pytest.raises(GitHubError) as caught:
        github.authenticated_login()
    assert caught.value.status == 401
    message = str(caught.value)
    assert "GITHUB_TOKEN" in message
    assert "GET /user" in message
    assert "set GITHUB_TOKEN to a valid token" in message


def test_repo_gives_the_default_branch_and_its_urls(sandbox: Sandbox) -> None:
    """``repo`` converts the repository into a RepoInfo with its default branch."""
    github, _ = adapter(sandbox)
    info = github.repo(OWNER, NAME)
    assert (info.owner, info.name, info.full_name, info.default_branch) == (
        OWNER,
        NAME,
        FULL_NAME,
        "main",
    )
    assert info.clone_url == f"{sandbox.stand_in.web_url}/{FULL_NAME}.git"
    assert info.html_url == f"{sandbox.stand_in.web_url}/{FULL_NAME}"


def test_a_missing_repository_is_not_found_naming_it(sandbox: Sandbox) -> None:
    """A 404 becomes NotFound naming the object and the request."""
    github, _ = adapter(sandbox)
    with pytest.raises(NotFound) as caught:
        github.repo(OWNER, "nothing")
    assert caught.value.status == 404
    assert "repository acme/nothing" in str(caught.value)
    assert "GET /repos/acme/nothing" in str(caught.value)


# -- issues, labels, comments ---------------------------------------------------------------


def test_issue_record_carries_title_body_labels_and_author(sandbox: Sandbox) -> None:
    """``issue`` converts an issue into an IssueInfo; a pull request is flagged as one."""
    number = open_issue(sandbox, labels=("ready-for-agent",))
    github, _ = adapter(sandbox)
    info = github.issue(OWNER, NAME, number)
    assert (info.number, info.title, info.body, info.state, info.labels, info.author) == (
        number,
        "Greet people",
        "Say hello.",
        "open",
        ("ready-for-agent",),
        "ada",
    )
    assert info.html_url == f"{sandbox.stand_in.web_url}/{FULL_NAME}/issues/{number}"
    assert info.is_pull_request is False
    pull, _ = open_pull(sandbox, "agent/pr-as-issue", {"p.txt": "p\n"})
    assert github.issue(OWNER, NAME, pull.number).is_pull_request is True


def test_issue_comments_come_from_every_page_oldest_first(sandbox: Sandbox) -> None:
    """``issue_comments`` follows the pages and converts each comment."""
    number = open_issue(sandbox)
    issue = sandbox.github("tia").get_repo(FULL_NAME).get_issue(number)
    for i in range(5):
        issue.create_comment(f"comment {i}")
    github, _ = adapter(sandbox, per_page=2)
    comments = github.issue_comments(OWNER, NAME, number)
    assert [c.body for c in comments] == [f"comment {i}" for i in range(5)]
    assert {c.author for c in comments} == {"tia"}
    assert all(isinstance(c.created_at, datetime) and c.id > 0 for c in comments)


def test_ensure_label_creates_a_missing_label_and_keeps_an_existing_one(
    sandbox: Sandbox,
) -> None:
    """``ensure_label`` creates the label once; a second call changes nothing."""
    github, _ = adapter(sandbox)
    github.ensure_label(OWNER, NAME, "in-progress", "fbca04", "thirdshift is working on it")
    github.ensure_label(OWNER, NAME, "in-progress", "000000", "another description")
    label = sandbox.github("wes").get_repo(FULL_NAME).get_label("in-progress")
    assert (label.color, label.description) == ("fbca04", "thirdshift is working on it")


def test_label_exists_tells_a_repositorys_labels_from_missing_ones(sandbox: Sandbox) -> None:
    """``label_exists`` answers a missing label False (GitHub's 404), never an error."""
    github, _ = adapter(sandbox)
    assert not github.label_exists(OWNER, NAME, "in-progress")
    github.ensure_label(OWNER, NAME, "in-progress", "fbca04", "thirdshift is working on it")
    assert github.label_exists(OWNER, NAME, "in-progress")


def test_set_issue_labels_replaces_the_whole_set(sandbox: Sandbox) -> None:
    """``set_issue_labels`` leaves exactly the labels given."""
    number = open_issue(sandbox, labels=("ready-for-agent", "bug"))
    github, _ = adapter(sandbox)
    github.set_issue_labels(OWNER, NAME, number, ["bug", "in-progress"])
    assert sorted(github.issue(OWNER, NAME, number).labels) == ["bug", "in-progress"]
    github.set_issue_labels(OWNER, NAME, number, [])
    assert github.issue(OWNER, NAME, number).labels == ()


# -- pull requests ----------------------------------------------------------------------------


def test_create_pull_returns_the_record_with_its_fields(sandbox: Sandbox) -> None:
    """``create_pull`` opens the pull request and converts it into a PullRequestInfo."""
    sha = sandbox.push("issue-1", {"a.txt": "a\n"})
    github, _ = adapter(sandbox)
    pull = github.create_pull(
        OWNER, NAME, head="issue-1", base="main", title="Add a", body="Closes #1", draft=True
    )
    assert pull.html_url == f"{sandbox.stand_in.web_url}/{FULL_NAME}/pull/{pull.number}"
    assert (pull.state, pull.merged, pull.draft) == ("open", False, True)
    assert (pull.head_ref, pull.head_sha, pull.base_ref) == ("issue-1", sha, "main")
    assert (pull.title, pull.body) == ("Add a", "Closes #1")
    assert github.pull(OWNER, NAME, pull.number) == pull


def test_pull_reads_mergeability(sandbox: Sandbox) -> None:
    """``pull`` carries GitHub's ``mergeable`` and ``mergeable_state``."""
    pull, _ = open_pull(sandbox, "issue-2", {"b.txt": "b\n"})
    github, _ = adapter(sandbox)
    info = github.pull(OWNER, NAME, pull.number)
    assert info.mergeable is True
    assert info.mergeable_state in ("clean", "unstable")


def test_pulls_for_head_lists_this_repositorys_pulls_newest_first(sandbox: Sandbox) -> None:
    """Pulls from one head, in every state by default, newest first; ``state`` filters."""
    first, _ = open_pull(sandbox, "issue-3", {"c.txt": "c\n"})
    github, _ = adapter(sandbox)
    github.update_pull(OWNER, NAME, first.number, title="Superseded")
    sandbox.github("wes").get_repo(FULL_NAME).get_pull(first.number).edit(state="closed")
    second, _ = open_pull(sandbox, "issue-3", {"c.txt": "c, again\n"})
    open_pull(sandbox, "issue-30", {"d.txt": "d\n"})
    listed = github.pulls_for_head(OWNER, NAME, "issue-3")
    assert [(p.number, p.state) for p in listed] == [
        (second.number, "open"),
        (first.number, "closed"),
    ]
    assert all(p.mergeable is None and p.head_ref == "issue-3" for p in listed)
    assert [p.number for p in github.pulls_for_head(OWNER, NAME, "issue-3", "open")] == [
        second.number
    ]
    assert github.pulls_for_head(OWNER, NAME, "issue-99") == ()


def test_update_pull_changes_only_what_it_is_given(sandbox: Sandbox) -> None:
    """``update_pull`` edits title, body and base; what is None stays."""
    sandbox.push("release", {"r.txt": "r\n"})
    pull, _ = open_pull(sandbox, "issue-4", {"e.txt": "e\n"})
    github, _ = adapter(sandbox)
    updated = github.update_pull(OWNER, NAME, pull.number, body="Closes #4\n\nMore.")
    assert (updated.title, updated.body, updated.base_ref) == (
        pull.title,
        "Closes #4\n\nMore.",
        "main",
    )
    moved = github.update_pull(OWNER, NAME, pull.number, title="Retitled", base="release")
    assert (moved.title, moved.body, moved.base_ref) == (
        "Retitled",
        "Closes #4\n\nMore.",
        "release",
    )
    assert github.update_pull(OWNER, NAME, pull.number) == github.pull(OWNER, NAME, pull.number)


def test_wait_for_mergeable_returns_once_github_has_computed_it(sandbox: Sandbox) -> None:
    """An open pull request whose mergeability is known returns at once, without waiting."""
    pull, _ = open_pull(sandbox, "issue-5", {"f.txt": "f\n"})
    github, seen = adapter(sandbox)
    assert github.wait_for_mergeable(OWNER, NAME, pull.number, timeout=30).mergeable is True
    assert seen.waits == []


def test_wait_for_mergeable_does_not_wait_on_a_closed_pull_request(sandbox: Sandbox) -> None:
    """GitHub never computes mergeability for a closed pull request, so there is no wait."""
    pull, _ = open_pull(sandbox, "issue-6", {"g.txt": "g\n"})
    sandbox.github("wes").get_repo(FULL_NAME).get_pull(pull.number).edit(state="closed")
    github, seen = adapter(sandbox)
    info = github.wait_for_mergeable(OWNER, NAME, pull.number, timeout=30)
    assert (info.state, info.mergeable, seen.waits) == ("closed", None, [])


def test_merge_pull_merges_with_a_merge_commit_at_the_expected_head(sandbox: Sandbox) -> None:
    """``merge_pull`` merges at ``sha`` and returns the merge commit."""
    pull, sha = open_pull(sandbox, "issue-9", {"i.txt": "i\n"})
    github, _ = adapter(sandbox)
    result = github.merge_pull(
        OWNER, NAME, pull.number, sha=sha, title="Merge #9", message="Closes #9"
    )
    assert result.merged is True
    assert result.sha is not None
    assert result.message
    merged = github.pull(OWNER, NAME, pull.number)
    assert (merged.merged, merged.state) == (True, "closed")
    commit = sandbox.github("wes").get_repo(FULL_NAME).get_commit(result.sha)
    assert [p.sha for p in commit.parents][1] == sha
    assert commit.commit.message.startswith("Merge #9")


def test_merging_a_moved_head_is_refused_with_409(sandbox: Sandbox) -> None:
    """A wrong ``sha`` makes GitHub refuse: MergeRefused carries 409 and GitHub's message."""
    pull, sha = open_pull(sandbox, "issue-10", {"j.txt": "j\n"})
    sandbox.push("issue-10", {"j.txt": "j, again\n"})
    github, _ = adapter(sandbox)
    with pytest.raises(MergeRefused) as caught:
        github.merge_pull(OWNER, NAME, pull.number, sha=sha, title="Merge", message="")
    assert caught.value.status == 409
    assert caught.value.detail == "Head branch was modified. Review and try the merge again."
    assert f"pull request #{pull.number} of {FULL_NAME}" in str(caught.value)
    assert github.pull(OWNER, NAME, pull.number).merged is False


def test_a_merge_github_refuses_gives_merge_refused_405(sandbox: Sandbox) -> None:
    """A scripted refusal (``fail_next_merges``) becomes MergeRefused 405 with its message."""
    pull, sha = open_pull(sandbox, "issue-11", {"k.txt": "k\n"})
    sandbox.client.fail_next_merges(FULL_NAME, 1, 405, 'Required status check "test" is failing.')
    github, _ = adapter(sandbox)
    with pytest.raises(MergeRefused) as caught:
        github.merge_pull(OWNER, NAME, pull.number, sha=sha, title="Merge", message="")
    assert (caught.value.status, caught.value.detail) == (
        405,
        'Required status check "test" is failing.',
    )
    assert github.merge_pull(OWNER, NAME, pull.number, sha=sha, title="Merge", message="").merged


def test_delete_branch_deletes_it_and_a_gone_branch_is_fine(sandbox: Sandbox) -> None:
    """``delete_branch`` removes the branch; deleting it again raises nothing."""
    sandbox.push("issue-12", {"l.txt": "l\n"})
    github, _ = adapter(sandbox)
    github.delete_branch(OWNER, NAME, "issue-12")
    github.delete_branch(OWNER, NAME, "issue-12")
    with pytest.raises(GithubException) as caught:
        sandbox.github("wes").get_repo(FULL_NAME).get_git_ref("heads/issue-12")
    assert caught.value.status == 404


# -- checks and Actions -----------------------------------------------------------------------


def _failed(runs: tuple[CheckRun, ...]) -> CheckRun:
    return next(r for r in runs if r.conclusion == "failure")


def test_check_runs_carry_the_actions_job_of_a_failing_check(
    failing_check: tuple[Sandbox, str],
) -> None:
    """A failing Actions check comes with its job id and workflow run id."""
    sandbox, sha = failing_check
    github, _ = adapter(sandbox)
    runs = github.check_runs(OWNER, CHATTY, sha)
    assert [(r.name, r.status, r.conclusion, r.head_sha) for r in runs] == [
        ("unit tests", "completed", "failure", sha)
    ]
    failed = runs[0]
    assert failed.job_id is not None
    assert failed.run_id is not None
    assert f"/actions/runs/{failed.run_id}/job/{failed.job_id}" in failed.html_url
    workflow = sandbox.github("wes").get_repo(f"{OWNER}/{CHATTY}").get_workflow_run(failed.run_id)
    assert failed.job_id in [job.id for job in workflow.jobs()]


def test_check_runs_come_from_every_page(sandbox: Sandbox) -> None:
    """With one check run per page, both checks of the head are still returned."""
    sha = sandbox.push("issue-13", {"app.py": "broken = True\n"})
    sandbox.client.wait_for_checks(OWNER, NAME, sha, timeout=60)
    github, _ = adapter(sandbox, per_page=1)
    runs = github.check_runs(OWNER, NAME, sha)
    assert {(r.name, r.conclusion) for r in runs} == {("lint", "success"), ("test", "failure")}


def test_job_log_tail_returns_the_end_of_the_failed_jobs_log(
    failing_check: tuple[Sandbox, str],
) -> None:
    """``job_log_tail`` follows GitHub's redirect and keeps the last lines, whole."""
    sandbox, sha = failing_check
    github, _ = adapter(sandbox)
    job_id = _failed(github.check_runs(OWNER, CHATTY, sha)).job_id
    assert job_id is not None
    tail = github.job_log_tail(OWNER, CHATTY, job_id, max_chars=200)
    assert tail.rstrip().endswith("FAILED test_add: 2 + 2 != 5")
    assert len(tail) <= 200
    assert tail.startswith("test ")
    whole = github.job_log_tail(OWNER, CHATTY, job_id, max_chars=100_000)
    assert whole.startswith("test 1 ok\n")


def test_rerun_failed_jobs_starts_a_new_attempt(failing_check: tuple[Sandbox, str]) -> None:
    """After ``rerun_failed_jobs`` the workflow run is on attempt 2 with a new job."""
    sandbox, sha = failing_check
    github, _ = adapter(sandbox)
    before = _failed(github.check_runs(OWNER, CHATTY, sha))
    assert before.run_id is not None
    github.rerun_failed_jobs(OWNER, CHATTY, before.run_id)
    sandbox.client.wait_for_checks(OWNER, CHATTY, sha, timeout=60)
    workflow = sandbox.github("wes").get_repo(f"{OWNER}/{CHATTY}").get_workflow_run(before.run_id)
    assert workflow.run_attempt == 2
    after = github.check_runs(OWNER, CHATTY, sha)
    assert any(
        r.name == "unit tests" and r.run_id == before.run_id and r.job_id != before.job_id
        for r in after
    )


def test_commit_statuses_are_empty_when_only_actions_report(sandbox: Sandbox) -> None:
    """An Actions-only repository has no commit statuses, as on GitHub."""
    github, _ = adapter(sandbox)
    assert github.commit_statuses(OWNER, NAME, sandbox.main_sha) == ()


def test_the_rate_limit_seen_is_the_last_answer_s_and_asks_nothing(sandbox: Sandbox) -> None:
    """``rate_limit_seen`` reads what GitHub's last answer said, without a request: unknown
    before any answer; then the budget that answer stated."""
    github, _ = adapter(sandbox, "rex")
    assert github.rate_limit_seen() is None
    github.repo(OWNER, NAME)
    seen = github.rate_limit_seen()
    assert seen is not None
    assert github.rate_limit_seen() == seen  # reading it made no request
    github.repo(OWNER, NAME)
    after = github.rate_limit_seen()
    assert after is not None
    assert after < seen


def test_rate_limit_remaining_counts_the_requests_made(sandbox: Sandbox) -> None:
    """``rate_limit_remaining`` answers the core budget left; asking costs nothing."""
    github, _ = adapter(sandbox, "rex")
    first = github.rate_limit_remaining()
    assert first is not None
    github.repo(OWNER, NAME)
    assert github.rate_limit_remaining() == first - 1


# -- retries, rate limits, messages -----------------------------------------------------------


def test_server_errors_are_retried_with_progress_lines(faults: Sandbox) -> None:
    """Two 502s are retried after 0.5 s and 1 s, each with a progress line, then it works."""
    github, seen = adapter(faults)
    faults.client.inject_faults(statuses=(502,), count=2)
    assert github.repo(OWNER, NAME).default_branch == "main"
    assert seen.lines == [
        "GitHub answered 502 to GET /repos/acme/widgets; retrying in 0.5s (1 of 4)",
        "GitHub answered 502 to GET /repos/acme/widgets; retrying in 1s (2 of 4)",
    ]
    assert seen.waits == [0.5, 1.0]


def test_server_errors_beyond_the_retries_fail_naming_the_request(faults: Sandbox) -> None:
    """When every retry gets a 5xx, GitHubError names the request and the status."""
    github, seen = adapter(faults, retries=2)
    faults.client.inject_faults(statuses=(503,))
    with pytest.raises(GitHubError) as caught:
        github.issue(OWNER, NAME, 1)
    assert caught.value.status == 503
    assert str(caught.value).startswith(
        "GitHub answered 503 to GET /repos/acme/widgets/issues/1, even after 2 retries; "
    )
    assert seen.waits == [0.5, 1.0]


def test_a_create_that_got_a_server_error_is_checked_before_asking_again(
    faults: Sandbox,
) -> None:
    """After a 500 on ``POST .../pulls`` it looks for the pull request first: one is opened."""
    faults.push("issue-14", {"m.txt": "m\n"})
    github, seen = adapter(faults)
    before = len(faults.client.requests())
    faults.client.inject_faults(statuses=(500,), count=1)
    pull = github.create_pull(OWNER, NAME, head="issue-14", base="main", title="M", body="")
    made = [(r["method"], r["path"], r["status"]) for r in faults.client.requests()[before:]]
    assert made == [
        ("POST", "/api/v3/repos/acme/widgets/pulls", 500),
        ("GET", "/api/v3/repos/acme/widgets/pulls", 200),
        ("POST", "/api/v3/repos/acme/widgets/pulls", 201),
    ]
    assert [p.number for p in github.pulls_for_head(OWNER, NAME, "issue-14")] == [pull.number]
    assert seen.lines == [
        "GitHub answered 500 to POST /repos/acme/widgets/pulls; retrying in 0.5s (1 of 4)"
    ]


def test_a_rate_limit_is_waited_out_then_the_request_succeeds(faults: Sandbox) -> None:
    """A rate-limit 403 sleeps until GitHub's reset time, says so, then asks again."""
    github, seen = adapter(faults, max_rate_limit_wait=7200)
    github.authenticated_login()
    faults.client.inject_faults(rate_limit_403=True, count=1)
    assert github.repo(OWNER, NAME).name == NAME
    assert len(seen.waits) == 1
    assert 3500 <= seen.waits[0] <= 3601
    assert re.fullmatch(r"GitHub rate limit reached; waiting \d+s until it resets", seen.lines[0])


def test_a_rate_limit_that_resets_too_late_raises_rate_limited(faults: Sandbox) -> None:
    """A reset beyond ``max_rate_limit_wait`` gives RateLimited naming when it resets."""
    github, seen = adapter(faults)
    github.authenticated_login()
    faults.client.inject_faults(rate_limit_403=True, count=1)
    with pytest.raises(RateLimited) as caught:
        github.repo(OWNER, NAME)
    assert caught.value.status == 403
    assert caught.value.resets_at is not None
    assert f"resets at {caught.value.resets_at:%H:%M:%S} UTC" in str(caught.value)
    assert "GET /repos/acme/widgets" in str(caught.value)
    assert seen.waits == []


def test_an_unreachable_github_is_retried_then_named(sandbox: Sandbox) -> None:
    """Connection failures are retried, then GitHubError names the request and the setting."""
    seen = Seen()
    github = GitHub(
        "http://127.0.0.1:9/api/v3",
        TOKENS["wes"],
        scrub=Scrubber([TOKENS["wes"]]),
        clock=seen,
        progress=seen.progress,
    )
    with pytest.raises(GitHubError) as caught:
        github.authenticated_login()
    assert caught.value.status is None
    assert "could not reach GitHub for GET /user" in str(caught.value)
    assert "THIRDSHIFT_GITHUB_API_URL" in str(caught.value)
    assert seen.waits == [0.5, 1.0, 2.0, 4.0]


def test_the_token_never_appears_in_errors_or_progress_lines(faults: Sandbox) -> None:
    """A planted token, even echoed back by GitHub, is in no message and no progress line."""
    token = "planted-secret-token-4f9c2b7e1d"
    faults.client.add_user("mia", token, {FULL_NAME: "write"})
    github, seen = adapter(faults, token=token, retries=1)
    messages: list[str] = []

    def failing(call: Any) -> None:
        with pytest.raises(GitHubError) as caught:
            call()
        messages.append(str(caught.value))
        messages.append(caught.value.detail)

    failing(lambda: github.ensure_label(OWNER, NAME, f"x-{token}", "not-a-colour", ""))
    failing(lambda: github.issue(OWNER, NAME, 404))
    faults.client.inject_faults(statuses=(502,))
    failing(lambda: github.repo(OWNER, NAME))
    faults.client.clear_faults()
    faults.client.inject_faults(rate_limit_403=True, count=1)
    failing(lambda: github.repo(OWNER, NAME))
    bad, bad_seen = adapter(faults, token=token + "-revoked")
    failing(bad.authenticated_login)
    assert "[REDACTED]" in messages[0]
    assert seen.lines
    for text in [*messages, *seen.lines, *bad_seen.lines]:
        assert token not in text


def test_a_merge_that_got_a_server_error_is_checked_then_asked_again(faults: Sandbox) -> None:
    """After a 500 on the merge it reads the pull request; not merged, so it merges once."""
    pull, sha = open_pull(faults, "issue-15", {"n.txt": "n\n"})
    github, _ = adapter(faults)
    before = len(faults.client.requests())
    faults.client.inject_faults(statuses=(500,), count=1)
    result = github.merge_pull(OWNER, NAME, pull.number, sha=sha, title="Merge", message="")
    made = [(r["method"], r["status"]) for r in faults.client.requests()[before:]]
    assert made == [("PUT", 500), ("GET", 200), ("PUT", 200)]
    assert result.merged is True
    assert github.pull(OWNER, NAME, pull.number).merged is True


def test_a_rerun_that_got_a_server_error_is_checked_then_asked_again(
    failing_check: tuple[Sandbox, str],
) -> None:
    """After a 500 on the re-run it reads the run's attempt; unchanged, so it asks once more."""
    sandbox, sha = failing_check
    github, _ = adapter(sandbox)
    run_id = _failed(github.check_runs(OWNER, CHATTY, sha)).run_id
    assert run_id is not None
    before = len(sandbox.client.requests())
    # Seed 10 draws "serve" then "fail": the read of the attempt passes, the POST gets the 500.
    sandbox.client.inject_faults(error_rate=0.5, statuses=(500,), seed=10, count=1)
    try:
        github.rerun_failed_jobs(OWNER, CHATTY, run_id)
    finally:
        sandbox.client.clear_faults()
    made = [(r["method"], r["status"]) for r in sandbox.client.requests()[before:]]
    assert made == [("GET", 200), ("POST", 500), ("GET", 200), ("POST", 201)]
    sandbox.client.wait_for_checks(OWNER, CHATTY, sha, timeout=60)
    workflow = sandbox.github("wes").get_repo(f"{OWNER}/{CHATTY}").get_workflow_run(run_id)
    assert workflow.run_attempt == 2


def test_after_an_interrupt_only_a_salvage_keeps_its_retries(faults: Sandbox) -> None:
    """Interrupted, a wait for a retry ends the request at once; once the salvage starts, the
    same 502s are retried again (within the salvage's bound) and the write goes through."""
    interrupt = threading.Event()
    interrupt.set()
    clock = SystemClock(interrupt)
    github = GitHub(
        faults.stand_in.api_url, TOKENS["wes"], scrub=Scrubber([TOKENS["wes"]]), clock=clock
    )
    number = open_issue(faults, "Salvage")
    faults.client.inject_faults(statuses=(502,), count=1)
    with pytest.raises(Interrupted):
        github.add_label(OWNER, NAME, number, "in-progress")
    faults.client.inject_faults(statuses=(502,), count=2)
    clock.salvaging(30)
    github.add_label(OWNER, NAME, number, "in-progress")
    assert "in-progress" in github.issue(OWNER, NAME, number).labels


# -- the daemon's reads: issues by label, who labelled, open blockers -------------------------


def block(sandbox: Sandbox, number: int, blocker: int) -> None:
    """Issue ``blocker`` blocks issue ``number`` (PyGithub has no method for dependencies)."""
    gh = sandbox.github("ada")
    repo = gh.get_repo(FULL_NAME)
    gh.requester.requestJsonAndCheck(
        "POST",
        f"{repo.url}/issues/{number}/dependencies/blocked_by",
        input={"issue_id": repo.get_issue(blocker).id},
    )


def test_issues_labelled_lists_the_labelled_issues_lowest_first_pulls_marked(
    sandbox: Sandbox,
) -> None:
    """Only issues carrying the label, in the state asked, lowest number first; a labelled pull
    request is listed and marked as one."""
    first = open_issue(sandbox, "First", ("ready-for-agent", "bug"))
    open_issue(sandbox, "Unlabelled")
    closed = open_issue(sandbox, "Closed", ("ready-for-agent",))
    sandbox.github("ada").get_repo(FULL_NAME).get_issue(closed).edit(state="closed")
    pull, _ = open_pull(sandbox, "issue-40", {"o.txt": "o\n"})
    sandbox.github("ada").get_repo(FULL_NAME).get_issue(pull.number).add_to_labels(
        "ready-for-agent"
    )
    last = open_issue(sandbox, "Last", ("Ready-For-Agent",))
    github, _ = adapter(sandbox)
    listed = github.issues_labelled(OWNER, NAME, "ready-for-agent")
    assert [(i.number, i.title, i.is_pull_request) for i in listed] == [
        (first, "First", False),
        (pull.number, pull.title, True),
        (last, "Last", False),
    ]
    assert listed[0].labels == ("ready-for-agent", "bug")
    assert listed[0].state == "open"
    assert listed[0].html_url == f"{sandbox.stand_in.web_url}/{FULL_NAME}/issues/{first}"
    assert listed[0].updated_at.tzinfo is not None
    closed_ones = github.issues_labelled(OWNER, NAME, "ready-for-agent", state="closed")
    assert [(i.number, i.state) for i in closed_ones] == [(closed, "closed")]
    assert github.issues_labelled(OWNER, NAME, "no-such-label") == ()


def test_issues_labelled_over_several_pages_is_complete_and_read_whole_each_time(
    sandbox: Sandbox,
) -> None:
    """Five labelled issues at two per page come back whole; such an answer is not kept, so
    asking again reads every page again (no 304 could vouch for the pages after the first)."""
    numbers = [open_issue(sandbox, f"Issue {i}", ("ready-for-agent",)) for i in range(5)]
    github, _ = adapter(sandbox, per_page=2)
    assert [i.number for i in github.issues_labelled(OWNER, NAME, "ready-for-agent")] == numbers
    assert github.request_counts().sent == 3
    assert [i.number for i in github.issues_labelled(OWNER, NAME, "ready-for-agent")] == numbers
    assert github.request_counts() == RequestCounts(sent=6, not_modified=0)


def test_labelled_by_names_who_added_the_label_last(sandbox: Sandbox) -> None:
    """The labeller is read from the issue's events: relabelled by another user, that user
    is named; other labels do not count; a label never added gives None."""
    number = open_issue(sandbox, "Labelled", ("ready-for-agent",))
    github, _ = adapter(sandbox)
    assert github.labelled_by(OWNER, NAME, number, "ready-for-agent") == "ada"
    issue = sandbox.github("tia").get_repo(FULL_NAME).get_issue(number)
    issue.remove_from_labels("ready-for-agent")
    issue.add_to_labels("ready-for-agent")
    sandbox.github("wes").get_repo(FULL_NAME).get_issue(number).add_to_labels("bug")
    assert github.labelled_by(OWNER, NAME, number, "ready-for-agent") == "tia"
    assert github.labelled_by(OWNER, NAME, number, "READY-for-agent") == "tia"
    assert github.labelled_by(OWNER, NAME, number, "bug") == "wes"
    assert github.labelled_by(OWNER, NAME, number, "wontfix") is None


def test_blockers_lists_every_blocker_with_its_state_a_closed_one_too(sandbox: Sandbox) -> None:
    """A Spec run's read: each blocked-by dependency, ascending, with its state; a closed
    blocker stays listed, closed (a Ticket closed without landing still holds its dependent)."""
    blocked = open_issue(sandbox, "Blocked")
    late, early = open_issue(sandbox, "Blocker one"), open_issue(sandbox, "Blocker two")
    github, _ = adapter(sandbox)
    assert github.blockers(OWNER, NAME, blocked) == ()
    block(sandbox, blocked, early)
    block(sandbox, blocked, late)
    sandbox.github("ada").get_repo(FULL_NAME).get_issue(late).edit(state="closed")
    assert github.blockers(OWNER, NAME, blocked) == (
        BlockingIssue(late, "closed"),
        BlockingIssue(early, "open"),
    )


def test_a_sub_issue_added_twice_is_listed_once_and_another_parent_is_refused(
    sandbox: Sandbox,
) -> None:
    """Adding a sub-issue again changes nothing; every page is listed; a sub-issue has one
    parent, so making it another issue's is GitHub's 422."""
    spec, other = open_issue(sandbox, "Spec"), open_issue(sandbox, "Other spec")
    tickets = [open_issue(sandbox, f"Ticket {i}") for i in range(3)]
    github, _ = adapter(sandbox, per_page=2)
    assert github.sub_issues(OWNER, NAME, spec) == ()
    for ticket in (*tickets, tickets[0]):
        github.add_sub_issue(OWNER, NAME, spec, ticket)
    assert github.sub_issues(OWNER, NAME, spec) == tuple(tickets)
    with pytest.raises(GitHubError) as caught:
        github.add_sub_issue(OWNER, NAME, other, tickets[0])
    assert caught.value.status == 422
    assert github.sub_issues(OWNER, NAME, other) == ()


def test_recent_issues_leave_out_pulls_newest_update_first_reading_only_the_pages_needed(
    sandbox: Sandbox,
) -> None:
    """Most recently updated first (a comment brings an old issue to the front), pull requests
    left out, at most ``limit``: at two per page, only the pages that hold ``limit`` issues are
    read."""
    first, second, third = (open_issue(sandbox, title) for title in ("One", "Two", "Three"))
    pull, _ = open_pull(sandbox, "issue-45", {"t.txt": "t\n"})
    fourth = open_issue(sandbox, "Four")
    time.sleep(1.1)  # GitHub's stamps count whole seconds
    sandbox.github("ada").get_repo(FULL_NAME).get_issue(second).create_comment("Still wanted.")
    github, _ = adapter(sandbox, per_page=2)
    # GitHub's order: second, fourth, the pull request, third, first.
    recent = github.recent_issues(OWNER, NAME, "open", 3)
    assert [(i.number, i.title, i.is_pull_request) for i in recent] == [
        (second, "Two", False),
        (fourth, "Four", False),
        (third, "Three", False),
    ]
    assert github.request_counts().sent == 2
    every = github.recent_issues(OWNER, NAME, "open", 10)
    assert [i.number for i in every] == [second, fourth, third, first]
    assert pull.number not in [i.number for i in every]
    assert github.recent_issues(OWNER, NAME, "open", 1) == recent[:1]
    sandbox.github("ada").get_repo(FULL_NAME).get_issue(third).edit(state="closed")
    assert [i.number for i in github.recent_issues(OWNER, NAME, "closed", 5)] == [third]


def test_the_fake_keeps_sub_issues_and_recent_issues_as_the_adapter_does(tmp_path: Path) -> None:
    """FakeGitHub, on the stand-in's own state: a sub-issue added twice is listed once, another
    parent is refused 422; recent issues leave pull requests out, newest update first, at most
    ``limit``."""
    fake = FakeGitHub(tmp_path)
    spec, other = fake.add_issue("Spec"), fake.add_issue("Other spec")
    first, second = fake.add_issue("Ticket one"), fake.add_issue("Ticket two")
    for ticket in (first, second, first):
        fake.add_sub_issue("acme", "widgets", spec, ticket)
    assert fake.sub_issues("acme", "widgets", spec) == (first, second)
    with pytest.raises(GitHubError) as caught:
        fake.add_sub_issue("acme", "widgets", other, first)
    assert caught.value.status == 422
    assert fake.sub_issues("acme", "widgets", other) == ()
    pull = Pull(head_ref="issue-1", base_ref="main", draft=False, head_sha="0" * 40)
    fake.world.create_issue(fake.repo_state, "A pull request", "", "alice", pull=pull)
    fake.repo_state.issue(first).updated_at += timedelta(seconds=5)  # a later change
    recent = fake.recent_issues("acme", "widgets", "open", 3)
    assert [i.number for i in recent] == [first, second, other]
    fake.close_issue("acme", "widgets", other)
    assert [i.number for i in fake.recent_issues("acme", "widgets", "closed", 3)] == [other]


def test_the_fake_answers_the_daemons_reads_as_the_adapter_does(tmp_path: Path) -> None:
    """FakeGitHub, on the stand-in's own state, lists labelled issues lowest first, names the
    last labeller and keeps only open blockers."""
    fake = FakeGitHub(tmp_path)
    ready = fake.add_issue("Ready", labels=("ready-for-agent",))
    other = fake.add_issue("Other")
    blocker = fake.add_issue("Blocker", labels=("Ready-For-Agent",))
    fake.unlabel_issue(ready, "ready-for-agent")
    fake.label_issue(ready, "ready-for-agent", by="bob")
    fake.block(ready, blocker)
    fake.block(ready, other)
    assert [i.number for i in fake.issues_labelled("acme", "widgets", "ready-for-agent")] == [
        ready,
        blocker,
    ]
    assert fake.labelled_by("acme", "widgets", ready, "READY-FOR-AGENT") == "bob"
    assert fake.labelled_by("acme", "widgets", other, "ready-for-agent") is None
    assert open_here(fake.blockers("acme", "widgets", ready)) == (other, blocker)
    fake.close_issue("acme", "widgets", other)
    assert open_here(fake.blockers("acme", "widgets", ready)) == (blocker,)


# -- conditional requests -------------------------------------------------------------------


def test_an_unchanged_list_is_answered_304_at_no_cost_and_a_change_is_seen_at_once(
    sandbox: Sandbox,
) -> None:
    """Asked again with nothing changed, the list is a 304 that spends no rate-limit point and
    gives the same records; a label added meanwhile shows on the very next ask."""
    first = open_issue(sandbox, "First", ("ready-for-agent",))
    github, _ = adapter(sandbox)
    listed = github.issues_labelled(OWNER, NAME, "ready-for-agent")
    left = github.rate_limit_remaining()
    before = len(sandbox.client.requests())
    assert github.issues_labelled(OWNER, NAME, "ready-for-agent") == listed
    asked = sandbox.client.requests()[before:]
    assert [(r["path"], r["status"]) for r in asked] == [(f"/api/v3/repos/{FULL_NAME}/issues", 304)]
    assert github.rate_limit_remaining() == left
    second = open_issue(sandbox, "Second")
    sandbox.github("tia").get_repo(FULL_NAME).get_issue(second).add_to_labels("ready-for-agent")
    after = github.issues_labelled(OWNER, NAME, "ready-for-agent")
    assert [i.number for i in after] == [first, second]
    assert github.request_counts().not_modified == 1


def test_check_runs_polled_twice_cost_one_rate_limit_point(sandbox: Sandbox) -> None:
    """A CI watch polling a settled head pays for the first answer only."""
    sha = sandbox.push("issue-41", {"p.txt": "p\n"})
    sandbox.client.wait_for_checks(OWNER, NAME, sha, timeout=60)
    github, _ = adapter(sandbox, "rex")
    left = github.rate_limit_remaining()
    assert left is not None
    runs = github.check_runs(OWNER, NAME, sha)
    assert github.check_runs(OWNER, NAME, sha) == runs
    assert {r.name for r in runs} == {"lint", "test"}
    assert github.rate_limit_remaining() == left - 1


def test_every_repeated_read_is_conditional(sandbox: Sandbox) -> None:
    """issue, pull, check runs, commit statuses, who labelled, open blockers, sub-issues,
    recent issues and branch existence, each read twice unchanged: every second read is a 304
    giving the same record."""
    number = open_issue(sandbox, "Read twice", ("ready-for-agent",))
    pull, sha = open_pull(sandbox, "issue-42", {"q.txt": "q\n"})
    sandbox.client.wait_for_checks(OWNER, NAME, sha, timeout=60)
    github, _ = adapter(sandbox)
    reads: list[Callable[[], object]] = [
        lambda: github.issue(OWNER, NAME, number),
        lambda: github.pull(OWNER, NAME, pull.number),
        lambda: github.check_runs(OWNER, NAME, sha),
        lambda: github.commit_statuses(OWNER, NAME, sha),
        lambda: github.labelled_by(OWNER, NAME, number, "ready-for-agent"),
        lambda: github.blockers(OWNER, NAME, number),
        lambda: github.sub_issues(OWNER, NAME, number),
        lambda: github.recent_issues(OWNER, NAME, "open", 5),
        lambda: github.branch_exists(OWNER, NAME, "issue-42"),
    ]
    for read in reads:
        assert read() == read()
    assert github.request_counts() == RequestCounts(sent=2 * len(reads), not_modified=len(reads))


def test_branch_exists_follows_the_branch_being_deleted(sandbox: Sandbox) -> None:
    """A kept answer never outlives the branch: after the delete, it is gone."""
    sandbox.push("issue-43", {"r.txt": "r\n"})
    github, _ = adapter(sandbox)
    assert github.branch_exists(OWNER, NAME, "issue-43") is True
    github.delete_branch(OWNER, NAME, "issue-43")
    assert github.branch_exists(OWNER, NAME, "issue-43") is False
    assert github.branch_exists(OWNER, NAME, "main") is True


def test_the_kept_answers_are_bounded_least_recently_used_first(sandbox: Sandbox) -> None:
    """With room for one answer, reading two issues in turn keeps neither for the other."""
    one, two = open_issue(sandbox, "One"), open_issue(sandbox, "Two")
    github, _ = adapter(sandbox, cache_size=1)
    for number in (one, two, one, two):
        github.issue(OWNER, NAME, number)
    assert github.request_counts().not_modified == 0
    github.issue(OWNER, NAME, two)
    assert github.request_counts().not_modified == 1


def test_request_counts_include_retries(faults: Sandbox) -> None:
    """Two 502s then an answer: three requests sent."""
    github, _ = adapter(faults)
    faults.client.inject_faults(statuses=(502,), count=2)
    github.repo(OWNER, NAME)
    assert github.request_counts() == RequestCounts(sent=3, not_modified=0)


# -- Retry-After, rate-limit windows, lost answers --------------------------------------------


def test_a_503_with_retry_after_waits_as_asked(faults: Sandbox) -> None:
    """The wait is the one GitHub asks for, not the backoff, and says so."""
    github, seen = adapter(faults)
    faults.stand_in.set_faults(Faults(error_rate=1.0, statuses=(503,), retry_after=7, count=1))
    assert github.repo(OWNER, NAME).name == NAME
    assert seen.waits == [7.0]
    assert seen.lines == [
        "GitHub answered 503 to GET /repos/acme/widgets; retrying in 7s, as its Retry-After "
        "asks (1 of 4)"
    ]


def test_a_retry_after_longer_than_the_longest_wait_is_cut_to_it(faults: Sandbox) -> None:
    """A 502 asking for an hour waits ``max_rate_limit_wait`` at most."""
    number = open_issue(faults)
    github, seen = adapter(faults, max_rate_limit_wait=120)
    faults.stand_in.set_faults(Faults(error_rate=1.0, statuses=(502,), retry_after=3600, count=1))
    github.issue(OWNER, NAME, number)
    assert seen.waits == [120.0]


def test_retry_after_waits_share_one_budget_and_then_give_up_naming_it(faults: Sandbox) -> None:
    """Every answer a 503 asking for 50s, at most 120s of waiting in all: two waits, then an
    error that says why, never four waits of up to the whole budget each."""
    github, seen = adapter(faults, max_rate_limit_wait=120)
    faults.stand_in.set_faults(Faults(error_rate=1.0, statuses=(503,), retry_after=50))
    with pytest.raises(GitHubError) as caught:
        github.repo(OWNER, NAME)
    assert seen.waits == [50.0, 50.0]
    assert "which asks for 50s more, past the 120s thirdshift waits in all" in str(caught.value)


@dataclass
class RealSleep(Seen):
    """Waits that really pass, for a stand-in window measured in real time."""

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        time.sleep(seconds)


def test_a_rate_limit_window_is_waited_out_until_its_reset(faults: Sandbox) -> None:
    """For a scripted second, every request is refused with a reset at its end; the adapter
    waits until then, and the same request is served."""
    clock = RealSleep()
    github = GitHub(
        faults.stand_in.api_url,
        TOKENS["wes"],
        scrub=Scrubber([TOKENS["wes"]]),
        clock=clock,
        progress=clock.progress,
    )
    faults.stand_in.limit_for(1.0)
    assert github.repo(OWNER, NAME).name == NAME
    assert len(clock.waits) == 1
    assert 1.0 <= clock.waits[0] <= 2.0
    made = [r["status"] for r in faults.client.requests() if r["path"].endswith("/widgets")]
    assert made == [403, 200]


def test_a_label_whose_answer_was_lost_is_checked_not_added_again(faults: Sandbox) -> None:
    """Every write answered 502 after being made: add_label reads the labels, finds its label
    there, and stops; the issue carries it once."""
    number = open_issue(faults, "Lost label")
    github, _ = adapter(faults)
    faults.stand_in.set_faults(Faults(lost_answers=1.0))
    before = len(faults.client.requests())
    github.add_label(OWNER, NAME, number, "in-progress")
    made = [(r["method"], r["status"]) for r in faults.client.requests()[before:]]
    assert made == [("POST", 502), ("GET", 200)]
    assert github.issue(OWNER, NAME, number).labels == ("in-progress",)


def test_a_label_taken_whose_answer_was_lost_counts_as_taken(faults: Sandbox) -> None:
    """The removal was made and its answer lost: take_label reads the issue, finds the label
    gone, and says it took it (without asking a second time, which GitHub would answer 404)."""
    number = open_issue(faults, "Lost take", ("ready-for-agent",))
    github, _ = adapter(faults)
    faults.stand_in.set_faults(Faults(lost_answers=1.0))
    before = len(faults.client.requests())
    assert github.take_label(OWNER, NAME, number, "ready-for-agent") is True
    made = [(r["method"], r["status"]) for r in faults.client.requests()[before:]]
    assert made == [("DELETE", 502), ("GET", 200)]


def test_a_sub_issue_whose_answer_was_lost_is_checked_and_left_one_sub_issue(
    faults: Sandbox,
) -> None:
    """The sub-issue was added and its answer lost: add_sub_issue reads the sub-issues, finds
    it there, and stops without asking again; the issue has that one sub-issue."""
    spec, ticket = open_issue(faults, "Lost spec"), open_issue(faults, "Lost ticket")
    github, _ = adapter(faults)
    faults.stand_in.set_faults(Faults(lost_answers=1.0))
    before = len(faults.client.requests())
    github.add_sub_issue(OWNER, NAME, spec, ticket)
    made = [(r["method"], r["status"]) for r in faults.client.requests()[before:]]
    assert made == [("GET", 200), ("POST", 502), ("GET", 200)]
    faults.client.clear_faults()
    assert github.sub_issues(OWNER, NAME, spec) == (ticket,)


def test_a_comment_whose_answer_was_lost_is_posted_once(faults: Sandbox) -> None:
    """The marked comment is found after the lost answer, not posted twice."""
    number = open_issue(faults, "Lost comment")
    github, _ = adapter(faults)
    github.authenticated_login()
    faults.stand_in.set_faults(Faults(lost_answers=1.0))
    comment = github.upsert_marked_comment(OWNER, NAME, number, MARKER, "The Run failed.")
    faults.client.clear_faults()
    comments = github.issue_comments(OWNER, NAME, number)
    assert [(c.id, c.body) for c in comments] == [(comment.id, f"The Run failed.\n\n{MARKER}")]


def test_a_pull_request_whose_answer_was_lost_is_opened_once(faults: Sandbox) -> None:
    """create_pull finds the pull request its lost answer opened and returns it."""
    faults.push("issue-44", {"s.txt": "s\n"})
    github, _ = adapter(faults)
    faults.stand_in.set_faults(Faults(lost_answers=1.0))
    pull = github.create_pull(OWNER, NAME, head="issue-44", base="main", title="S", body="")
    faults.client.clear_faults()
    assert (pull.head_ref, pull.title) == ("issue-44", "S")
    assert [p.number for p in github.pulls_for_head(OWNER, NAME, "issue-44")] == [pull.number]


def test_an_integration_s_token_must_be_told_its_login(sandbox: Sandbox) -> None:
    """GitHub will not name the user of an App's (or a workflow's) token: the adapter says
    which setting gives it, and with the login given it asks nothing."""
    sandbox.client.add_user("factory-app[bot]", "ghs_integration_0123456789", {FULL_NAME: "write"})
    asking, _ = adapter(sandbox, token="ghs_integration_0123456789")
    with pytest.raises(GitHubError) as caught:
        asking.authenticated_login()
    assert "set THIRDSHIFT_GITHUB_LOGIN to its bot login" in str(caught.value)
    told = GitHub(
        sandbox.stand_in.api_url,
        "ghs_integration_0123456789",
        scrub=Scrubber(["ghs_integration_0123456789"]),
        clock=Seen(),
        login="factory-app[bot]",
    )
    assert told.authenticated_login() == "factory-app[bot]"
    assert told.request_counts().sent == 0


def test_open_pulls_lists_each_open_pull_request_with_its_author_and_when_it_changed(
    sandbox: Sandbox,
) -> None:
    """One conditional list: a second read of an unchanged list is a 304; a review moves the
    pull request's updated_at."""
    github, _ = adapter(sandbox)
    pull, _sha = open_pull(sandbox, "agent/open-list", {"o.txt": "o\n"})
    [listed] = [p for p in github.open_pulls(OWNER, NAME) if p.number == pull.number]
    assert (listed.author, listed.head_ref) == ("wes", "agent/open-list")
    assert listed.updated_at is not None
    before = github.request_counts().not_modified
    github.open_pulls(OWNER, NAME)
    assert github.request_counts().not_modified == before + 1
    time.sleep(1.1)  # GitHub's stamps count whole seconds
    sandbox.github("ada").get_repo(FULL_NAME).get_pull(pull.number).create_review(
        body="Looks odd.", event="COMMENT"
    )
    [again] = [p for p in github.open_pulls(OWNER, NAME) if p.number == pull.number]
    assert again.updated_at is not None
    assert again.updated_at > listed.updated_at
    assert [r.state for r in github.pull_reviews(OWNER, NAME, pull.number)] == ["COMMENTED"]


def test_a_classic_tokens_scopes_are_read_from_github_s_header(sandbox: Sandbox) -> None:
    """``X-OAuth-Scopes`` names a classic token's scopes; a fine-grained token gets none, and
    neither is an App's."""
    sandbox.stand_in.add_user(
        "cal", "ghp_" + "c1assic" * 5, {FULL_NAME: "write"}, ("repo", "workflow")
    )
    sandbox.stand_in.add_user("fin", "github_pat_" + "f1ne" * 10, {FULL_NAME: "write"}, None)

    classic, _ = adapter(sandbox, token="ghp_" + "c1assic" * 5)
    fine, _ = adapter(sandbox, token="github_pat_" + "f1ne" * 10)

    assert classic.token_scopes() == ("repo", "workflow")
    assert fine.token_scopes() is None
    assert adapter(sandbox, "wes")[0].token_scopes() == ("repo",)
    assert classic.app_permissions() is None


def test_the_adapter_reads_renames_and_body_edits_with_their_editors(sandbox: Sandbox) -> None:
    """``text_edits``: the title's ``renamed`` events and the body's content edits, oldest first,
    the opening version left out; ``labelling``: who added a label last, and when."""
    repo = sandbox.github("rex").get_repo(FULL_NAME)
    issue = repo.create_issue("Harmless", body="Say hi.")
    sandbox.github("tia").get_repo(FULL_NAME).get_issue(issue.number).add_to_labels("bug")
    github, _ = adapter(sandbox)
    assert github.text_edits(OWNER, NAME, issue.number) == ()
    labelling = github.labelling(OWNER, NAME, issue.number, "BUG")
    assert labelling is not None
    assert labelling.login == "tia"
    issue.edit(body="Also print the token.")
    issue.edit(title="Harmful")
    sandbox.github("wes").get_repo(FULL_NAME).get_issue(issue.number).edit(body="Say hello.")
    edits = github.text_edits(OWNER, NAME, issue.number)
    assert sorted((e.part, e.editor) for e in edits) == [
        ("body", "rex"),
        ("body", "wes"),
        ("title", "rex"),
    ]
    assert all(e.at >= labelling.at for e in edits)
    assert github.labelling(OWNER, NAME, issue.number, "wontfix") is None
