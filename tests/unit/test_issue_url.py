"""Issue URLs: parsed strictly, refused with a usage error that shows the right shape."""

from __future__ import annotations

import pytest

from thirdshift.errors import UsageError
from thirdshift.issue_url import check_same_host, parse_issue_url, web_root_of


def test_a_github_issue_url_is_parsed() -> None:
    """Host, owner, repository and number come out of the URL."""
    issue = parse_issue_url("https://github.com/acme/widgets/issues/42")
    assert (issue.host, issue.owner, issue.repo, issue.number) == (
        "github.com",
        "acme",
        "widgets",
        42,
    )
    assert str(issue) == "acme/widgets#42"


@pytest.mark.parametrize(
    "url",
    [
        "acme/widgets#42",
        "https://github.com/acme/widgets/pull/42",
        "https://github.com/acme/widgets/issues/",
        "https://github.com/acme/widgets/issues/0",
        "https://github.com/acme/issues/42",
        "ftp://github.com/acme/widgets/issues/42",
        "",
    ],
)
def test_anything_else_is_a_usage_error(url: str) -> None:
    """A malformed Issue URL exits 2 with an example of a good one."""
    with pytest.raises(UsageError, match="not a GitHub Issue URL") as caught:
        parse_issue_url(url)
    assert caught.value.exit_code == 2


def test_credentials_in_the_url_are_refused() -> None:
    """A token pasted into the URL is never accepted (and never echoed)."""
    with pytest.raises(UsageError) as caught:
        parse_issue_url("https://user:ghp_secret@github.com/acme/widgets/issues/4")
    assert "ghp_secret" not in str(caught.value)


def test_the_issue_must_be_on_the_configured_github() -> None:
    """github.com issues need the public API; a stand-in's issues need the stand-in."""
    check_same_host(parse_issue_url("https://github.com/a/b/issues/1"), "https://api.github.com")
    check_same_host(
        parse_issue_url("http://127.0.0.1:8080/a/b/issues/1"), "http://127.0.0.1:8080/api/v3"
    )
    with pytest.raises(UsageError, match="THIRDSHIFT_GITHUB_API_URL"):
        check_same_host(
            parse_issue_url("https://github.com/a/b/issues/1"), "http://127.0.0.1:1/api/v3"
        )


def test_the_web_root_is_the_api_s_host_with_its_scheme() -> None:
    """The Run page links issues and pull requests there: github.com for the public API, the
    host itself (its scheme kept) for GitHub Enterprise or the stand-in."""
    assert web_root_of("https://api.github.com") == "https://github.com"
    assert web_root_of("https://ghe.example.com/api/v3") == "https://ghe.example.com"
    assert web_root_of("http://127.0.0.1:8123/api/v3") == "http://127.0.0.1:8123"
