"""The contract validator holds recorded exchanges to GitHub's own OpenAPI description."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.openapi import ContractViolation, OpenAPIDescription, description_path

JSON = "application/json; charset=utf-8"
ISSUE_PATH = "/repos/octo/widgets/issues/3"


@pytest.fixture(scope="module")
def description() -> OpenAPIDescription:
    return OpenAPIDescription.load()


def _user() -> dict[str, Any]:
    base = "https://api.github.com/users/octocat"
    return {
        "login": "octocat",
        "id": 1,
        "node_id": "MDQ6VXNlcjE=",
        "avatar_url": "https://github.com/images/error/octocat_happy.gif",
        "gravatar_id": "",
        "url": base,
        "html_url": "https://github.com/octocat",
        "followers_url": f"{base}/followers",
        "following_url": f"{base}/following{{/other_user}}",
        "gists_url": f"{base}/gists{{/gist_id}}",
        "starred_url": f"{base}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{base}/subscriptions",
        "organizations_url": f"{base}/orgs",
        "repos_url": f"{base}/repos",
        "events_url": f"{base}/events{{/privacy}}",
        "received_events_url": f"{base}/received_events",
        "type": "User",
        "site_admin": False,
    }


def _issue() -> dict[str, Any]:
    """Every required property of components/schemas/issue, with the documented types."""
    url = "https://api.github.com/repos/octo/widgets/issues/3"
    return {
        "id": 1001,
        "node_id": "I_kwDOA",
        "url": url,
        "repository_url": "https://api.github.com/repos/octo/widgets",
        "labels_url": f"{url}/labels{{/name}}",
        "comments_url": f"{url}/comments",
        "events_url": f"{url}/events",
        "html_url": "https://github.com/octo/widgets/issues/3",
        "number": 3,
        "state": "open",
        "title": "Widgets wobble",
        "user": _user(),
        "labels": [{"id": 7, "name": "ready-for-agent", "color": "0e8a16", "default": False}],
        "assignee": None,
        "milestone": None,
        "locked": False,
        "comments": 0,
        "closed_at": None,
        "created_at": "2024-05-01T12:00:00Z",
        "updated_at": "2024-05-01T12:30:00Z",
    }


def _body(value: Any) -> bytes:
    return json.dumps(value).encode()


def _violation(
    description: OpenAPIDescription,
    value: Any,
    *,
    method: str = "GET",
    path: str = ISSUE_PATH,
    status: int = 200,
) -> ContractViolation:
    with pytest.raises(ContractViolation) as caught:
        description.validate_exchange(method, path, status, _body(value), JSON)
    return caught.value


def test_description_is_found_under_the_repository_root() -> None:
    """description_path() points at the npm-installed api.github.com.json in node_modules."""
    path = description_path()
    assert path.is_file()
    assert path.parts[-5:] == (
        "node_modules",
        "@octokit",
        "openapi",
        "generated",
        "api.github.com.json",
    )


def test_loading_is_cached_per_process(description: OpenAPIDescription) -> None:
    """Loading twice returns the same parsed description instead of re-reading 13 MB."""
    assert OpenAPIDescription.load() is description
    assert OpenAPIDescription.load(description_path()) is description


def test_a_well_formed_issue_validates_and_names_its_operation(
    description: OpenAPIDescription,
) -> None:
    """A response carrying every required issue property returns operationId issues/get."""
    assert description.validate_exchange("GET", ISSUE_PATH, 200, _body(_issue()), JSON) == (
        "issues/get"
    )


def test_a_value_of_the_wrong_type_is_caught_and_named(description: OpenAPIDescription) -> None:
    """`number` sent as a string is drift: the violation names $.number and the keyword."""
    issue = _issue()
    issue["number"] = "3"
    violation = _violation(description, issue)
    assert violation.json_path == "$.number"
    assert violation.keyword == "type"
    assert violation.operation_id == "issues/get"
    assert "$.number" in str(violation)
    assert "GET /repos/octo/widgets/issues/3 -> 200" in str(violation)


def test_a_missing_required_property_is_caught_and_named(description: OpenAPIDescription) -> None:
    """Dropping a required property fails validation, and the message names the property."""
    issue = _issue()
    del issue["title"]
    violation = _violation(description, issue)
    assert violation.keyword == "required"
    assert "'title' is a required property" in str(violation)


def test_drift_inside_a_referenced_schema_is_caught(description: OpenAPIDescription) -> None:
    """$refs resolve through components: a bad user.login inside the issue is reported."""
    issue = _issue()
    issue["user"]["login"] = 42
    violation = _violation(description, issue)
    assert violation.json_path == "$.user.login"


def test_null_is_accepted_where_the_description_says_nullable(
    description: OpenAPIDescription,
) -> None:
    """closed_at, body and user are nullable on an issue, so null passes for each."""
    issue = _issue()
    issue.update(closed_at=None, body=None, user=None)
    assert description.validate_exchange("GET", ISSUE_PATH, 200, _body(issue), JSON) == (
        "issues/get"
    )


def test_null_is_rejected_where_the_description_does_not_say_nullable(
    description: OpenAPIDescription,
) -> None:
    """created_at and title are not nullable, so null for either is a violation."""
    for name in ("created_at", "title"):
        issue = _issue()
        issue[name] = None
        assert _violation(description, issue).json_path == f"$.{name}"


def test_a_nullable_enum_accepts_null(description: OpenAPIDescription) -> None:
    """A running check run's conclusion is null: a nullable enum admits it, not other values."""
    path = "/repos/octo/widgets/check-runs/5"
    schema = description.document["components"]["schemas"]["check-run"]
    check_run: dict[str, Any] = {name: None for name in schema["required"]}
    check_run.update(
        id=5,
        head_sha="a" * 40,
        node_id="CR_1",
        external_id="",
        url="https://api.github.com/repos/octo/widgets/check-runs/5",
        html_url="https://github.com/octo/widgets/runs/5",
        details_url=None,
        status="in_progress",
        conclusion=None,
        started_at="2024-05-01T12:00:00Z",
        completed_at=None,
        output={
            "title": None,
            "summary": None,
            "text": None,
            "annotations_count": 0,
            "annotations_url": "https://api.github.com/repos/octo/widgets/check-runs/5/annotations",
        },
        name="ci",
        check_suite={"id": 9},
        app=None,
        pull_requests=[],
    )
    assert description.validate_exchange("GET", path, 200, _body(check_run), JSON) == ("checks/get")
    check_run["conclusion"] = "exploded"
    violation = _violation(description, check_run, path=path)
    assert violation.json_path == "$.conclusion"
    assert violation.keyword == "enum"


