"""HTTP behaviour of the GitHub stand-in: pagination, conditional requests, rate limits,
injected faults."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from github import GithubException, RateLimitExceededException

from tests.support.stand_in_scenario import FULL_NAME, TOKENS, Sandbox


def _get(
    sandbox: Sandbox, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(sandbox.stand_in.api_url + path)
    request.add_header("Authorization", f"token {TOKENS['ada']}")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_pygithub_pages_through_all_issues_by_link_headers(sandbox: Sandbox) -> None:
    """35 issues in pages of 10: PyGithub follows ``Link`` and sees every one."""
    repo = sandbox.github().get_repo(FULL_NAME)
    for n in range(35):
        repo.create_issue(f"Issue {n}")
    gh = sandbox.github()
    gh.per_page = 10
    issues = gh.get_repo(FULL_NAME).get_issues(state="open")
    assert sorted(i.title for i in issues) == sorted(f"Issue {n}" for n in range(35))
    assert issues.totalCount == 35


def test_link_headers_name_next_last_prev_and_first_like_github(sandbox: Sandbox) -> None:
    """A middle page links prev, next, last and first, keeping the other query parameters."""
    repo = sandbox.github().get_repo(FULL_NAME)
    for n in range(25):
        repo.create_issue(f"Issue {n}")
    status, headers, _ = _get(sandbox, f"/repos/{FULL_NAME}/issues?per_page=10&page=2")
    base = f"{sandbox.stand_in.api_url}/repos/{FULL_NAME}/issues?per_page=10"
    assert status == 200
    assert headers["Link"] == (
        f'<{base}&page=1>; rel="prev", <{base}&page=3>; rel="next", '
        f'<{base}&page=3>; rel="last", <{base}&page=1>; rel="first"'
    )


def test_a_matching_etag_answers_304_without_spending_rate_limit(sandbox: Sandbox) -> None:
    """``If-None-Match`` with the weak ETag gets an empty 304; Remaining does not move."""
    status, headers, _ = _get(sandbox, f"/repos/{FULL_NAME}")
    assert status == 200
    etag = headers["ETag"]
    assert etag.startswith('W/"')
    again, headers_304, body = _get(sandbox, f"/repos/{FULL_NAME}", {"If-None-Match": etag})
    assert (again, body) == (304, b"")
    assert headers_304["X-RateLimit-Remaining"] == headers["X-RateLimit-Remaining"]
    _, later, _ = _get(sandbox, f"/repos/{FULL_NAME}")
    assert int(later["X-RateLimit-Remaining"]) == int(headers["X-RateLimit-Remaining"]) - 1


def test_pygithub_conditional_refresh_sees_not_modified(sandbox: Sandbox) -> None:
    """PyGithub's ``update()`` sends the ETag back and learns nothing changed."""
    repo = sandbox.github().get_repo(FULL_NAME)
    assert repo.update() is False


def test_every_answer_carries_rate_limit_headers(sandbox: Sandbox) -> None:
    """Limit, Remaining, Reset, Used and Resource ride on every REST response, errors too."""
    for path in (f"/repos/{FULL_NAME}", "/repos/acme/nothing-here", "/rate_limit"):
        _, headers, _ = _get(sandbox, path)
        assert {
            "X-RateLimit-Limit",
            "X-RateLimit-Remaining",
            "X-RateLimit-Reset",
            "X-RateLimit-Used",
            "X-RateLimit-Resource",
        } <= set(headers)
    _, _, body = _get(sandbox, "/rate_limit")
    assert json.loads(body)["resources"]["core"]["limit"] == 5000


def test_injected_server_errors_are_seen_then_requests_succeed(sandbox: Sandbox) -> None:
    """Two injected 500s reach PyGithub (retries off); the third request is served."""
    gh = sandbox.github()
    sandbox.client.inject_faults(error_rate=1.0, statuses=(500,), count=2)
    for _ in range(2):
        with pytest.raises(GithubException) as caught:
            gh.get_repo(FULL_NAME)
        assert caught.value.status == 500
    assert gh.get_repo(FULL_NAME).name == "widgets"


