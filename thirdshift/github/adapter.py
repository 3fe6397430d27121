"""The GitHub adapter: the only module that imports PyGithub.

Every method makes its requests through :class:`~thirdshift.github.requests.Calls` (retries on
5xx and lost connections, rate limits waited out, errors translated into :class:`GitHubError`)
and converts GitHub's answer into the frozen records of :mod:`thirdshift.records` before
returning, so no PyGithub object, which fetches lazily when read, ever leaves this module.
PyGithub runs lazily here: an object is fetched only when a method reads it, so each method
makes exactly the requests it names.

The reads a daemon and a CI watch repeat (issues by label, who labelled, open blockers, an
issue, a pull request, check runs, commit statuses) are conditional: they send the ETag of the
last answer and a 304, which costs no rate-limit point, answers the record made from it (see
``conditional``). ``request_counts`` tells how many requests were sent and how many were 304s.

About 1,130 lines: one method per request a Run or the daemon needs, each with its retry rule,
which a reader compares side by side; the request machinery is in ``requests``, the
conditional reads in ``conditional`` and the conversions in ``convert``.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from github import Github
from github.CheckRun import CheckRun as GhCheckRun
from github.CommitStatus import CommitStatus as GhCommitStatus
from github.GithubObject import GithubObject, NotSet
from github.Issue import Issue
from github.IssueComment import IssueComment
from github.PullRequest import PullRequest
from github.Repository import Repository

from thirdshift.clock import Clock
from thirdshift.github.app import InstallationTokens
from thirdshift.github.conditional import (
    DEFAULT_SIZE,
    ConditionalReads,
    CountingToken,
    RequestCounter,
    RequestCounts,
    Validators,
    fixed,
)
from thirdshift.github.convert import (
    blocking_issues,
    check_run_record,
    comment_record,
    issue_record,
    issue_summary_record,
    log_tail,
    own_sub_issues,
    pull_record,
    review_comment_record,
    review_record,
    status_record,
)
from thirdshift.github.edits import (
    ISSUE_EDITS_QUERY,
    body_edits_of,
    labelling_of,
    renames_of,
    when,
)
from thirdshift.github.pacing import Pacer
from thirdshift.github.requests import (
    TOKEN,
    Calls,
    Credential,
    GitHubError,
    MergeRefused,
    NotFound,
    RateLimited,
    Request,
)
from thirdshift.records import (
    BlockingIssue,
    CheckRun,
    Comment,
    CommitStatus,
    HookDelivery,
    IssueInfo,
    IssueSummary,
    Labelling,
    ListedRepository,
    MergeResult,
    OwnerIssue,
    PullRequestInfo,
    RepoInfo,
    Review,
    ReviewComment,
    TextEdit,
    Webhook,
)
from thirdshift.scrub import Scrubber

__all__ = [
    "GitHub",
    "GitHubError",
    "MergeRefused",
    "NotFound",
    "RateLimited",
    "RequestCounts",
]

G = TypeVar("G", bound=GithubObject)

ROLES = ("admin", "maintain", "write", "triage", "read", "none")
_MERGE_REFUSALS = (405, 409, 422)
_LOG_DOWNLOAD_TIMEOUT = 60.0


def _q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


class GitHub:
    """GitHub's REST API (and the two GraphQL mutations PyGithub uses for drafts), as thirdshift
    needs it. Build it once at the composition root with the API root and the token.

    ``scrub`` is the composition root's one scrubber, applied to every message and progress line;
    ``progress`` receives a line for every retry and rate-limit wait; ``clock`` is how it waits
    (between retries: 0.5 s, 1 s, 2 s, ...; for a rate limit: until it resets, at most
    ``max_rate_limit_wait`` seconds per request). Every failure raises :class:`GitHubError` or
    one of its subclasses.

    One adapter serves one thread at a time: PyGithub's connection is not thread-safe (a
    request's method, URL and headers are kept on it until the answer is read), so each Run
    gets an adapter of its own and a daemon's polls run one after another. Its cache of ETags
    (``cache_size`` answers at most) and its request counts are locked all the same.
    """

    def __init__(
        self,
        api_url: str,
        token: str | Callable[[], str],
        *,
        scrub: Scrubber,
        clock: Clock,
        progress: Callable[[str], None] = lambda _: None,
        retries: int = 4,
        max_rate_limit_wait: float = 900.0,
        per_page: int = 100,
        cache_size: int = DEFAULT_SIZE,
        login: str | None = None,
        credential: Credential = TOKEN,
        pacer: Pacer | None = None,
    ) -> None:
        self._counter = RequestCounter()

        def sent() -> None:
            self._counter.sent()
            if pacer is not None:
                pacer.sent()

        self._gh = Github(
            base_url=api_url.rstrip("/"),
            auth=CountingToken(token if callable(token) else fixed(token), sent),
            per_page=per_page,
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=None,
            lazy=True,
        )
        self._reads = ConditionalReads(
            self._gh.requester, self._counter, Validators(cache_size), per_page
        )
        self._clock = clock
        self._calls = Calls(
            api_url,
            scrub=scrub,
            progress=progress,
            clock=clock,
            retries=retries,
            max_rate_limit_wait=max_rate_limit_wait,
            credential=credential,
            pacer=pacer,
        )
        self._login: str | None = login  # given: an integration's token cannot tell it
        self._token_source = token

    def close(self) -> None:
        """Close the adapter's connection to GitHub. A Run's adapter is closed as the Run ends:
        left to the garbage collector, each ended Run's connection stayed open for as long as
        a collection took to come, a descriptor each in a long daemon life."""
        self._gh.close()

    def request_counts(self) -> RequestCounts:
        """The requests this adapter has sent to GitHub's API so far (every page and retry),
        and how many GitHub answered 304 Not Modified."""
        return self._counter.counts()

    # -- the token and repositories -------------------------------------------------------

    def authenticated_login(self) -> str:
        """The login of the token's user (``GET /user``, asked once), unless it was given. A
        bad token raises :class:`GitHubError` naming ``GITHUB_TOKEN`` and the fix; so does an
        integration's token (a GitHub App's, a workflow's), which GitHub will not name."""
        if self._login is None:
            request = Request("GET", "/user", "the token's user")
            try:
                self._login = self._calls.call(request, lambda: str(self._gh.get_user().login))
            except GitHubError as error:
                if error.status == 403 and "integration" in str(error).lower():
                    raise GitHubError(
                        "the token is an integration's (a GitHub App's, or a workflow's "
                        "GITHUB_TOKEN), which GitHub will not name; set THIRDSHIFT_GITHUB_LOGIN "
                        "to its bot login (<app-slug>[bot], or github-actions[bot])",
                        403,
                    ) from error
                raise
        return self._login

    def token_scopes(self) -> tuple[str, ...] | None:
        """A classic token's OAuth scopes, as GitHub's ``X-OAuth-Scopes`` header names them
        (``GET /rate_limit``, which any token may ask and which costs nothing); None when
        GitHub sends no such header (a fine-grained token, an integration's)."""

        def send() -> tuple[str, ...] | None:
            headers, _ = self._gh.requester.requestJsonAndCheck("GET", "/rate_limit")
            said = {k.lower(): v for k, v in headers.items()}.get("x-oauth-scopes")
            if said is None:
                return None
            return tuple(scope.strip() for scope in str(said).split(",") if scope.strip())

        return self._calls.call(Request("GET", "/rate_limit", "the token's scopes"), send)

    def app_permissions(self) -> dict[str, str] | None:
        """What a GitHub App's installation token may do (``{"workflows": "write", ...}``,
        as GitHub granted it when it was minted); None for any other token."""
        source = self._token_source
        return source.permissions() if isinstance(source, InstallationTokens) else None

    def repo(self, owner: str, name: str) -> RepoInfo:
        """The repository, with its default branch."""

        def send() -> RepoInfo:
            repo = self._repo(owner, name).complete()
            return RepoInfo(
                owner=repo.owner.login,
                name=repo.name,
                default_branch=repo.default_branch,
                clone_url=repo.clone_url,
                html_url=repo.html_url,
            )

        path = f"/repos/{owner}/{name}"
        return self._calls.call(Request("GET", path, f"repository {owner}/{name}"), send)

    def readable_repositories(self) -> tuple[ListedRepository, ...]:
        """Every repository the token's user may read, of every owner (``GET /user/repos``),
        asked conditionally: watching owners costs nothing while none of their repositories
        changes. An installation token may not ask (GitHub answers 403)."""
        path = "/user/repos"

        def listed(item: Any) -> ListedRepository:
            permissions = item.get("permissions") or {}
            return ListedRepository(
                owner=str(item["owner"]["login"]),
                name=str(item["name"]),
                archived=bool(item.get("archived")),
                disabled=bool(item.get("disabled")),
                can_push=bool(permissions.get("push")),
            )

        def send() -> tuple[ListedRepository, ...]:
            query = {"affiliation": "owner,collaborator,organization_member", "sort": "full_name"}
            return self._reads.pages(
                path, query, lambda page: list(page), lambda found: tuple(map(listed, found))
            )

        what = "the repositories the token may read"
        return self._calls.call(Request("GET", path, what), send)

    def permission(self, owner: str, name: str, login: str) -> str:
        """``login``'s role on the repository: admin, maintain, write, triage, read or none
        (GitHub's ``role_name`` when it gives a known one, else its coarser ``permission``).
        Asking needs write access to the repository."""
        path = f"/repos/{owner}/{name}/collaborators/{_q(login)}/permission"

        def convert(data: Any) -> str:
            role = str(data.get("role_name") or "")
            return role if role in ROLES else str(data.get("permission") or "none")

        def send() -> str:
            # Asked for every labeller on every poll: conditional, so it costs nothing idle.
            return self._reads.one(path, convert)

        request = Request("GET", path, f"the permission of {login} on {owner}/{name}")
        return self._calls.call(request, send)

    # -- issues, labels, comments ---------------------------------------------------------

    def issue(self, owner: str, name: str, number: int) -> IssueInfo:
        """Issue ``number`` (a pull request answers too, with ``is_pull_request``)."""
        path = f"/repos/{owner}/{name}/issues/{number}"

        def send() -> IssueInfo:
            return self._reads.one(path, lambda data: issue_record(self._make(Issue, data)))

        return self._calls.call(Request("GET", path, f"issue #{number} of {owner}/{name}"), send)

    def issues_labelled(
        self, owner: str, name: str, label: str, state: str = "open"
    ) -> tuple[IssueSummary, ...]:
        """Issues (pull requests too, marked) carrying ``label`` in ``state`` (open, closed or
        all), lowest number first, all pages."""
        path = f"/repos/{owner}/{name}/issues"
        query = {"labels": label, "state": state, "sort": "created", "direction": "asc"}

        def convert(found: list[Any]) -> tuple[IssueSummary, ...]:
            summaries = (issue_summary_record(self._make(Issue, item)) for item in found)
            return tuple(sorted(summaries, key=lambda issue: issue.number))

        def send() -> tuple[IssueSummary, ...]:
            return self._reads.pages(path, query, lambda page: list(page), convert)

        request = Request(
            "GET",
            f"{path}?labels={label}&state={state}",
            f"the {state} issues labelled '{label}' in {owner}/{name}",
        )
        return self._calls.call(request, send)

    def owner_issues(
        self,
        owner: str,
        *,
        label: str | None,
        state: str,
        created: bool = False,
        since: datetime | None = None,
    ) -> tuple[OwnerIssue, ...]:
        """The issues and pull requests of every repository of ``owner`` the token's user can
        see, carrying ``label`` (None: any) in ``state``; ``created``: only those it opened;
        ``since``: only those changed since then.
        One conditional list for the whole owner: the organisation's (``GET /orgs/{owner}/
        issues``) or, for the token's own login, the user's (``GET /user/issues``, narrowed to
        the repositories it owns). A user other than the token's answers 404, and an
        installation token 403: their repositories are listed one by one instead."""
        own = owner.lower() == self.authenticated_login().lower()
        path = "/user/issues" if own else f"/orgs/{_q(owner)}/issues"
        query = {
            "filter": "created" if created else "all",
            "state": state,
            "sort": "created",
            "direction": "asc",
        }
        if label is not None:
            query["labels"] = label
        if since is not None:
            query["since"] = since.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        def listed(item: Any) -> OwnerIssue:
            repository = item.get("repository") or {}
            full_name = str(repository.get("full_name") or "")
            if not full_name:  # GitHub's shape says repository_url always; the object is extra
                full_name = "/".join(str(item["repository_url"]).rstrip("/").split("/")[-2:])
            return OwnerIssue(
                repository=full_name,
                issue=issue_summary_record(self._make(Issue, item)),
                author=str((item.get("user") or {}).get("login") or ""),
                draft=bool(item.get("draft")),
            )

        def convert(found: list[Any]) -> tuple[OwnerIssue, ...]:
            issues = (listed(item) for item in found)
            mine = [i for i in issues if i.repository.split("/", 1)[0].lower() == owner.lower()]
            return tuple(sorted(mine, key=lambda i: (i.repository.lower(), i.issue.number)))

        def send() -> tuple[OwnerIssue, ...]:
            return self._reads.pages(path, query, lambda page: list(page), convert, view=owner)

        shown = urllib.parse.urlencode(query)
        what = f"the {state} issues{f' labelled {label!r}' if label else ''} of {owner}"
        return self._calls.call(Request("GET", f"{path}?{shown}", what), send)

    def recent_issues(
        self, owner: str, name: str, state: str, limit: int
    ) -> tuple[IssueSummary, ...]:
        """Issues (never pull requests) in ``state`` (open or closed), most recently updated
        first, at most ``limit``. Pages are read only until ``limit`` issues are found; asked
        conditionally, and an answer the first page held is kept for the next ask."""
        path = f"/repos/{owner}/{name}/issues"
        query = {"state": state, "sort": "updated", "direction": "desc"}

        def issues(found: list[Any]) -> list[Any]:
            return [item for item in found if item.get("pull_request") is None]

        def convert(found: list[Any]) -> tuple[IssueSummary, ...]:
            return tuple(issue_summary_record(self._make(Issue, i)) for i in issues(found)[:limit])

        def send() -> tuple[IssueSummary, ...]:
            return self._reads.pages(
                path,
                query,
                lambda page: list(page),
                convert,
                view=str(limit),  # one answer makes a different record per limit
                enough=lambda found: len(issues(found)) >= limit,
            )

        request = Request(
            "GET",
            f"{path}?state={state}&sort=updated&direction=desc",
            f"the {state} issues of {owner}/{name} most recently updated",
        )
        return self._calls.call(request, send)

    def labelled_by(self, owner: str, name: str, number: int, label: str) -> str | None:
        """The login that added ``label`` to the issue most recently (the last ``labeled``
        event of that label name, in any case), or None: never labelled so, or by a deleted
        account."""
        labelling = self.labelling(owner, name, number, label)
        return labelling.login if labelling is not None else None

    def labelling(self, owner: str, name: str, number: int, label: str) -> Labelling | None:
        """Who added ``label`` to the issue most recently, and when (the last ``labeled``
        event of that label name, in any case), or None: never labelled so."""
        path = f"/repos/{owner}/{name}/issues/{number}/events"
        wanted = label.lower()

        def send() -> Labelling | None:
            # One events answer makes a different record per label asked about.
            return self._reads.pages(
                path, {}, lambda page: list(page), lambda e: labelling_of(e, wanted), view=wanted
            )

        what = f"the events of issue #{number} of {owner}/{name}"
        return self._calls.call(Request("GET", path, what), send)

    def text_edits(self, owner: str, name: str, number: int) -> tuple[TextEdit, ...]:
        """Every edit of the issue's title (its ``renamed`` events, asked conditionally) and
        body (GraphQL's ``userContentEdits``: REST shows no editor), oldest first."""
        path = f"/repos/{owner}/{name}/issues/{number}/events"

        def renames() -> tuple[TextEdit, ...]:
            return self._reads.pages(path, {}, lambda page: list(page), renames_of, view="renamed")

        what = f"the events of issue #{number} of {owner}/{name}"
        titles = self._calls.call(Request("GET", path, what), renames)
        variables = {"owner": owner, "name": name, "number": number}

        def bodies() -> tuple[TextEdit, ...]:
            _, data = self._gh.requester.graphql_query(ISSUE_EDITS_QUERY, variables)
            return body_edits_of(data)

        request = Request(
            "POST", "/graphql userContentEdits", f"the edits of issue #{number}", creates=False
        )
        found = self._calls.call(request, bodies, repeatable=True)  # a query changes nothing
        return tuple(sorted((*titles, *found), key=lambda edit: edit.at))

    def blockers(self, owner: str, name: str, number: int) -> tuple[BlockingIssue, ...]:
        """Every issue blocking this one, open or closed, this repository's first, ascending;
        one of another repository says which."""
        path = f"/repos/{owner}/{name}/issues/{number}/dependencies/blocked_by"

        def convert(found: list[Any]) -> tuple[BlockingIssue, ...]:
            return blocking_issues(found, owner, name)

        def send() -> tuple[BlockingIssue, ...]:
            return self._reads.pages(path, {}, lambda page: list(page), convert)

        what = f"the issues blocking issue #{number} of {owner}/{name}"
        return self._calls.call(Request("GET", path, what), send)

    def sub_issues(self, owner: str, name: str, number: int) -> tuple[int, ...]:
        """Numbers of the issue's sub-issues in this repository, in GitHub's order (all
        pages), asked conditionally. A sub-issue in another repository is left out: its number
        is that repository's (a Spec's Tickets are its own repository's issues)."""
        path = f"/repos/{owner}/{name}/issues/{number}/sub_issues"

        def convert(found: list[Any]) -> tuple[int, ...]:
            return own_sub_issues(found, owner, name)

        def send() -> tuple[int, ...]:
            return self._reads.pages(path, {}, lambda page: list(page), convert)

        what = f"the sub-issues of issue #{number} of {owner}/{name}"
        return self._calls.call(Request("GET", path, what), send)

    def issue_comments(self, owner: str, name: str, number: int) -> tuple[Comment, ...]:
        """Every comment on the issue, oldest first (all pages)."""

        def send() -> tuple[Comment, ...]:
            comments = self._repo(owner, name).get_issue(number).get_comments()
            return tuple(comment_record(c) for c in comments)

        path = f"/repos/{owner}/{name}/issues/{number}/comments"
        what = f"the comments of issue #{number} of {owner}/{name}"
        return self._calls.call(Request("GET", path, what), send)

    def ensure_label(self, owner: str, name: str, label: str, color: str, description: str) -> None:
        """Create the repository label unless it exists (read first; a race that makes GitHub
        answer ``already_exists`` is fine too)."""
        path = f"/repos/{owner}/{name}/labels"
        what = f"label '{label}' of {owner}/{name}"
        try:
            self._calls.call(
                Request("GET", f"{path}/{_q(label)}", what),
                lambda: self._repo(owner, name).get_label(label).complete(),
            )
            return
        except NotFound:
            pass
        try:
            self._calls.call(
                Request("POST", path, what),
                lambda: self._repo(owner, name).create_label(label, color, description).name,
                repeatable=True,  # a repeated creation is answered already_exists
            )
        except GitHubError as exc:
            if exc.status != 422 or "already_exists" not in exc.detail:
                raise

    def label_exists(self, owner: str, name: str, label: str) -> bool:
        """Whether the repository has the label ``label`` (GitHub ignores its case)."""
        what = f"label '{label}' of {owner}/{name}"
        try:
            self._calls.call(
                Request("GET", f"/repos/{owner}/{name}/labels/{_q(label)}", what),
                lambda: self._repo(owner, name).get_label(label).complete(),
            )
        except NotFound:
            return False
        return True

    def set_issue_labels(self, owner: str, name: str, number: int, labels: Sequence[str]) -> None:
        """Replace the issue's labels with exactly ``labels`` (one ``PUT``)."""
        path = f"/repos/{owner}/{name}/issues/{number}/labels"
        what = f"the labels of issue #{number} of {owner}/{name}"
        self._calls.call(
            Request("PUT", path, what),
            lambda: self._repo(owner, name).get_issue(number).set_labels(*labels),
        )

    def add_label(self, owner: str, name: str, number: int, label: str) -> None:
        """Add ``label`` to the issue and leave every other label as it is. After a server
        error it reads the issue's labels first: a label that is there needs no second ask."""
        path = f"/repos/{owner}/{name}/issues/{number}/labels"

        def send() -> bool:
            self._repo(owner, name).get_issue(number).add_to_labels(label)
            return True

        def happened() -> bool | None:
            labels = self.issue(owner, name, number).labels
            return True if any(have.lower() == label.lower() for have in labels) else None

        self._calls.call(
            Request("POST", path, f"the labels of issue #{number} of {owner}/{name}"),
            send,
            repeatable=False,
            happened=happened,
        )

    def remove_label(self, owner: str, name: str, number: int, label: str) -> None:
        """Take ``label`` off the issue and leave every other label; one it lacks is fine."""
        path = f"/repos/{owner}/{name}/issues/{number}/labels/{_q(label)}"
        try:
            self._calls.call(
                Request("DELETE", path, f"label '{label}' of issue #{number} of {owner}/{name}"),
                lambda: self._repo(owner, name).get_issue(number).remove_from_labels(label),
            )
        except GitHubError as exc:
            if exc.status != 404:
                raise

    def open_issue(
        self, owner: str, name: str, *, title: str, body: str, labels: Sequence[str]
    ) -> IssueInfo:
        """Open an issue; after a server error it looks for the one it may have opened (its
        own, open, same title and body) before asking again."""
        path = f"/repos/{owner}/{name}/issues"
        me = self.authenticated_login()

        def send() -> IssueInfo:
            made = self._repo(owner, name).create_issue(title=title, body=body, labels=list(labels))
            return issue_record(made)

        def happened() -> IssueInfo | None:
            def look() -> IssueInfo | None:
                for issue in self._repo(owner, name).get_issues(state="open"):
                    mine = issue.user is not None and issue.user.login == me
                    if mine and issue.title == title and (issue.body or "") == body:
                        return issue_record(issue)
                return None

            return self._calls.call(
                Request("GET", path, f"the open issues of {owner}/{name}"), look
            )

        return self._calls.call(
            Request("POST", path, f"a new issue of {owner}/{name}: {title}"),
            send,
            repeatable=False,
            happened=happened,
        )

    def block_issue(self, owner: str, name: str, number: int, blocker: int) -> None:
        """Record that ``blocker`` blocks issue ``number``; already so is fine."""
        blocker_id = self._calls.call(
            Request("GET", f"/repos/{owner}/{name}/issues/{blocker}", f"issue #{blocker}"),
            lambda: int(self._repo(owner, name).get_issue(blocker).id),
        )
        path = f"/repos/{owner}/{name}/issues/{number}/dependencies/blocked_by"

        def send() -> bool:
            url = f"{self._repo(owner, name).url}/issues/{number}/dependencies/blocked_by"
            self._gh.requester.requestJsonAndCheck("POST", url, input={"issue_id": blocker_id})
            return True

        def happened() -> bool | None:
            found = self.blockers(owner, name, number)
            return True if any(b.number == blocker and not b.elsewhere for b in found) else None

        self._link(
            Request("POST", path, f"the blockers of issue #{number} of {owner}/{name}"),
            send,
            happened,
        )

    def add_sub_issue(self, owner: str, name: str, number: int, sub_issue: int) -> None:
        """Make issue ``sub_issue`` a sub-issue of issue ``number``; already so is fine. GitHub
        answers 422 to a sub-issue that already has a parent: one that has this parent is fine,
        another parent is an error (a sub-issue has only one)."""
        sub_issue_id = self._calls.call(
            Request("GET", f"/repos/{owner}/{name}/issues/{sub_issue}", f"issue #{sub_issue}"),
            lambda: int(self._repo(owner, name).get_issue(sub_issue).id),
        )
        path = f"/repos/{owner}/{name}/issues/{number}/sub_issues"

        def send() -> bool:
            # GitHub asks for the sub-issue's id, not its number.
            self._repo(owner, name).get_issue(number).add_sub_issue(sub_issue_id)
            return True

        def happened() -> bool | None:
            return True if sub_issue in self.sub_issues(owner, name, number) else None

        self._link(
            Request("POST", path, f"the sub-issues of issue #{number} of {owner}/{name}"),
            send,
            happened,
        )

    def _link(
        self, request: Request, send: Callable[[], bool], happened: Callable[[], bool | None]
    ) -> None:
        """Make a link between two issues once: a lost answer is checked by ``happened``, and
        GitHub's 422 for a link that already exists is fine (any other 422 is not)."""
        try:
            self._calls.call(request, send, repeatable=False, happened=happened)
        except GitHubError as exc:
            if exc.status != 422 or happened() is None:
                raise

    def open_pulls(self, owner: str, name: str) -> tuple[PullRequestInfo, ...]:
        """The repository's open pull requests (as a list reads them: no mergeability), asked
        conditionally: a daemon watching them spends nothing while none changes."""
        path = f"/repos/{owner}/{name}/pulls"

        def convert(found: list[Any]) -> tuple[PullRequestInfo, ...]:
            return tuple(pull_record(self._make(PullRequest, item), listed=True) for item in found)

        def send() -> tuple[PullRequestInfo, ...]:
            query = {"state": "open", "sort": "created", "direction": "asc"}
            return self._reads.pages(path, query, lambda page: list(page), convert)

        what = f"the open pull requests of {owner}/{name}"
        return self._calls.call(Request("GET", f"{path}?state=open", what), send)

    def pull_reviews(self, owner: str, name: str, number: int) -> tuple[Review, ...]:
        """The pull request's reviews, oldest first; conditional, so a daemon watching its pull
        requests spends nothing while nobody reviews."""
        path = f"/repos/{owner}/{name}/pulls/{number}/reviews"

        def convert(found: list[Any]) -> tuple[Review, ...]:
            return tuple(review_record(item) for item in found)

        def send() -> tuple[Review, ...]:
            return self._reads.pages(path, {}, lambda page: list(page), convert)

        what = f"the reviews of pull request #{number} of {owner}/{name}"
        return self._calls.call(Request("GET", path, what), send)

    def pull_review_comments(self, owner: str, name: str, number: int) -> tuple[ReviewComment, ...]:
        """The comments on lines of the pull request's diff, oldest first; conditional."""
        path = f"/repos/{owner}/{name}/pulls/{number}/comments"

        def convert(found: list[Any]) -> tuple[ReviewComment, ...]:
            return tuple(review_comment_record(item) for item in found)

        def send() -> tuple[ReviewComment, ...]:
            query = {"sort": "created", "direction": "asc"}
            return self._reads.pages(path, query, lambda page: list(page), convert)

        what = f"the review comments of pull request #{number} of {owner}/{name}"
        return self._calls.call(Request("GET", path, what), send)

    def take_label(self, owner: str, name: str, number: int, label: str) -> bool:
        """Take ``label`` off as a claim; False when GitHub says the issue no longer has it.
        After an answer lost to a 5xx, a label found gone counts as taken by this call: GitHub
        cannot say by whom, and a race that coincides with a lost answer is rarer still."""
        path = f"/repos/{owner}/{name}/issues/{number}/labels/{_q(label)}"

        def send() -> bool:
            self._repo(owner, name).get_issue(number).remove_from_labels(label)
            return True

        def happened() -> bool | None:
            labels = self.issue(owner, name, number).labels
            return True if all(have.lower() != label.lower() for have in labels) else None

        try:
            return self._calls.call(
                Request("DELETE", path, f"label '{label}' of issue #{number} of {owner}/{name}"),
                send,
                repeatable=False,
                happened=happened,
            )
        except GitHubError as exc:
            if exc.status == 404:
                return False
            raise

    def upsert_marked_comment(
        self, owner: str, name: str, number: int, marker: str, body: str
    ) -> Comment:
        """Edit the authenticated user's comment on the issue that carries ``marker`` (a hidden
        ``<!-- ... -->``), or post one: the body is sent with the marker appended, so calling
        this twice leaves one comment."""
        me = self.authenticated_login()
        text = body if marker in body else f"{body.rstrip()}\n\n{marker}"

        def find() -> IssueComment | None:
            comments = self._repo(owner, name).get_issue(number).get_comments()
            return next((c for c in comments if c.user.login == me and marker in c.body), None)

        comments_path = f"/repos/{owner}/{name}/issues/{number}/comments"
        what = f"the comments of issue #{number} of {owner}/{name}"
        found = self._calls.call(Request("GET", comments_path, what), find)
        if found is not None:
            comment = found

            def edit() -> Comment:
                comment.edit(text)
                return comment_record(comment)

            path = f"/repos/{owner}/{name}/issues/comments/{comment.id}"
            return self._calls.call(Request("PATCH", path, f"comment {comment.id}"), edit)

        def happened() -> Comment | None:
            again = self._calls.call(Request("GET", comments_path, what), find)
            return comment_record(again) if again is not None else None

        return self._calls.call(
            Request("POST", comments_path, f"issue #{number} of {owner}/{name}"),
            lambda: comment_record(self._repo(owner, name).get_issue(number).create_comment(text)),
            happened=happened,
        )

    def close_issue(self, owner: str, name: str, number: int) -> None:
        """Close the issue (closing a closed issue is fine)."""
        path = f"/repos/{owner}/{name}/issues/{number}"
        self._calls.call(
            Request("PATCH", path, f"issue #{number} of {owner}/{name}"),
            lambda: self._repo(owner, name).get_issue(number).edit(state="closed"),
        )

    # -- pull requests --------------------------------------------------------------------

    def pulls_for_head(
        self, owner: str, name: str, head_branch: str, state: str = "all"
    ) -> tuple[PullRequestInfo, ...]:
        """The pull requests from ``head_branch`` of this same repository (forks are left out),
        newest first. GitHub's list carries no mergeability: ``mergeable`` is None and
        ``mergeable_state`` ``unknown``; read one with :meth:`pull` for those."""
        full_name = f"{owner}/{name}"

        def send() -> tuple[PullRequestInfo, ...]:
            pulls = self._repo(owner, name).get_pulls(
                state=state, head=f"{owner}:{head_branch}", sort="created", direction="desc"
            )
            found = [
                pull_record(p, listed=True)
                for p in pulls
                if p.head.ref == head_branch
                and p.head.repo is not None
                and p.head.repo.full_name.lower() == full_name.lower()
            ]
            return tuple(sorted(found, key=lambda p: p.number, reverse=True))

        path = f"/repos/{owner}/{name}/pulls?head={owner}:{head_branch}&state={state}"
        what = f"the pull requests from {head_branch} in {full_name}"
        return self._calls.call(Request("GET", path, what), send)

    def pull(self, owner: str, name: str, number: int) -> PullRequestInfo:
        """Pull request ``number``, with its mergeability (None while GitHub computes it)."""
        path = f"/repos/{owner}/{name}/pulls/{number}"

        def send() -> PullRequestInfo:
            return self._reads.one(path, lambda data: pull_record(self._make(PullRequest, data)))

        what = f"pull request #{number} of {owner}/{name}"
        return self._calls.call(Request("GET", path, what), send)

    def wait_for_mergeable(
        self, owner: str, name: str, number: int, timeout: float
    ) -> PullRequestInfo:
        """Read the pull request again every second while GitHub is still computing whether it
        is mergeable, for up to ``timeout`` seconds; return the last answer (``mergeable`` may
        still be None then). A closed pull request is returned at once: GitHub never computes
        it."""
        waited = 0.0
        while True:
            pull = self.pull(owner, name, number)
            if pull.mergeable is not None or pull.state != "open" or waited >= timeout:
                return pull
            step = min(1.0, timeout - waited)
            self._clock.sleep(step)
            waited += step

    def create_pull(
        self,
        owner: str,
        name: str,
        *,
        head: str,
        base: str,
        title: str,
        body: str,
        draft: bool = False,
    ) -> PullRequestInfo:
        """Open a pull request from ``head`` into ``base``. After a server error it looks for
        an open pull request from ``head`` into ``base`` before asking again, so it never opens
        two."""

        def send() -> PullRequestInfo:
            repo = self._repo(owner, name)
            pull = repo.create_pull(base=base, head=head, title=title, body=body, draft=draft)
            return pull_record(pull)

        def happened() -> PullRequestInfo | None:
            opened = [
                p for p in self.pulls_for_head(owner, name, head, "open") if p.base_ref == base
            ]
            return self.pull(owner, name, opened[0].number) if opened else None

        request = Request("POST", f"/repos/{owner}/{name}/pulls", f"a pull request from {head}")
        return self._calls.call(request, send, happened=happened)

    def update_pull(
        self,
        owner: str,
        name: str,
        number: int,
        *,
        title: str | None = None,
        body: str | None = None,
        base: str | None = None,
    ) -> PullRequestInfo:
        """Change the title, body or base of the pull request (what is None stays)."""
        if title is None and body is None and base is None:
            return self.pull(owner, name, number)

        def send() -> PullRequestInfo:
            pull = self._repo(owner, name).get_pull(number)
            pull.edit(
                title=NotSet if title is None else title,
                body=NotSet if body is None else body,
                base=NotSet if base is None else base,
            )
            return pull_record(pull)

        path = f"/repos/{owner}/{name}/pulls/{number}"
        request = Request("PATCH", path, f"pull request #{number} of {owner}/{name}")
        return self._calls.call(request, send)

    def mark_ready(self, owner: str, name: str, number: int) -> None:
        """Mark the pull request ready for review (GraphQL), unless it already is."""
        self._set_draft(owner, name, number, draft=False)

    def convert_to_draft(self, owner: str, name: str, number: int) -> None:
        """Turn the pull request back to a draft (GraphQL), unless it already is one."""
        self._set_draft(owner, name, number, draft=True)

    def _set_draft(self, owner: str, name: str, number: int, *, draft: bool) -> None:
        what = f"pull request #{number} of {owner}/{name}"
        path = f"/repos/{owner}/{name}/pulls/{number}"
        pull = self._calls.call(
            Request("GET", path, what), lambda: self._repo(owner, name).get_pull(number).complete()
        )
        if pull.draft == draft:
            return
        mutation = "convertPullRequestToDraft" if draft else "markPullRequestReadyForReview"

        def send() -> None:
            if draft:
                pull.convert_to_draft()
            else:
                pull.mark_ready_for_review()

        # The mutation sets a state, so asking twice is harmless.
        self._calls.call(Request("POST", f"/graphql {mutation}", what), send, repeatable=True)

    def merge_pull(
        self, owner: str, name: str, number: int, *, sha: str, title: str, message: str
    ) -> MergeResult:
        """Merge with a merge commit, only if the head is still ``sha``. GitHub's refusal
        (405 not mergeable, 409 head moved, 422) raises :class:`MergeRefused` with its status
        and message. After a server error, a pull request found merged at ``sha`` counts as
        merged."""
        what = f"pull request #{number} of {owner}/{name}"

        def send() -> MergeResult:
            pull = self._repo(owner, name).get_pull(number)
            done = pull.merge(
                commit_title=title, commit_message=message, merge_method="merge", sha=sha
            )
            return MergeResult(merged=bool(done.merged), sha=done.sha, message=done.message or "")

        def happened() -> MergeResult | None:
            pull = self._calls.call(
                Request("GET", f"/repos/{owner}/{name}/pulls/{number}", what),
                lambda: self._repo(owner, name).get_pull(number).complete(),
            )
            if pull.merged and pull.head.sha == sha:
                return MergeResult(True, pull.merge_commit_sha, "Pull Request successfully merged")
            return None

        request = Request("PUT", f"/repos/{owner}/{name}/pulls/{number}/merge", what)
        try:
            return self._calls.call(request, send, repeatable=False, happened=happened)
        except MergeRefused:
            raise
        except GitHubError as exc:
            if exc.status not in _MERGE_REFUSALS:
                raise
            raise MergeRefused(
                f"GitHub refused to merge {what} at {sha[:12]} ({exc.status}: {exc.detail}); "
                "bring the pull request up to date and green, then merge again",
                exc.status,
                exc.detail,
            ) from exc

    def branch_exists(self, owner: str, name: str, branch: str) -> bool:
        """Whether ``branch`` is on the repository now (its ref, asked conditionally)."""
        path = f"/repos/{owner}/{name}/git/ref/heads/{urllib.parse.quote(branch)}"
        request = Request("GET", path, f"branch {branch} of {owner}/{name}")
        try:
            return self._calls.call(request, lambda: self._reads.one(path, lambda _: True))
        except NotFound:
            return False

    def delete_branch(self, owner: str, name: str, branch: str) -> None:
        """Delete the branch; one already gone (404 or 422) is fine."""
        path = f"/repos/{owner}/{name}/git/refs/heads/{branch}"

        def send() -> None:
            url = f"{self._repo(owner, name).url}/git/refs/heads/{urllib.parse.quote(branch)}"
            self._gh.requester.requestJsonAndCheck("DELETE", url)

        try:
            self._calls.call(Request("DELETE", path, f"branch {branch} of {owner}/{name}"), send)
        except GitHubError as exc:
            if exc.status not in (404, 422):
                raise

    # -- checks and Actions ---------------------------------------------------------------

    def check_runs(self, owner: str, name: str, sha: str) -> tuple[CheckRun, ...]:
        """Every check run on ``sha`` (all pages). A GitHub Actions check carries its job and
        workflow run ids, read from its ``details_url`` (``.../actions/runs/<run>/job/<job>``,
        the same on GitHub and the stand-in)."""

        path = f"/repos/{owner}/{name}/commits/{sha}/check-runs"

        def convert(found: list[Any]) -> tuple[CheckRun, ...]:
            return tuple(check_run_record(self._make(GhCheckRun, run)) for run in found)

        def send() -> tuple[CheckRun, ...]:
            return self._reads.pages(path, {}, lambda page: list(page["check_runs"]), convert)

        what = f"the check runs of {sha[:12]} in {owner}/{name}"
        return self._calls.call(Request("GET", path, what), send)

    def commit_statuses(self, owner: str, name: str, sha: str) -> tuple[CommitStatus, ...]:
        """The latest commit status of each context on ``sha`` (the combined status)."""

        path = f"/repos/{owner}/{name}/commits/{sha}/status"

        def convert(found: list[Any]) -> tuple[CommitStatus, ...]:
            return tuple(status_record(self._make(GhCommitStatus, status)) for status in found)

        def send() -> tuple[CommitStatus, ...]:
            return self._reads.pages(path, {}, lambda page: list(page["statuses"]), convert)

        what = f"the commit statuses of {sha[:12]} in {owner}/{name}"
        return self._calls.call(Request("GET", path, what), send)

    def job_log_tail(self, owner: str, name: str, job_id: int, max_chars: int = 4000) -> str:
        """The last ``max_chars`` characters of an Actions job's log, starting at a line. GitHub
        answers with a redirect to a short-lived download link, fetched without the token."""

        def send() -> str:
            url = f"{self._repo(owner, name).url}/actions/jobs/{job_id}/logs"
            headers, _ = self._gh.requester.requestBlobAndCheck("GET", url)
            location = str({k.lower(): v for k, v in headers.items()}["location"])
            if urllib.parse.urlsplit(location).scheme not in ("http", "https"):
                raise GitHubError(f"GitHub gave no usable log link for job {job_id}")
            download = urllib.request.Request(location, method="GET")  # noqa: S310 - checked
            with urllib.request.urlopen(download, timeout=_LOG_DOWNLOAD_TIMEOUT) as answer:  # noqa: S310 - checked above
                text = answer.read().decode("utf-8", errors="replace")
            return log_tail(text, max_chars)

        path = f"/repos/{owner}/{name}/actions/jobs/{job_id}/logs"
        what = f"the log of Actions job {job_id} in {owner}/{name}"
        return self._calls.call(Request("GET", path, what), send)

    def rerun_failed_jobs(self, owner: str, name: str, run_id: int) -> None:
        """Re-run the failed jobs of workflow run ``run_id`` (a new attempt). After a server
        error it asks again only if the run has no new attempt."""
        what = f"workflow run {run_id} of {owner}/{name}"
        run_path = f"/repos/{owner}/{name}/actions/runs/{run_id}"

        def attempt() -> int:
            return self._calls.call(
                Request("GET", run_path, what),
                lambda: int(self._repo(owner, name).get_workflow_run(run_id).run_attempt),
            )

        before = attempt()

        def send() -> bool:
            url = f"{self._repo(owner, name).url}/actions/runs/{run_id}/rerun-failed-jobs"
            self._gh.requester.requestJsonAndCheck("POST", url)
            return True

        def happened() -> bool | None:
            return True if attempt() > before else None

        request = Request("POST", f"{run_path}/rerun-failed-jobs", what)
        self._calls.call(request, send, happened=happened)

    def rate_limit_seen(self) -> int | None:
        """Requests left in the core rate limit as GitHub's last answer said (its
        ``X-RateLimit-Remaining``), without asking: None before any answer said it."""
        remaining, limit = self._gh.requester.rate_limiting
        return None if remaining < 0 or limit < 0 else int(remaining)

    def rate_limit_remaining(self) -> int | None:
        """Requests left in the token's core rate limit (asking costs none), or None where
        GitHub has rate limiting turned off."""

        def send() -> int:
            return int(self._gh.get_rate_limit().resources.core.remaining)

        try:
            return self._calls.call(Request("GET", "/rate_limit", "the rate limit"), send)
        except NotFound:
            return None

    # -- helpers --------------------------------------------------------------------------

    def _make(self, klass: type[G], data: Any) -> G:
        """A complete PyGithub object from an answer's JSON, for the converters; reading it
        fetches nothing."""
        return self._gh.create_from_raw_data(klass, data)

    def _repo(self, owner: str, name: str) -> Repository:
        """The repository as a lazy PyGithub object: no request until something is read."""
        return self._gh.get_repo(f"{owner}/{name}")

    # -- webhooks -------------------------------------------------------------------------

    def webhooks(self, owner: str, name: str | None = None) -> tuple[Webhook, ...]:
        """The webhooks of ``owner/name`` (``name`` None: of the organisation ``owner``), all
        pages. Reading them needs admin on the repository (owner of the organisation), or a
        GitHub App's Webhooks read permission: others get NotFound, or a 403
        :class:`GitHubError` (``Resource not accessible by integration``)."""
        path = f"/repos/{owner}/{name}/hooks" if name is not None else f"/orgs/{_q(owner)}/hooks"

        def hook(item: Any) -> Webhook:
            config = item.get("config") or {}
            return Webhook(
                id=int(item["id"]),
                url=str(config.get("url") or ""),
                active=bool(item.get("active")),
                events=tuple(str(event) for event in item.get("events") or ()),
                content_type=str(config.get("content_type") or "form"),  # GitHub's default
                has_secret=bool(config.get("secret")),
            )

        def send() -> tuple[Webhook, ...]:
            return self._reads.pages(
                path, {}, lambda page: list(page), lambda found: tuple(map(hook, found))
            )

        what = f"the webhooks of {owner}/{name}" if name is not None else f"the webhooks of {owner}"
        return self._calls.call(Request("GET", path, what), send)

    def webhook_deliveries(
        self, owner: str, name: str | None, hook_id: int, limit: int = 10
    ) -> tuple[HookDelivery, ...]:
        """The most recent deliveries (``limit`` at most, newest first) GitHub recorded for
        webhook ``hook_id`` of ``owner/name`` (``name`` None: of the organisation ``owner``);
        GitHub keeps them for 30 days. Pages are read only until ``limit`` are found."""
        hooks = f"/repos/{owner}/{name}/hooks" if name is not None else f"/orgs/{_q(owner)}/hooks"
        path = f"{hooks}/{hook_id}/deliveries"

        def delivery(item: Any) -> HookDelivery:
            action = item.get("action")
            return HookDelivery(
                id=int(item["id"]),
                guid=str(item.get("guid") or ""),
                event=str(item.get("event") or ""),
                action=str(action) if action else None,
                status_code=int(item.get("status_code") or 0),
                status=str(item.get("status") or ""),
                delivered_at=when(item["delivered_at"]),
                redelivery=bool(item.get("redelivery")),
            )

        def convert(found: list[Any]) -> tuple[HookDelivery, ...]:
            newest = sorted(map(delivery, found), key=lambda d: d.delivered_at, reverse=True)
            return tuple(newest[:limit])

        def send() -> tuple[HookDelivery, ...]:
            return self._reads.pages(
                path,
                {},
                lambda page: list(page),
                convert,
                view=str(limit),  # one answer makes a different record per limit
                enough=lambda found: len(found) >= limit,
            )

        where = f"{owner}/{name}" if name is not None else owner
        what = f"the deliveries of webhook {hook_id} of {where}"
        return self._calls.call(Request("GET", path, what), send)
