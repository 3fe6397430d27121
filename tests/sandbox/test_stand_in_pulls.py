"""Pull requests, merges, checks and Actions on the GitHub stand-in, driven by PyGithub."""

from __future__ import annotations

import urllib.request

import pytest
from github import GithubException
from github.PullRequest import PullRequest

from tests.support.stand_in_scenario import FULL_NAME, Sandbox


def _pull(
    sandbox: Sandbox, branch: str, files: dict[str, str], body: str = ""
) -> tuple[PullRequest, str]:
    sha = sandbox.push(branch, files)
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    return repo.create_pull(title=f"Work on {branch}", body=body, head=branch, base="main"), sha


def test_merge_is_refused_when_the_head_moved(sandbox: Sandbox) -> None:
    """A merge naming a stale head sha gets 409, as GitHub refuses it."""
    sha = sandbox.push("agent/a", {"a.txt": "a\n"})
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    pull = repo.create_pull(title="A", body="", head="agent/a", base="main")
    sandbox.push("agent/a", {"a.txt": "a, again\n"})
    with pytest.raises(GithubException) as caught:
        pull.merge(merge_method="merge", sha=sha)
    assert caught.value.status == 409
    assert caught.value.data["message"] == (
        "Head branch was modified. Review and try the merge again."
    )
    assert not repo.get_pull(pull.number).merged


def test_scripted_merge_failures_refuse_the_next_merges(sandbox: Sandbox) -> None:
    """``fail_next_merges`` makes exactly that many merges fail with the given error."""
    sha = sandbox.push("agent/b", {"b.txt": "b\n"})
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    pull = repo.create_pull(title="B", body="", head="agent/b", base="main")
    sandbox.client.fail_next_merges(FULL_NAME, 1, 405, 'Required status check "test" is failing.')
    with pytest.raises(GithubException) as caught:
        pull.merge(merge_method="merge", sha=sha)
    assert (caught.value.status, caught.value.data["message"]) == (
        405,
        'Required status check "test" is failing.',
    )
    assert pull.merge(merge_method="merge", sha=sha).merged


def test_a_conflicting_pull_request_is_not_mergeable(sandbox: Sandbox) -> None:
    """A real trial merge finds the conflict: ``mergeable`` false, state dirty, merge 405."""
    sandbox.push("agent/left", {"README.md": "# left\n"})
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    left = repo.create_pull(title="Left", body="", head="agent/left", base="main")
    right_sha = sandbox.push("agent/right", {"README.md": "# right\n"})
    right = repo.create_pull(title="Right", body="", head="agent/right", base="main")
    assert repo.get_pull(right.number).mergeable is True
    left.merge(merge_method="merge")
    fresh = repo.get_pull(right.number)
    assert (fresh.mergeable, fresh.mergeable_state) == (False, "dirty")
    with pytest.raises(GithubException) as caught:
        fresh.merge(merge_method="merge", sha=right_sha)
    assert caught.value.status == 405


def test_drafts_toggle_through_pygithubs_graphql_mutations(sandbox: Sandbox) -> None:
    """``convert_to_draft``/``mark_ready_for_review`` flip ``draft``; drafts do not merge."""
    pull, sha = _pull(sandbox, "agent/c", {"c.txt": "c\n"})
    pull.convert_to_draft()
    assert pull.draft
    with pytest.raises(GithubException) as caught:
        pull.merge(merge_method="merge", sha=sha)
    assert caught.value.status == 405
    pull.mark_ready_for_review()
    assert not pull.draft
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    assert repo.get_pull(pull.number).draft is False


def test_merging_closes_the_issues_the_body_fixes(sandbox: Sandbox) -> None:
    """A merge into main closes ``Fixes #n`` issues and records who merged."""
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    issue = repo.create_issue("Greet people")
    pull, sha = _pull(sandbox, "agent/d", {"d.txt": "d\n"}, body=f"Fixes #{issue.number}")
    result = pull.merge(merge_method="merge", sha=sha)
    merged = repo.get_pull(pull.number)
    assert (merged.merged, merged.merged_by.login, merged.merge_commit_sha) == (
        True,
        "wes",
        result.sha,
    )
    assert merged.is_merged()
    assert repo.get_issue(issue.number).state == "closed"
    assert repo.get_commit("main").sha == result.sha


