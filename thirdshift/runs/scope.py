"""What one Run is built from and knows as it goes, in frozen values (adr/0031). The composition
root fills ``RunParts`` (the collaborators: settings, GitHub, the store, sessions, clones, the
scrubber, the clock) and ``RunHooks`` (what the caller learns and controls while the Run goes:
progress lines, the interrupt, URLs, who claims, a daemon's stop reason and Run ids,
notifications). The steps take the request, then what the branch choice found (``Found``), then
the Run as recorded under its Lease (``RunScope``), and what the steps after the Claim have made
so far (``Trail``, which the salvage reads when a step fails). A step takes the value of the
point it runs at and returns what it made; none keeps state of its own between Runs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from thirdshift.clock import Clock
from thirdshift.git import ManagedClone, Worktree
from thirdshift.issue_url import IssueRef
from thirdshift.records import IssueInfo, PullRequestInfo, RepoInfo, Run
from thirdshift.runs.claims import Claim
from thirdshift.runs.lease import LeaseKeeper
from thirdshift.runs.ports import NO_NOTIFIER, CloneSource, GitHubPort, Notifier, SessionSource
from thirdshift.runs.rules.branches import BranchChoice
from thirdshift.runs.rules.review import NO_FEEDBACK, Feedback
from thirdshift.scrub import Scrubber
from thirdshift.sessions import Sessions
from thirdshift.settings import Settings
from thirdshift.store import Store
from thirdshift.store.retry import retrying

Say = Callable[[str], None]
"""A progress line, scrubbed on its way out."""
T = TypeVar("T")


@dataclass(frozen=True)
class RunTools:
    """What the parts of a Run that record, scrub, wait and speak share: the store, the
    settings, the scrubber, the clock and the progress line (``say`` scrubs)."""

    store: Store
    settings: Settings
    scrub: Scrubber
    clock: Clock
    say: Say

    def retrying(self, call: Callable[[], T]) -> T:
        """``call()``, tried again while the store is away, for ``salvage_wait_seconds``."""
        return retrying(
            call,
            seconds=self.settings.salvage_wait_seconds,
            sleep=self.clock.sleep,
            monotonic=self.clock.monotonic,
        )


@dataclass(frozen=True)
class RunRequest:
    """What to run. A daemon's request also says what it saw when it chose the issue, checked
    again under the Lease: ``expect_ready`` (the issue still carries the Ready label) or
    ``rescue_of`` (that crashed Run is still the issue's newest); otherwise the Run ends
    with ``NotClaimed`` having changed nothing."""

    issue: IssueRef
    merge: bool = False
    base: str | None = None
    expect_ready: bool = False
    rescue_of: int | None = None
    job_url: str | None = None  # on GitHub Actions: the workflow run's page, for the comment
    # A daemon's review pickup: that Run is still the issue's newest, and review feedback on
    # its pull request waits (checked again under the Lease).
    review_of: int | None = None
    # A Ticket Run (adr/0032): the Spec run it is part of, recorded as its parent, and the
    # Ticket preamble (what the Spec asks, what its blockers did) its opening prompt starts with.
    spec_run_id: int | None = None
    preamble: str = ""
    spec_number: int | None = None  # a Ticket Run's Spec (its Base fix becomes a Ticket)
    # The Spec's Ready label approves the Ticket's text (the Spec run was a daemon's, or its
    # Spec carried the label): an edit since by someone who may not label voids it.
    spec_approved: bool = False


@dataclass(frozen=True)
class Found:
    """The issue, its repository, thirdshift's clone of it fetched, the Issue branch chosen
    and the Base branch it targets, and where its Worktree goes."""

    ref: IssueRef
    repo: RepoInfo
    issue: IssueInfo
    clone: ManagedClone
    remote: Mapping[str, str]
    choice: BranchChoice
    base: str
    worktree_path: Path


@dataclass(frozen=True)
class RunScope:
    """A Run as recorded under its Lease: what every step after the Claim works from.
    ``github`` is fenced by the Lease; ``session_kind`` is the opening session's kind unless
    review feedback makes it a review (a Spec run opens with another)."""

    request: RunRequest
    record: Run
    found: Found
    keeper: LeaseKeeper
    github: GitHubPort
    ready_taken: bool
    feedback: Feedback = NO_FEEDBACK
    work_set_aside: bool = False
    session_kind: str = "implement"

    @property
    def ref(self) -> IssueRef:
        return self.found.ref

    @property
    def issue(self) -> IssueInfo:
        return self.found.issue

    @property
    def choice(self) -> BranchChoice:
        return self.found.choice

    @property
    def branch(self) -> str:
        return self.found.choice.branch

    @property
    def base(self) -> str:
        return self.found.base

    @property
    def clone(self) -> ManagedClone:
        return self.found.clone


@dataclass(frozen=True)
class Brief:
    """The opening session's kind and prompt; for a review Repair, the feedback it answers
    and the head it started from."""

    kind: str
    prompt: str
    feedback: Feedback = NO_FEEDBACK
    reviewed_from: str | None = None


@dataclass(frozen=True)
class Trail:
    """What the steps after the Claim made so far: the salvage saves from it."""

    claim: Claim
    pull: PullRequestInfo | None
    worktree: Worktree | None = None
    sessions: Sessions | None = None
    brief: Brief = field(default_factory=lambda: Brief("implement", ""))


@dataclass(frozen=True)
class RunParts:
    """A Run's collaborators. ``environ`` is the environment the root was given (pre-flight
    looks for the Harness on its PATH)."""

    settings: Settings
    github: GitHubPort
    store: Store
    session_source: SessionSource
    clones: CloneSource
    environ: Mapping[str, str]
    scrub: Scrubber
    clock: Clock


def _nothing(_run_id: int) -> None:
    return None


def _no_reason() -> str | None:
    return None


@dataclass(frozen=True)
class RunHooks:
    """``interrupt`` is set on Ctrl-C or SIGTERM (and by a lost Lease): waits end and the
    session stops. ``emit_url`` gets the pull request's (or published issue's) URL for stdout;
    ``stopped_because`` says why a daemon stopped the Run; ``on_recorded`` learns the Run's id
    as soon as it is recorded."""

    progress: Callable[[str], None]
    interrupt: threading.Event
    emit_url: Callable[[str], None]
    claimant: str = "thirdshift run"
    stopped_because: Callable[[], str | None] = field(default=_no_reason)
    on_recorded: Callable[[int], None] = field(default=_nothing)
    notifier: Notifier = NO_NOTIFIER