def test_a_format_violation_is_caught(description: OpenAPIDescription) -> None:
    """A created_at that is not an RFC 3339 date-time is reported under the format keyword."""
    issue = _issue()
    issue["created_at"] = "yesterday"
    violation = _violation(description, issue)
    assert (violation.json_path, violation.keyword) == ("$.created_at", "format")


def test_an_undocumented_request_is_not_defined(description: OpenAPIDescription) -> None:
    """GET /repos/o/r/nonsense matches no path template of the description."""
    with pytest.raises(ContractViolation, match="not defined by the description"):
        description.match("GET", "/repos/o/r/nonsense")
    with pytest.raises(ContractViolation, match="not defined by the description"):
        description.validate_exchange("GET", "/repos/o/r/nonsense", 200, b"{}", JSON)


def test_an_undocumented_method_on_a_known_path_is_not_defined(
    description: OpenAPIDescription,
) -> None:
    """PUT on /repos/o/r/pulls/comments is undefined, and the message lists what is."""
    with pytest.raises(ContractViolation, match=r"not defined.*defines only GET"):
        description.match("PUT", "/repos/o/r/pulls/comments")


def test_an_undocumented_status_is_rejected(description: OpenAPIDescription) -> None:
    """issues/get documents 200, 301, 304, 404 and 410; a 201 is a violation."""
    violation = _violation(description, _issue(), status=201)
    assert violation.status == 201
    assert "status 201 is not documented" in str(violation)


