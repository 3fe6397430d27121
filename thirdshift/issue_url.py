"""Issue URLs: the one way a user names the work."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from thirdshift.errors import UsageError
from thirdshift.scrub import Scrubber

_PATH = re.compile(r"^/([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/issues/([1-9][0-9]*)/?$")


@dataclass(frozen=True)
class IssueRef:
    """An issue, named by its URL: ``https://<host>/<owner>/<repo>/issues/<n>``."""

    host: str
    owner: str
    repo: str
    number: int

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    def __str__(self) -> str:
        return f"{self.full_name}#{self.number}"


@dataclass(frozen=True)
class RepoRef:
    """A repository on a GitHub host: what a Run that works on no issue (an Architect run) is
    addressed by."""

    host: str
    owner: str
    repo: str

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.repo}"

    def __str__(self) -> str:
        return self.full_name


RunRef = IssueRef | RepoRef
"""What a Run works on, as GitHub addresses it: an issue, or (an Architect run) a repository."""


def parse_issue_url(url: str) -> IssueRef:
    """Parse ``url`` or raise UsageError (exit 2) saying what an Issue URL looks like."""
    parts = urlsplit(url.strip())
    match = _PATH.match(parts.path)
    if parts.scheme not in ("http", "https") or not parts.netloc or match is None:
        raise UsageError(
            f"'{Scrubber()(url)}' is not a GitHub Issue URL; give one like "
            "https://github.com/<owner>/<repo>/issues/<number>"
        )
    owner, repo, number = match.groups()
    if parts.username or parts.password:
        raise UsageError("an Issue URL must not carry credentials; give the plain issue address")
    return IssueRef(host=parts.netloc.lower(), owner=owner, repo=repo, number=int(number))


def web_host_of(api_url: str) -> str:
    """The web host an API root serves: api.github.com -> github.com; a GitHub Enterprise (or
    stand-in) root ``http://host/api/v3`` -> host."""
    parts = urlsplit(api_url)
    host = parts.netloc.lower()
    return "github.com" if host == "api.github.com" else host


def web_root_of(api_url: str) -> str:
    """Where the web pages of the GitHub an API root serves start: ``https://github.com`` for
    api.github.com; ``http://host`` for a stand-in's ``http://host/api/v3``."""
    scheme = urlsplit(api_url).scheme or "https"
    return f"{scheme}://{web_host_of(api_url)}"


def check_same_host(issue: IssueRef, api_url: str) -> None:
    """The issue must live on the GitHub thirdshift talks to."""
    expected = web_host_of(api_url)
    if issue.host != expected:
        raise UsageError(
            f"the Issue URL is on {issue.host}, but THIRDSHIFT_GITHUB_API_URL ({api_url}) "
            f"serves {expected}; point THIRDSHIFT_GITHUB_API_URL at {issue.host}'s API"
        )
