"""The frozen records that cross every boundary: what thirdshift knows of GitHub objects and
what the store gives back.

GitHub records are converted at the adapter's boundary (``thirdshift.github``), so nothing else
ever holds a PyGithub object that fetches lazily; store records are converted from table rows by
``thirdshift.store``, so nothing outside it can touch the database lazily. Harness adapters make
``SessionEvent`` values and the store keeps them; neither imports the other.

About 500 lines: plain frozen values and nothing else, kept in one module so that every
boundary names its records from one place.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import datetime

from thirdshift.run_states import RunKind, RunState


@dataclass(frozen=True)
class RepoInfo:
    owner: str
    name: str
    default_branch: str
    clone_url: str
    html_url: str

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class Comment:
    id: int
    author: str
    body: str
    created_at: datetime


@dataclass(frozen=True)
class IssueInfo:
    number: int
    title: str
    body: str
    state: str  # "open" or "closed"
    labels: tuple[str, ...]
    html_url: str
    author: str
    is_pull_request: bool = False


@dataclass(frozen=True)
class IssueSummary:
    """An issue as a list shows it: enough for the daemon to decide whether it is Ready."""

    number: int
    title: str
    state: str  # "open" or "closed"
    labels: tuple[str, ...]
    is_pull_request: bool
    updated_at: datetime
    html_url: str
    body: str = ""  # the approval of a Continuation compares the text a Run started on


@dataclass(frozen=True)
class BlockingIssue:
    """An issue blocking another (GitHub's blocked-by dependency) and its state. ``elsewhere``:
    the other repository's OWNER/NAME when it is not the blocked issue's (its number is that
    repository's, never to be taken for an issue here); empty when it is the same."""

    number: int
    state: str
    elsewhere: str = ""

    @property
    def order(self) -> tuple[str, int]:
        """Sorts this repository's blockers first, by number, then those elsewhere by name."""
        return self.elsewhere, self.number


@dataclass(frozen=True)
class Labelling:
    """The last time a label was added to an issue, and by whom (None: a deleted account)."""

    login: str | None
    at: datetime
    adders: tuple[tuple[str | None, datetime], ...] = ()
    """Every adding of that label, oldest first: who and when (the last is ``login``, ``at``)."""


@dataclass(frozen=True)
class TextEdit:
    """One edit of an issue's ``title`` (a ``renamed`` event) or ``body`` (a content edit), by
    ``editor`` (None: GitHub no longer names them) at ``at``."""

    part: str  # "title" or "body"
    editor: str | None
    at: datetime


@dataclass(frozen=True)
class PullRequestInfo:
    number: int
    html_url: str
    state: str  # "open" or "closed"
    merged: bool
    draft: bool
    head_ref: str
    head_sha: str
    base_ref: str
    title: str
    body: str
    mergeable: bool | None  # None while GitHub is still computing it
    mergeable_state: str  # "clean", "dirty", "blocked", "unstable", "unknown", ...
    author: str = ""  # who opened it (empty where a read did not say)
    updated_at: datetime | None = None  # moves with each review and comment


@dataclass(frozen=True)
class Review:
    """A review of a pull request: ``state`` is GitHub's (APPROVED, CHANGES_REQUESTED,
    COMMENTED, DISMISSED)."""

    id: int
    author: str
    state: str
    body: str
    is_bot: bool = False


@dataclass(frozen=True)
class ReviewComment:
    """A comment on a line of a pull request's diff, part of review ``review_id``. ``line`` is
    None once the line is gone from the diff (an outdated comment)."""

    id: int
    review_id: int | None
    author: str
    body: str
    path: str
    line: int | None
    is_bot: bool = False


@dataclass(frozen=True)
class CheckRun:
    """One check run on a commit. ``job_id`` is set when the check is a GitHub Actions job
    (then it can be re-run and its log read); ``run_id`` is its workflow run."""

    id: int
    name: str
    head_sha: str
    status: str  # "queued", "in_progress", "completed"
    conclusion: str | None  # "success", "failure", "neutral", "skipped", "cancelled", ...
    html_url: str
    job_id: int | None = None
    run_id: int | None = None


@dataclass(frozen=True)
class CommitStatus:
    """One commit status (the older statuses API): ``state`` is success, pending, failure or
    error."""

    context: str
    state: str
    target_url: str | None


@dataclass(frozen=True)
class MergeResult:
    merged: bool
    sha: str | None
    message: str


# -- the store's records ------------------------------------------------------------------------


@dataclass(frozen=True)
class ListedRepository:
    """A repository as the list of those the token may read shows it: whether it is archived
    or disabled (nothing can be pushed there) and whether the token may push to it."""

    owner: str
    name: str
    archived: bool
    disabled: bool
    can_push: bool

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class OwnerIssue:
    """An issue or pull request as an owner's listing across its repositories shows it: its
    repository (``OWNER/NAME`` as GitHub spells it), who opened it, and, for a pull request,
    whether it is a draft."""

    repository: str
    issue: IssueSummary
    author: str = ""
    draft: bool = False


@dataclass(frozen=True)
class Repository:
    id: int
    owner: str
    name: str

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass(frozen=True)
class Run:
    id: int
    repository: Repository
    issue_number: int | None
    """The issue the Run works on; None for an Architect run, which has none."""
    kind: RunKind
    state: RunState
    base_branch: str | None
    issue_branch: str | None
    head_sha: str | None
    pull_request_number: int | None
    harness: str | None
    model: str | None
    cause: str | None
    killed_work: str | None
    last_session_log: str | None
    started_at: datetime
    ended_at: datetime | None
    published: tuple[int, ...] = ()
    """An Architect run's published issues, in order: the Spec (or the one Ticket, or the
    idea), then its Tickets."""
    text_sha256: str | None = None
    """sha256 of the issue's title + line feed + body the Run started on (None: not recorded)."""
    parent_run_id: int | None = None  # a Ticket Run's Spec run
    landed_sha: str | None = None  # the head a Ticket Run merged into its Spec branch
    landed_at: datetime | None = None
    ready_labelled_at: datetime | None = None
    """When the Ready label the Run answers was added to its issue (None: not known)."""

    @property
    def landed(self) -> bool:
        return self.landed_sha is not None

    @property
    def issue(self) -> int:
        """The issue of a Run that works on one: every kind but the Architect run."""
        if self.issue_number is None:
            raise ValueError(f"Run {self.id} is an Architect run: it works on no issue")
        return self.issue_number

    @property
    def subject(self) -> str:
        """What the Run worked on, for people: ``owner/name#7``, or ``owner/name (Architect
        run)`` for a Run with no issue."""
        if self.kind == RunKind.ARCHITECT:
            return f"{self.repository.full_name} (Architect run)"
        return f"{self.repository.full_name}#{self.issue_number}"


@dataclass(frozen=True)
class Usage:
    """What a session consumed, as far as its stream says: a line of the usage ledger.

    ``input_tokens`` counts every input token, cached or not; ``cached_input_tokens`` (cache
    reads) and ``cache_write_tokens`` are the parts of it the provider served from or wrote to
    its cache. ``cost_source`` says where ``cost_usd`` came from: ``reported`` (the CLI's own
    figure), ``price table`` (thirdshift's, from the tokens and the ``model_prices`` setting), or
    None when there is no cost figure."""

    turns: int | None = None
    input_tokens: int | None = None
    cached_input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    cache_write_tokens: int | None = None
    cost_source: str | None = None
    model: str | None = None
    """The model as the stream reports it (None when the CLI does not say)."""
    cli_version: str | None = None

    def describe(self) -> str:
        """A short phrase for the session-ended line, e.g. ``3 turns, $0.0123`` or
        ``1200 input tokens (800 cached), 40 output tokens``."""
        parts: list[str] = []
        if self.turns is not None:
            parts.append(f"{self.turns} turn{'s' if self.turns != 1 else ''}")
        if self.cost_usd is not None:
            estimated = " (priced by thirdshift)" if self.cost_source == "price table" else ""
            parts.append(f"${self.cost_usd:.4f}{estimated}")
        if self.cost_usd is None and self.input_tokens is not None:
            cached = f" ({self.cached_input_tokens} cached)" if self.cached_input_tokens else ""
            parts.append(f"{self.input_tokens} input tokens{cached}")
            if self.output_tokens is not None:
                parts.append(f"{self.output_tokens} output tokens")
        return ", ".join(parts) or "no usage reported"


NO_USAGE = Usage()


def at_least(counted: Usage, reported: Usage) -> Usage:
    """``reported``, with every figure no lower than ``counted``'s (what was already counted of
    the same session). The stream is the agent's to write into: a forged line with smaller
    totals, negative numbers or a cost that is not a number must never lower what a budget
    was checked against. A figure below zero, or a cost that is not finite, is none."""

    def most(before: int | None, now: int | None) -> int | None:
        if now is None or now < 0:
            return before
        return now if before is None else max(before, now)

    cost, source = reported.cost_usd, reported.cost_source
    unusable = cost is None or not math.isfinite(cost) or cost < 0
    if unusable or (counted.cost_usd is not None and counted.cost_usd > (cost or 0.0)):
        cost, source = counted.cost_usd, counted.cost_source
    return replace(
        reported,
        turns=most(counted.turns, reported.turns),
        input_tokens=most(counted.input_tokens, reported.input_tokens),
        cached_input_tokens=most(counted.cached_input_tokens, reported.cached_input_tokens),
        cache_write_tokens=most(counted.cache_write_tokens, reported.cache_write_tokens),
        output_tokens=most(counted.output_tokens, reported.output_tokens),
        cost_usd=cost,
        cost_source=source,
        model=reported.model or counted.model,
        cli_version=reported.cli_version or counted.cli_version,
    )


def plus(total: Usage, more: Usage) -> Usage:
    """``total`` with ``more``'s turns, tokens and cost added: the one way a stream's figures
    are added up (its messages, results or steps). A figure ``more`` does not state (None)
    leaves ``total``'s as it is; the model, version and cost source stay ``total``'s."""

    def add(before: int | None, now: int | None) -> int | None:
        return before if now is None else now + (before or 0)

    cost = total.cost_usd if more.cost_usd is None else more.cost_usd + (total.cost_usd or 0.0)
    return replace(
        total,
        turns=add(total.turns, more.turns),
        input_tokens=add(total.input_tokens, more.input_tokens),
        cached_input_tokens=add(total.cached_input_tokens, more.cached_input_tokens),
        cache_write_tokens=add(total.cache_write_tokens, more.cache_write_tokens),
        output_tokens=add(total.output_tokens, more.output_tokens),
        cost_usd=cost,
    )


def less(reported: Usage, resumed: Usage) -> Usage:
    """``reported`` with the tokens of ``resumed`` taken off, none below zero: what a native
    Resume used itself, when its CLI reports the whole conversation's tokens."""

    def left(mine: int | None, before: int | None) -> int | None:
        return None if mine is None else max(mine - (before or 0), 0)

    return replace(
        reported,
        input_tokens=left(reported.input_tokens, resumed.input_tokens),
        cached_input_tokens=left(reported.cached_input_tokens, resumed.cached_input_tokens),
        cache_write_tokens=left(reported.cache_write_tokens, resumed.cache_write_tokens),
        output_tokens=left(reported.output_tokens, resumed.output_tokens),
    )


@dataclass(frozen=True)
class SessionRecord:
    id: int
    run_id: int
    kind: str
    harness: str
    model: str | None
    harness_session_id: str | None
    resumed_from_id: int | None
    log_path: str
    state: str
    prompt: str
    final_message: str | None
    killed_work: str | None
    error: str | None
    started_at: datetime
    ended_at: datetime | None
    usage: Usage = NO_USAGE


@dataclass(frozen=True)
class UsageTotal:
    """One line of the usage ledger's totals: the sessions of one Run, repository or day."""

    key: str
    label: str
    sessions: int
    harnesses: tuple[str, ...]
    """Each Harness used, with the model it reported (``claude (claude-opus-5-5)``)."""
    turns: int
    input_tokens: int
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int
    cost_usd: float
    unpriced_sessions: int
    """Sessions with no cost figure: the CLI reported none and no price was configured, or the
    session is still running."""
    first_started: datetime
    duration_seconds: float = 0.0
    """The sessions' time from start to end, added up (a session still running adds none)."""


def add_usage(
    total: UsageTotal | None,
    key: str,
    label: str,
    harness: str,
    usage: Usage,
    started_at: datetime,
    ended_at: datetime | None,
) -> UsageTotal:
    """``total`` with one session's ``usage`` added (a new total when ``total`` is None)."""
    model = usage.model
    harness = f"{harness} ({model})" if model else harness
    if total is None:
        total = UsageTotal(key, label, 0, (), 0, 0, 0, 0, 0, 0.0, 0, started_at)
    return UsageTotal(
        key=key,
        label=label,
        sessions=total.sessions + 1,
        harnesses=total.harnesses + (() if harness in total.harnesses else (harness,)),
        turns=total.turns + (usage.turns or 0),
        input_tokens=total.input_tokens + (usage.input_tokens or 0),
        cached_input_tokens=total.cached_input_tokens + (usage.cached_input_tokens or 0),
        cache_write_tokens=total.cache_write_tokens + (usage.cache_write_tokens or 0),
        output_tokens=total.output_tokens + (usage.output_tokens or 0),
        cost_usd=total.cost_usd + (usage.cost_usd or 0.0),
        unpriced_sessions=total.unpriced_sessions + (usage.cost_usd is None),
        first_started=min(total.first_started, started_at),
        duration_seconds=total.duration_seconds
        + ((ended_at - started_at).total_seconds() if ended_at is not None else 0.0),
    )


@dataclass(frozen=True)
class SessionEvent:
    """One normalized line of a Session: a tool call, a tool result, a message."""

    seq: int
    kind: str
    summary: str
    tool: str | None = None
    target: str | None = None
    exit_status: int | None = None
    created_at: datetime | None = None


@dataclass(frozen=True)
class Lease:
    """The database half of a Claim: who holds an issue until when, and the fencing token that
    proves it on every write."""

    repository_id: int
    issue_number: int | None  # None: a repository's Architect Lease
    owner: str
    fencing_token: int
    run_id: int | None
    acquired_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class KeptResult:
    """An Architect run's kept result (the text ``thirdshift.runs.rules.plans.result_to_json``
    wrote) and the fencing token of the Architect Lease it was kept under (None: it was not
    kept under one)."""

    text: str
    fencing_token: int | None


@dataclass(frozen=True)
class Activity:
    """One line of the Activity log: what a daemon did or decided, and when."""

    id: int
    kind: str  # start, pickup, rescue, pass-over, skip, end, crash, sweep, poll, stop
    daemon: str
    message: str
    created_at: datetime
    repository: str | None = None  # owner/name
    issue_number: int | None = None
    run_id: int | None = None


@dataclass(frozen=True)
class DatabaseRole:
    """The PostgreSQL role thirdshift connects as, and whether it is a superuser."""

    name: str
    superuser: bool


@dataclass(frozen=True)
class SessionHistory:
    """What one earlier session did, as a preamble takes it: where it sat (its Run and Session
    kind), its brief (the prompt it started with), its final message, the summaries of its
    newest Session events (oldest first) and how many it had in all. For the last session of an
    earlier Run, how that Run ended (``run_outcome``: ``ended failed: <cause>``), its pull
    request and the Issue branch's head."""

    kind: str
    final_message: str | None
    steps: tuple[str, ...]
    run_id: int = 0
    prompt: str = ""
    step_count: int = 0
    run_outcome: str | None = None
    pull_request: int | None = None
    head: str | None = None


@dataclass(frozen=True)
class Notification:
    """One message to the notification targets: a Run's end (``event`` ``run.ended``, with
    ``state`` ready, merged, refused, failed or interrupted) or a Ready label passed over because
    its labeller lacks permission (``issue.passed_over``, ``state`` ``passed-over``, the reason
    as ``cause``). ``post_mortem`` is the Post-mortem's short form; a Spec run's message has
    a line per Ticket (``tickets``) and its cost counts its Ticket Runs."""

    event: str
    repository: str
    issue_number: int | None  # None: an Architect run's, which has no issue
    issue_url: str
    state: str
    run_id: int | None = None
    kind: RunKind | None = None
    cause: str | None = None
    pull_request_url: str | None = None
    cost_usd: float | None = None
    post_mortem: str | None = None
    tickets: tuple[str, ...] = ()  # a Spec run's: a line per Ticket, how it ended


# -- the process supervisor's limits ----------------------------------------------------------


@dataclass(frozen=True)
class Watchdogs:
    """Limits after which a running CLI is stopped, in seconds."""

    idle_seconds: float
    """No stdout line for this long: stop ("idle")."""
    wall_seconds: float
    """This long since the start: stop ("wall")."""
    post_result_seconds: float
    """This long after ``result_seen()`` first returned True: stop ("post-result")."""


@dataclass(frozen=True)
class OutputCaps:
    """What one session's output may cost thirdshift, in bytes (adr/0029)."""

    line_bytes: int = 8 * 1024 * 1024
    """A longer stdout line is cut: its head kept, the rest dropped and counted."""
    log_bytes: int = 256 * 1024 * 1024
    """Past this, the Session log counts lines instead of keeping them."""


DEFAULT_OUTPUT_CAPS = OutputCaps()


@dataclass(frozen=True)
class ProviderOutage:
    """A model provider refused a session after its Harness's own retries: overloaded (529 or
    503), rate-limited (429), or the CLI's rate-limit event saying the request was rejected.
    A Harness's stream reader finds it; the Sessions module switches the Harness on it and the
    daemon pauses pickups on it. ``cause`` is one scrubbed line; ``resets_at`` is when the
    provider said it would take requests again, if it said."""

    harness: str
    status: int | None
    cause: str
    resets_at: datetime | None = None

    @property
    def condition(self) -> str:
        """``overloaded (529)``, ``rate-limited (429)``, ``unavailable (503)``."""
        word = {503: "unavailable", 529: "overloaded"}.get(self.status or 0, "rate-limited")
        return f"{word} ({self.status})" if self.status is not None else word


@dataclass(frozen=True)
class Webhook:
    """A webhook of a repository or an organisation, as GitHub lists it: where it sends
    (its config's URL), whether it is active, the events it sends (``*``: every one), its
    content type (``json`` or ``form``) and whether a secret signs its deliveries (GitHub never
    shows the secret itself)."""

    id: int
    url: str
    active: bool
    events: tuple[str, ...]
    content_type: str
    has_secret: bool


@dataclass(frozen=True)
class HookDelivery:
    """One Webhook delivery as GitHub's record of a hook keeps it: the event (and action) it
    carried, when it went, and the HTTP status the receiver answered (0: none, it could not be
    reached), with GitHub's word for it (``OK``, ``Invalid HTTP Response: 502``)."""

    id: int
    guid: str
    event: str
    action: str | None
    status_code: int
    status: str
    delivered_at: datetime
    redelivery: bool = False

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def what(self) -> str:
        return f"{self.event}.{self.action}" if self.action else self.event