def test_only_a_merge_into_the_default_branch_closes_the_issues_the_body_fixes(
    sandbox: Sandbox,
) -> None:
    """As on GitHub, closing keywords count only when the base is the default branch: merged
    into ``spec-7``, ``Closes #n`` closes nothing; the Spec branch merged into main closes it."""
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    issue = repo.create_issue("A Ticket")
    sandbox.push("spec-7", {"s.txt": "s\n"})
    sha = sandbox.push("issue-9", {"t.txt": "t\n"})
    body = f"Closes #{issue.number}"
    ticket = repo.create_pull(title="Ticket", body=body, head="issue-9", base="spec-7")
    landed = ticket.merge(merge_method="merge", sha=sha)
    assert repo.get_pull(ticket.number).merged
    assert repo.get_commit("spec-7").sha == landed.sha
    assert repo.get_issue(issue.number).state == "open"
    spec = repo.create_pull(title="Spec", body=body, head="spec-7", base="main")
    spec.merge(merge_method="merge", sha=landed.sha)
    assert repo.get_issue(issue.number).state == "closed"


def test_pull_requests_list_by_head_base_and_state(sandbox: Sandbox) -> None:
    """``head`` (owner:branch), ``base`` and ``state`` filter the list."""
    pull, _ = _pull(sandbox, "agent/e", {"e.txt": "e\n"})
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    assert [p.number for p in repo.get_pulls(head="acme:agent/e")] == [pull.number]
    assert list(repo.get_pulls(head="acme:agent/none")) == []
    pull.edit(state="closed")
    assert list(repo.get_pulls(state="open", base="main")) == []
    assert [p.number for p in repo.get_pulls(state="closed")] == [pull.number]


def test_deleting_the_head_branch_closes_its_pull_request(sandbox: Sandbox) -> None:
    """``DELETE .../git/refs/heads/x`` removes the branch and closes PRs from it."""
    pull, _ = _pull(sandbox, "agent/f", {"f.txt": "f\n"})
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    repo.get_git_ref("heads/agent/f").delete()
    assert repo.get_pull(pull.number).state == "closed"
    with pytest.raises(GithubException) as caught:
        repo.get_git_ref("heads/agent/f")
    assert caught.value.status == 404


def test_failed_checks_show_in_check_runs_jobs_logs_and_rerun(sandbox: Sandbox) -> None:
    """A failing check concludes failure, its log is downloadable, and re-run answers 201."""
    sha = sandbox.push("agent/g", {"app.py": "broken = True\n"})
    sandbox.client.wait_for_checks("acme", "widgets", sha, timeout=60)
    repo = sandbox.github("wes").get_repo(FULL_NAME)
    pull = repo.create_pull(title="G", body="", head="agent/g", base="main")
    assert repo.get_pull(pull.number).mergeable_state == "unstable"
    checks = {c.name: c.conclusion for c in repo.get_commit(sha).get_check_runs()}
    assert checks == {"lint": "success", "test": "failure"}
    runs = list(repo.get_workflow_runs(branch="agent/g", status="completed"))  # type: ignore[arg-type]  # PyGithub takes a name too
    assert [r.head_sha for r in runs] == [sha]
    assert list(repo.get_workflow_runs(head_sha=sha, status="in_progress")) == []
    run = runs[0]
    failed = next(j for j in run.jobs() if j.conclusion == "failure")
    assert repo.get_workflow_run(run.id).conclusion == "failure"
    with urllib.request.urlopen(failed.logs_url(), timeout=10) as response:
        assert response.status == 200
    gh = sandbox.github("wes")
    _, job = gh.requester.requestJsonAndCheck("GET", f"{repo.url}/actions/jobs/{failed.id}")
    assert job["conclusion"] == "failure"
    assert run.rerun_failed_jobs() is True
    sandbox.client.wait_for_checks("acme", "widgets", sha, timeout=60)
    assert repo.get_workflow_run(run.id).run_attempt == 2


def test_checks_run_on_the_merge_commit(sandbox: Sandbox) -> None:
    """Merging pushes main, so the CI runs on the merge commit as on GitHub."""
    pull, sha = _pull(sandbox, "agent/h", {"h.txt": "h\n"})
    merge_sha = pull.merge(merge_method="merge", sha=sha).sha
    runs = sandbox.client.wait_for_checks("acme", "widgets", merge_sha, timeout=60)
    assert {r.name for r in runs} == {"lint", "test"}
