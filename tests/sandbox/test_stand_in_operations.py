"""A tour of every operation the stand-in serves, driven through PyGithub; each response is
validated against GitHub's OpenAPI description by the ``sandbox`` fixture."""

from __future__ import annotations

import urllib.request

import pytest
from github import Consts

from tests.support.openapi import OpenAPIDescription
from tests.support.stand_in_scenario import FULL_NAME, TOKENS, Sandbox, out_of_contract
from thirdshift.sandbox.github.server import API_PREFIX


def test_pygithub_drives_every_operation_of_the_stand_in(
    sandbox: Sandbox, description: OpenAPIDescription
) -> None:
    """Every operation thirdshift relies on answers PyGithub as GitHub would; the tour alone
    covers at least 25 distinct operations of GitHub's description (the fixture validates
    every answer)."""
    gh = sandbox.github("ada")
    assert gh.get_user().login == "ada"
    repo = gh.get_repo(FULL_NAME)
    assert repo.default_branch == "main"
    assert repo.clone_url == f"{sandbox.stand_in.web_url}/{FULL_NAME}.git"

    label = repo.create_label("ready-for-agent", "0e8a16", "Hand this to an agent")
    assert repo.get_label("ready-for-agent").id == label.id
    assert "bug" in {lb.name for lb in repo.get_labels()}

    issue = repo.create_issue("Add a greeting", body="Say hello", labels=["bug"])
    other = repo.create_issue("Write docs")
    issue.add_to_labels("ready-for-agent")
    assert {lb.name for lb in issue.get_labels()} == {"bug", "ready-for-agent"}
    issue.remove_from_labels("bug")
    issue.set_labels("ready-for-agent", "enhancement")
    issue.edit(title="Add a friendly greeting", body="Say hello nicely")
    assert repo.get_issue(issue.number).title == "Add a friendly greeting"
    assert [i.number for i in repo.get_issues(labels=["ready-for-agent"])] == [issue.number]

    comment = issue.create_comment("On it")
    comment.edit("On it, with a marker <!-- thirdshift -->")
    assert [c.body for c in issue.get_comments()] == ["On it, with a marker <!-- thirdshift -->"]
    assert issue.get_comment(comment.id).body.endswith("-->")

    labeled = [e for e in issue.get_events() if e.event == "labeled"]
    assert {(e.label.name, e.actor.login) for e in labeled} >= {("ready-for-agent", "ada")}
    assert any(t.event == "labeled" for t in issue.get_timeline())

    assert repo.get_collaborator_permission("tia") == "read"
    assert repo.get_collaborator_role_name("tia") == "triage"

    issue.add_sub_issue(other)
    assert [s.number for s in issue.get_sub_issues()] == [other.number]
    _, parent = gh.requester.requestJsonAndCheck("GET", f"{other.url}/parent")
    assert parent["number"] == issue.number
    issue.remove_sub_issue(other)
    gh.requester.requestJsonAndCheck(
        "POST", f"{issue.url}/dependencies/blocked_by", input={"issue_id": other.id}
    )
    assert [b.number for b in issue.get_blocked_by()] == [other.number]
    assert [b.number for b in other.get_blocking()] == [issue.number]
    gh.requester.requestJsonAndCheck("DELETE", f"{issue.url}/dependencies/blocked_by/{other.id}")

    other.edit(state="closed")
    assert repo.get_issue(other.number).state == "closed"

    sha = sandbox.push("agent/greeting", {"app.py": "print('hello, friend')\n"})
    pull = repo.create_pull(
        title="Greet", body="Fixes #1", head="agent/greeting", base="main", draft=True
    )
    assert pull.draft
    pull.mark_ready_for_review()
    assert not repo.get_pull(pull.number).draft
    pull.convert_to_draft()
    assert repo.get_pull(pull.number).draft
    pull.mark_ready_for_review()
    pull.edit(title="Greet a friend", body="Fixes #1, nicely")
    assert [p.number for p in repo.get_pulls(head="acme:agent/greeting", base="main")] == [
        pull.number
    ]
    runs = sandbox.client.wait_for_checks("acme", "widgets", sha, timeout=60)
    assert {r.conclusion for r in runs} == {"success"}
    commit = repo.get_commit(sha)
    assert {c.name for c in commit.get_check_runs()} == {"lint", "test"}
    assert commit.get_combined_status().total_count == 0
    run = next(iter(repo.get_workflow_runs(head_sha=sha)))
    assert repo.get_workflow_run(run.id).conclusion == "success"
    job = next(iter(run.jobs()))
    location = job.logs_url()
    with urllib.request.urlopen(location, timeout=10) as response:
        assert response.status == 200
    status = pull.merge(merge_method="merge", sha=sha)
    assert status.merged
    assert repo.get_pull(pull.number).merged
    assert repo.get_issue(issue.number).state == "closed"
    repo.get_git_ref("heads/agent/greeting").delete()
    assert gh.get_rate_limit().resources.core.limit == 5000
    assert sandbox.stand_in.api_url.endswith("/api/v3")
    assert Consts is not None
    operations = {
        description.match(exchange.method, exchange.path.removeprefix(API_PREFIX)).operation_id
        for exchange in sandbox.exchanges
        if exchange.path.startswith(API_PREFIX) and not out_of_contract(exchange)
    }
    assert len(operations) >= 25, sorted(operations)


def test_what_a_workflow_s_own_token_pushes_or_merges_starts_no_ci(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As on GitHub, events caused by a workflow's GITHUB_TOKEN (github-actions[bot]) start no
    workflow: its push gets no checks, nor does its merge on the base; a person's push does."""
    bot, token = "github-actions[bot]", "ghs_workflow_0123456789abcdef"
    sandbox.client.add_user(bot, token, {FULL_NAME: "write"})
    monkeypatch.setitem(TOKENS, bot, token)
    by_bot = sandbox.push("by-bot", {"bot.txt": "bot\n"}, login=bot)
    by_wes = sandbox.push("by-wes", {"wes.txt": "wes\n"})
    assert sandbox.client.wait_for_checks("acme", "widgets", by_wes, timeout=60)
    repo = sandbox.github("ada").get_repo(FULL_NAME)
    assert repo.get_commit(by_bot).get_check_runs().totalCount == 0
    pull = (
        sandbox.github(bot, token=token)
        .get_repo(FULL_NAME)
        .create_pull(title="Bot", body="", head="by-bot", base="main")
    )
    merged = pull.merge(merge_method="merge")
    assert merged.merged
    assert sandbox.client.wait_for_checks("acme", "widgets", by_wes, timeout=60)
    assert repo.get_commit(merged.sha).get_check_runs().totalCount == 0