def test_a_documented_error_status_is_validated_against_its_schema(
    description: OpenAPIDescription,
) -> None:
    """A 404 follows components/responses/not_found: a basic-error body passes, a list fails."""
    not_found = {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
    assert (
        description.validate_exchange("GET", ISSUE_PATH, 404, _body(not_found), JSON)
        == "issues/get"
    )
    violation = _violation(description, ["Not Found"], status=404)
    assert violation.keyword == "type"


def test_a_204_with_a_body_is_rejected(description: OpenAPIDescription) -> None:
    """Deleting a ref answers 204 with no body; any body is a violation."""
    path = "/repos/octo/widgets/git/refs/heads/feature"
    assert description.validate_exchange("DELETE", path, 204, b"", None) == "git/delete-ref"
    with pytest.raises(ContractViolation, match="empty body"):
        description.validate_exchange("DELETE", path, 204, b"{}", JSON)


def test_a_304_with_a_body_is_rejected(description: OpenAPIDescription) -> None:
    """A conditional GET answered 304 must not carry the issue again."""
    assert description.validate_exchange("GET", ISSUE_PATH, 304, b"", None) == "issues/get"
    with pytest.raises(ContractViolation, match="empty body"):
        description.validate_exchange("GET", ISSUE_PATH, 304, _body(_issue()), JSON)


def test_a_body_that_is_not_json_is_rejected_where_json_is_documented(
    description: OpenAPIDescription,
) -> None:
    """An empty or HTML body for a documented JSON response is a violation."""
    with pytest.raises(ContractViolation, match="not JSON"):
        description.validate_exchange("GET", ISSUE_PATH, 200, b"", JSON)
    with pytest.raises(ContractViolation, match="content type 'text/html'"):
        description.validate_exchange("GET", ISSUE_PATH, 200, b"<html/>", "text/html")


def test_a_vendor_json_content_type_is_validated_as_json(
    description: OpenAPIDescription,
) -> None:
    """application/vnd.github.v3+json is JSON: it is held to the application/json schema."""
    vendor = "application/vnd.github.v3+json"
    assert description.validate_exchange("GET", ISSUE_PATH, 200, _body(_issue()), vendor) == (
        "issues/get"
    )
    broken = _issue()
    broken["locked"] = "no"
    with pytest.raises(ContractViolation, match=r"\$\.locked"):
        description.validate_exchange("GET", ISSUE_PATH, 200, _body(broken), vendor)


def test_a_documented_redirect_without_content_passes(description: OpenAPIDescription) -> None:
    """Job logs are a 302 with a Location header: no body is required to be JSON."""
    path = "/repos/octo/widgets/actions/jobs/77/logs"
    expected = "actions/download-job-logs-for-workflow-run"
    assert description.validate_exchange("GET", path, 302, b"", None) == expected
    assert description.validate_exchange("GET", path, 302, b"Found", "text/plain") == expected


def test_a_documented_non_json_media_type_passes(description: OpenAPIDescription) -> None:
    """GET /zen documents text/plain and a commit documents a diff: neither is parsed as JSON."""
    assert description.validate_exchange("GET", "/zen", 200, b"Keep it logically awesome.", None)
    diff = b"diff --git a/x b/x\n"
    path = "/repos/octo/widgets/commits/main"
    assert (
        description.validate_exchange("GET", path, 200, diff, "application/vnd.github.diff")
        == "repos/get-commit"
    )


def test_path_templates_whose_ref_contains_slashes_match(description: OpenAPIDescription) -> None:
    """{ref} and {path} may swallow several segments; literal suffixes still match after them."""
    cases = {
        ("PATCH", "/repos/o/r/git/refs/heads/feature/x"): (
            "/repos/{owner}/{repo}/git/refs/{ref}",
            {"owner": "o", "repo": "r", "ref": "heads/feature/x"},
        ),
        ("GET", "/repos/o/r/git/ref/heads/main"): (
            "/repos/{owner}/{repo}/git/ref/{ref}",
            {"owner": "o", "repo": "r", "ref": "heads/main"},
        ),
        ("GET", "/repos/o/r/commits/feature/x/status"): (
            "/repos/{owner}/{repo}/commits/{ref}/status",
            {"owner": "o", "repo": "r", "ref": "feature/x"},
        ),
        ("GET", "/repos/o/r/contents/src/pkg/mod.py"): (
            "/repos/{owner}/{repo}/contents/{path}",
            {"owner": "o", "repo": "r", "path": "src/pkg/mod.py"},
        ),
    }
    for (method, path), (template, params) in cases.items():
        operation = description.match(method, path)
        assert (operation.template, dict(operation.params)) == (template, params)


def test_literal_segments_win_over_parameters(description: OpenAPIDescription) -> None:
    """/pulls/comments is its own operation, not pull number "comments"; /pulls/5 is pulls/get."""
    assert (
        description.match("GET", "/repos/o/r/pulls/comments").operation_id
        == "pulls/list-review-comments-for-repo"
    )
    assert description.match("GET", "/repos/o/r/pulls/5").operation_id == "pulls/get"
    assert description.match("DELETE", "/repos/o/r/git/refs/heads/main").template == (
        "/repos/{owner}/{repo}/git/refs/{ref}"
    )
    assert (
        description.match("GET", "/repos/o/r/git/matching-refs/heads/x").operation_id
        == "git/list-matching-refs"
    )


def test_a_deprecated_alias_does_not_shadow_the_current_operation(
    description: OpenAPIDescription,
) -> None:
    """compare/main...topic/x routes to compare-commits-with-basehead, not the old alias."""
    operation = description.match("GET", "/repos/o/r/compare/main...topic/x")
    assert operation.operation_id == "repos/compare-commits-with-basehead"
    assert operation.params["basehead"] == "main...topic/x"


def test_overlapping_one_of_alternatives_accept_githubs_own_example(
    description: OpenAPIDescription,
) -> None:
    """GitHub's example for GET /user fits private-user and public-user; it must still pass."""
    document = description.document
    media = document["paths"]["/user"]["get"]["responses"]["200"]["content"]
    examples = media["application/json"]["examples"].values()
    assert examples
    for example in examples:
        if "$ref" in example:
            example = document["components"]["examples"][example["$ref"].rsplit("/", 1)[1]]
        value = copy.deepcopy(example["value"])
        value.pop("user_view_type", None)
        assert description.validate_exchange("GET", "/user", 200, _body(value), JSON) == (
            "users/get-authenticated"
        )


def test_a_discriminator_selects_the_alternative_when_present(
    description: OpenAPIDescription,
) -> None:
    """user_view_type "private" holds GET /user to private-user, so its fields become required."""
    user = _user()
    user["user_view_type"] = "public"
    user.update(
        name=None,
        company=None,
        blog=None,
        location=None,
        email=None,
        hireable=None,
        bio=None,
        public_repos=2,
        public_gists=0,
        followers=0,
        following=0,
        created_at="2020-01-01T00:00:00Z",
        updated_at="2020-01-01T00:00:00Z",
    )
    assert description.validate_exchange("GET", "/user", 200, _body(user), JSON)
    user["user_view_type"] = "private"
    with pytest.raises(ContractViolation, match="required property"):
        description.validate_exchange("GET", "/user", 200, _body(user), JSON)


def test_the_description_file_must_exist(tmp_path: Path) -> None:
    """Loading a missing description fails loudly instead of skipping the contract suite."""
    with pytest.raises(FileNotFoundError):
        OpenAPIDescription.load(tmp_path / "absent.json")