def test_injected_rate_limit_refusal_carries_the_reset_time(sandbox: Sandbox) -> None:
    """A rate-limit 403 has Remaining 0 and a Reset PyGithub can wait for."""
    gh = sandbox.github()
    sandbox.client.inject_faults(rate_limit_403=True, count=1)
    with pytest.raises(RateLimitExceededException) as caught:
        gh.get_repo(FULL_NAME)
    headers = {k.lower(): v for k, v in (caught.value.headers or {}).items()}
    assert caught.value.status == 403
    assert headers["x-ratelimit-remaining"] == "0"
    assert int(headers["x-ratelimit-reset"]) > 0
    sandbox.client.clear_faults()
    assert gh.get_repo(FULL_NAME).name == "widgets"


def test_seeded_faults_fail_a_share_of_requests(sandbox: Sandbox) -> None:
    """An error rate with a seed fails some requests and serves the rest."""
    gh = sandbox.github()
    sandbox.client.inject_faults(error_rate=0.5, statuses=(500, 502), seed=7)
    statuses = []
    for _ in range(20):
        try:
            gh.get_repo(FULL_NAME)
            statuses.append(200)
        except GithubException as exc:
            statuses.append(exc.status)
    sandbox.client.clear_faults()
    assert 200 in statuses
    assert set(statuses) - {200} <= {500, 502}
    assert set(statuses) - {200}


def test_scenario_control_records_who_made_each_request(sandbox: Sandbox) -> None:
    """``/_sandbox/requests`` lists every REST request with the caller's login."""
    sandbox.github("tia").get_repo(FULL_NAME)
    assert {
        "method": "GET",
        "path": f"/api/v3/repos/{FULL_NAME}",
        "query": "",
        "status": 200,
        "login": "tia",
    } in sandbox.client.requests()


def _set_faults(sandbox: Sandbox, **payload: object) -> None:
    """Scenario control's ``POST /_sandbox/faults``, with fields the client has no words for."""
    request = urllib.request.Request(
        f"{sandbox.stand_in.web_url}/_sandbox/faults",
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201


def test_injected_server_errors_carry_the_retry_after_asked(sandbox: Sandbox) -> None:
    """``retry_after`` puts GitHub's ``Retry-After`` on the injected 503."""
    _set_faults(sandbox, error_rate=1.0, statuses=[503], retry_after=5, count=1)
    status, headers, _ = _get(sandbox, f"/repos/{FULL_NAME}")
    assert (status, headers.get("Retry-After")) == (503, "5")
    assert _get(sandbox, f"/repos/{FULL_NAME}")[0] == 200


def test_a_rate_limit_window_refuses_until_its_reset_then_serves(sandbox: Sandbox) -> None:
    """For the scripted window every request is GitHub's rate-limit 403, its reset naming the
    window's end, and the hourly budget is left alone; after the reset, requests are served."""
    used = json.loads(_get(sandbox, "/rate_limit")[2])["resources"]["core"]["used"]
    _set_faults(sandbox, rate_limited_for_seconds=1)
    status, headers, body = _get(sandbox, f"/repos/{FULL_NAME}")
    assert status == 403
    assert headers["X-RateLimit-Remaining"] == "0"
    assert "rate limit exceeded" in json.loads(body)["message"]
    reset = int(headers["X-RateLimit-Reset"])
    assert time.time() < reset <= time.time() + 2
    assert json.loads(_get(sandbox, "/rate_limit")[2])["resources"]["core"]["used"] == used
    time.sleep(max(reset - time.time(), 0) + 0.05)
    assert _get(sandbox, f"/repos/{FULL_NAME}")[0] == 200


def test_a_lost_answer_makes_the_write_and_answers_502(sandbox: Sandbox) -> None:
    """``lost_answers``: the write is applied, its answer is a 502; reads are untouched."""
    repo = sandbox.github().get_repo(FULL_NAME)
    _set_faults(sandbox, lost_answers=1.0, count=1)
    assert _get(sandbox, f"/repos/{FULL_NAME}/issues")[0] == 200
    with pytest.raises(GithubException) as caught:
        repo.create_issue("Made anyway")
    assert caught.value.status == 502
    assert [i.title for i in repo.get_issues()] == ["Made anyway"]
    assert repo.create_issue("Answered").title == "Answered"
