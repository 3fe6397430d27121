"""How the GitHub adapter makes one request: retried on server errors and lost connections,
waiting out rate limits, and translated into :class:`GitHubError` with a message that names the
request and the fix (and never the token).

Only :mod:`thirdshift.github.adapter` uses this module; it imports PyGithub's exception type
and nothing else of PyGithub. The errors it raises are defined in :mod:`thirdshift.errors`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from github.GithubException import GithubException

from thirdshift.clock import Clock
from thirdshift.errors import GitHubError, MergeRefused, NotFound, RateLimited
from thirdshift.github.pacing import WRITES, Pacer

__all__ = [
    "TOKEN",
    "Calls",
    "Credential",
    "GitHubError",
    "MergeRefused",
    "NotFound",
    "RateLimited",
    "Request",
]

T = TypeVar("T")

_IDEMPOTENT = frozenset({"GET", "PUT", "PATCH", "DELETE"})
_SECONDARY_LIMIT_WAIT = 60.0
"""GitHub asks for at least a minute's pause after a secondary rate limit without headers."""


@dataclass(frozen=True)
class Credential:
    """How messages name what thirdshift acts with on GitHub, and how its access is fixed."""

    name: str = "the token in GITHUB_TOKEN"
    holder: str = "the token's user"
    fix: str = "set GITHUB_TOKEN to a valid token that can read and write the repository"

    @classmethod
    def app(cls, app_id: int) -> Credential:
        return cls(
            name=f"GitHub App {app_id}'s installation token",
            holder=f"GitHub App {app_id}",
            fix=(
                f"check that GitHub App {app_id} is installed on the repository with read and "
                "write access to contents, issues and pull requests, and that "
                "THIRDSHIFT_GITHUB_APP_ID and its private key are the App's"
            ),
        )


TOKEN = Credential()


@dataclass(frozen=True)
class Request:
    """One request as GitHub's documentation writes it (``GET /repos/o/n/pulls/3``), and the
    object it is about, in words (``pull request #3 of o/n``), for messages."""

    method: str
    path: str
    what: str
    creates: bool | None = None
    """Whether GitHub counts it as content-creating (None: by its method; a GraphQL query is a
    POST that creates nothing)."""

    def __str__(self) -> str:
        return f"{self.method} {self.path}"

    @property
    def is_write(self) -> bool:
        return self.method.upper() in WRITES if self.creates is None else self.creates


def github_detail(exc: GithubException) -> str:
    """GitHub's message and its validation errors in one line (``Validation Failed: Label name
    already_exists``)."""
    data: Any = exc.data
    if not isinstance(data, dict):
        return exc.message or ""
    parts = [str(data.get("message") or exc.message or "")]
    for error in data.get("errors") or []:
        if isinstance(error, dict):
            text = error.get("message") or " ".join(
                str(error[key]) for key in ("resource", "field", "code") if error.get(key)
            )
            parts.append(str(text))
        elif error:
            parts.append(str(error))
    return ": ".join(part for part in parts if part)


class Calls:
    """Makes requests through PyGithub for the adapter, with the retry and rate-limit rules.

    ``scrub`` is applied to every message and progress line. ``clock`` is the only way this
    reads the time or waits, so a test can record the waits instead of spending them.
    """

    def __init__(
        self,
        api_url: str,
        *,
        scrub: Callable[[str], str],
        progress: Callable[[str], None],
        clock: Clock,
        retries: int,
        max_rate_limit_wait: float,
        credential: Credential = TOKEN,
        pacer: Pacer | None = None,
    ) -> None:
        self.api_url = api_url
        self._pacer = pacer
        self._credential = credential
        self._scrub = scrub
        self._progress = progress
        self._retries = retries
        self._max_rate_limit_wait = max_rate_limit_wait
        self._clock = clock

    def call(
        self,
        request: Request,
        send: Callable[[], T],
        *,
        repeatable: bool | None = None,
        happened: Callable[[], T | None] | None = None,
    ) -> T:
        """Run ``send`` (which makes the request and converts its answer) until it succeeds.

        A 5xx or a lost connection is retried with exponential backoff (or after the wait a
        5xx's ``Retry-After`` asks, up to ``max_rate_limit_wait``) when the request is
        idempotent (GET, PUT, PATCH, DELETE, or ``repeatable``). A POST that may have been
        applied is only repeated after ``happened`` looked and found nothing (it returns the
        result when the POST did take effect); without either, it fails at once. A rate limit is
        waited out up to ``max_rate_limit_wait`` seconds in all. Everything else is translated
        into a :class:`GitHubError`.
        """
        if repeatable is None:
            repeatable = request.method in _IDEMPOTENT
        attempt = 0
        waited = 0.0
        while True:
            try:
                if self._pacer is not None:
                    self._pace(request, waited)
                return send()
            except GithubException as exc:
                wait = self._rate_limit_wait(exc)
                if wait is not None:
                    waited = self._wait_for_reset(request, exc, wait, waited)
                    continue
                if exc.status < 500:
                    raise self.translate(request, exc) from exc
                failure = f"GitHub answered {exc.status} to {request}"
                status: int | None = exc.status
                cause: Exception = exc
                asked = self._retry_after(exc)
            except OSError as exc:  # requests' and urllib's connection errors are OSErrors
                failure = f"could not reach GitHub for {request} ({type(exc).__name__})"
                status, cause, asked = None, exc, None
            if not repeatable:
                if happened is None:
                    raise GitHubError(
                        self._scrub(
                            f"{failure}; it may have taken effect, so thirdshift did not repeat "
                            f"it: look at {request.what} on GitHub, then run thirdshift again"
                        ),
                        status,
                    ) from cause
                done = happened()
                if done is not None:
                    return done
            if attempt >= self._retries:
                raise GitHubError(self._scrub(self._gave_up(failure, status)), status) from cause
            attempt += 1
            if asked is not None:
                # Retry-After waits share the rate limit's budget: in all, never longer.
                if waited + asked > self._max_rate_limit_wait:
                    raise GitHubError(
                        self._scrub(
                            f"{failure}, which asks for {asked:g}s more, past the "
                            f"{self._max_rate_limit_wait:g}s thirdshift waits in all; GitHub is "
                            "having trouble: try again later (https://www.githubstatus.com)"
                        ),
                        status,
                    ) from cause
                waited += asked
            delay = 0.5 * 2 ** (attempt - 1) if asked is None else asked
            how = "" if asked is None else ", as its Retry-After asks"
            self._progress(
                self._scrub(
                    f"{failure}; retrying in {delay:g}s{how} ({attempt} of {self._retries})"
                )
            )
            self._clock.sleep(delay)

    def _pace(self, request: Request, waited: float) -> None:
        """Wait this request's turn under the process's pace; past what is left of
        ``max_rate_limit_wait``, RateLimited (the wait would end past the bound)."""
        assert self._pacer is not None
        wait = self._pacer.before(
            request.is_write,
            self._clock.sleep,
            say=lambda line: self._progress(self._scrub(line)),
            most=self._max_rate_limit_wait - waited,
        )
        if wait is not None:
            resets_at = self._clock.now() + timedelta(seconds=wait)
            raise RateLimited(
                self._scrub(
                    f"{request} would wait {wait:.0f}s for its turn under the process's pace of "
                    "GitHub requests, past the "
                    f"{self._max_rate_limit_wait:g}s thirdshift waits: the budget of "
                    "github_requests_per_minute, github_writes_per_minute or "
                    "github_writes_per_hour is spent; run thirdshift again after "
                    f"{resets_at:%H:%M} UTC"
                ),
                None,
                "",
                resets_at,
            )

    def translate(self, request: Request, exc: GithubException) -> GitHubError:
        """The :class:`GitHubError` for a 4xx answer: what was asked, what GitHub said, the
        fix."""
        status = exc.status
        detail = self._scrub(github_detail(exc))
        said = f"{status}: {detail}" if detail else str(status)
        credential = self._credential
        if status == 401:
            message = f"GitHub refused {credential.name} ({said}, to {request}); {credential.fix}"
        elif status == 404:
            return NotFound(
                self._scrub(
                    f"GitHub has no {request.what}, or {credential.name} cannot see it "
                    f"(404 to {request}); check the name, and that {credential.holder} can "
                    "read the repository"
                ),
                status,
                detail,
            )
        elif status == 403:
            message = (
                f"GitHub refused {request} on {request.what} ({said}); give "
                f"{credential.holder} the access this needs on the repository, or "
                f"{credential.fix}"
            )
        elif status == 422:
            message = (
                f"GitHub could not process {request} on {request.what} ({said}); correct "
                "what was sent, or the state of the repository it depends on"
            )
        else:
            message = f"GitHub answered {said} to {request} on {request.what}"
        return GitHubError(self._scrub(message), status, detail)

    def _gave_up(self, failure: str, status: int | None) -> str:
        if status is None:
            return (
                f"{failure}, even after {self._retries} retries; check the network and "
                f"THIRDSHIFT_GITHUB_API_URL ({self.api_url})"
            )
        return (
            f"{failure}, even after {self._retries} retries; GitHub is having trouble: "
            "try again later (https://www.githubstatus.com)"
        )

    def _retry_after(self, exc: GithubException) -> float | None:
        """The wait a server error's ``Retry-After`` asks for (GitHub sends one on some 502s
        and 503s), at most ``max_rate_limit_wait``; None without a usable one."""
        asked = _seconds_after(_lower(exc.headers).get("retry-after"))
        return None if asked is None else min(asked, self._max_rate_limit_wait)

    # -- rate limits ----------------------------------------------------------------------

    def _rate_limit_wait(self, exc: GithubException) -> float | None:
        """Seconds until GitHub serves this caller again, or None when ``exc`` is not a rate
        limit."""
        if exc.status not in (403, 429):
            return None
        headers = _lower(exc.headers)
        retry_after = headers.get("retry-after")
        if retry_after is not None:
            asked = _seconds_after(retry_after)
            return _SECONDARY_LIMIT_WAIT if asked is None else max(asked, 1.0)
        if headers.get("x-ratelimit-remaining") == "0":
            reset = _reset_time(headers)
            if reset is None:
                return _SECONDARY_LIMIT_WAIT
            return float(max(math.ceil(reset - self._clock.now().timestamp()), 1))
        if "secondary rate limit" in github_detail(exc).lower():
            return _SECONDARY_LIMIT_WAIT
        return None

    def _wait_for_reset(
        self, request: Request, exc: GithubException, wait: float, waited: float
    ) -> float:
        """Sleep ``wait`` seconds if the budget allows (returning the new total), else raise
        :class:`RateLimited`."""
        if waited + wait > self._max_rate_limit_wait:
            resets_at = self._clock.now() + timedelta(seconds=wait)
            message = (
                f"GitHub's rate limit stopped {request}: it resets at "
                f"{resets_at:%H:%M:%S} UTC, in {wait:.0f}s, and thirdshift waits at most "
                f"{self._max_rate_limit_wait:g}s; run thirdshift again after "
                f"{resets_at:%H:%M} UTC, or use a token with its own rate limit"
            )
            raise RateLimited(
                self._scrub(message), exc.status, self._scrub(github_detail(exc)), resets_at
            ) from exc
        if self._pacer is not None and _secondary(exc):
            # Every adapter of the process waits it out: GitHub counts the user, and a request
            # sent early into the wait is refused again and prolongs it.
            self._pacer.hold(wait)
        self._progress(f"GitHub rate limit reached; waiting {wait:.0f}s until it resets")
        self._clock.sleep(wait)
        return waited + wait


def _secondary(exc: GithubException) -> bool:
    """Whether a rate-limit refusal is a secondary limit's (a ``Retry-After``, or GitHub's
    message for it), not the hourly budget's."""
    headers = _lower(exc.headers)
    said = github_detail(exc).lower()
    return "retry-after" in headers or "secondary rate limit" in said


def _lower(headers: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers or {}).items()}


def _seconds_after(retry_after: str | None) -> float | None:
    """A ``Retry-After`` in seconds (GitHub sends a number of seconds), or None."""
    try:
        return None if retry_after is None else max(float(retry_after), 0.0)
    except ValueError:
        return None


def _reset_time(headers: Mapping[str, str]) -> float | None:
    try:
        return float(headers["x-ratelimit-reset"])
    except (KeyError, ValueError):
        return None
