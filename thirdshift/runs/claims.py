"""A Claim: thirdshift's hold on an issue, in two halves that go together.

The Lease, in the database, is taken before a Run changes anything, renewed while it lives and
given up when it ends (ADR 0003). The label half, on GitHub, swaps ``ready-for-agent`` for
``in-progress`` so people (and other daemons) see who is on the issue.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol, TypeVar, cast

from thirdshift.clock import Clock, SystemClock
from thirdshift.errors import LeaseLost, NotClaimed, ThirdshiftError
from thirdshift.issue_url import IssueRef
from thirdshift.records import IssueInfo, Lease, Repository, Run, TextEdit
from thirdshift.runs.approval import approval_reason, text_sha256
from thirdshift.runs.ports import READS, ApprovalReads, GitHubPort
from thirdshift.store import Store
from thirdshift.store.retry import backoff, retrying


@dataclass(frozen=True)
class Claim:
    """The GitHub half of a Claim as this Run made it: whether it took ``ready-for-agent``
    away (a release gives it back) and whether it added ``in-progress`` itself (only then may
    a release take it off again)."""

    had_ready_label: bool
    added_label: bool


class LeaseKeeper:
    """The database half of a Claim: taken before anything changes, renewed every third of its
    length while the Run lives, given up when the Run ends. A Run that finds the Lease held
    elsewhere stops before it starts; one that loses it (another Run took it over, or renewal
    kept failing until it expired) is told through ``on_lost`` and its fence (``check``)
    refuses every later write. A store error is not a lost Lease: the fence asks again while
    the Lease's last known expiry is ahead, and the release at the end is tried again for up to
    ``release_seconds`` (adr/0028)."""

    def __init__(
        self,
        store: Store,
        repository: Repository,
        issue_number: int,
        seconds: float,
        *,
        on_lost: Callable[[], None] = lambda: None,
        owner: str = "",
        clock: Clock | None = None,
        release_seconds: float = 0.0,
    ) -> None:
        self._clock = clock or SystemClock()
        self._release_seconds = release_seconds
        # When this process last knew the Lease held, on its own monotonic clock: taken before
        # the asking, so the Lease's real expiry is never earlier than this plus its length.
        self._known_until = 0.0
        self._owner_name = owner
        self._store = store
        self._repository = repository
        self._issue_number = issue_number
        self._ttl = timedelta(seconds=seconds)
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._lease: Lease | None = None
        self._thread: threading.Thread | None = None
        self.lost = False

    def __enter__(self) -> Lease:
        # One owner per Run: two Runs in one process must never share a Lease.
        who = self._owner_name or "thirdshift"
        owner = f"{who}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        asked = self._clock.monotonic()
        lease = self._store.acquire_lease(self._repository, self._issue_number, owner, self._ttl)
        if lease is None:
            held = self._store.lease_of(self._repository, self._issue_number)
            holder = f"{held.owner} until {held.expires_at:%H:%M:%S} UTC" if held else "another Run"
            raise NotClaimed(
                f"issue #{self._issue_number} is claimed by {holder}; wait for that Run to end "
                "(or for its Lease to expire if it died)"
            )
        self._lease = lease
        self._known_until = asked + self._ttl.total_seconds()
        self._thread = threading.Thread(target=self._renew, name="thirdshift-lease", daemon=True)
        self._thread.start()
        return lease

    def check(self) -> None:
        """The fence, called right before every write to GitHub and every push: raises
        LeaseLost unless the database still says this Run holds the Lease."""
        lease = self._lease
        if self.lost or lease is None or not self._held(lease):
            self._lose()
            raise self.lost_error()

    def _held(self, lease: Lease) -> bool:
        """Whether the database says the Lease is held. While it cannot say (a store error:
        unknown, not lost), ask again with backoff until the Lease's last known expiry; past
        it, the Lease may be another Run's, so it counts as lost."""
        attempt = 0
        while True:
            try:
                held = self._store.lease_held(lease)
            except ThirdshiftError:
                delay = backoff(attempt)
                if self._clock.monotonic() + delay >= self._known_until:
                    return False
                attempt += 1
                self._clock.sleep(delay)
                continue
            return held

    def lost_error(self) -> LeaseLost:
        """The cause of a Run that lost its Lease."""
        if self._issue_number == 0:  # an Architect run's: the repository's, not an issue's
            return LeaseLost(
                "lost the repository's Architect Lease: another Architect run holds it now "
                "(this one was paused or cut off past its Lease); it changed nothing more on "
                "GitHub"
            )
        return LeaseLost(
            f"lost the Lease on #{self._issue_number}: another Run holds the issue now (this "
            "one was paused or cut off past its Lease); it changed nothing more on GitHub"
        )

    def _lose(self) -> None:
        if not self.lost:
            self.lost = True
            self._on_lost()

    def _renew(self) -> None:
        wait = self._ttl.total_seconds() / 3
        attempt = 0
        while not self._stop.wait(wait):
            lease = self._lease
            if lease is None:
                return
            asked = self._clock.monotonic()
            try:
                renewed = self._store.renew_lease(lease, self._ttl)
            except ThirdshiftError:
                # Tried again soon: the Lease is still ours until its expiry.
                wait = min(backoff(attempt), self._ttl.total_seconds() / 3)
                attempt += 1
                continue
            if renewed is None:
                self._lose()
                return
            wait, attempt = self._ttl.total_seconds() / 3, 0
            self._lease = renewed
            self._known_until = asked + self._ttl.total_seconds()

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        lease = self._lease
        if lease is not None and not self.lost:
            # An interrupt (a ThirdshiftError) ends the trying too: it expires by itself.
            with contextlib.suppress(ThirdshiftError):
                retrying(
                    lambda: self._store.release_lease(lease),
                    seconds=self._release_seconds,
                    sleep=self._clock.sleep,
                    monotonic=self._clock.monotonic,
                )


P = TypeVar("P")


class FencedGitHub(GitHubPort, Protocol):
    """The whole of GitHub under a Lease (``fence_github``), with the fence itself in reach for
    a write made elsewhere."""

    def fence(self) -> None:
        """Raise ``LeaseLost`` unless the Lease is still held (before a write elsewhere)."""
        ...


class _Fenced:
    """GitHub, in any of its roles, for a Run under a Lease: every method but the ``READS``
    asks the fence first, so a Run that lost its Lease (paused past it, say) writes nothing
    over its successor's work. A method nobody sorted into ``READS`` counts as a write."""

    def __init__(self, github: object, fence: Callable[[], None]) -> None:
        self._github = github
        self.fence = fence

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # never forwarded: a copy asks before __init__ has run
            raise AttributeError(name)
        found = getattr(self._github, name)
        if name in READS:
            return found

        @functools.wraps(found)
        def write(*args: Any, **kwargs: Any) -> Any:
            self.fence()
            return found(*args, **kwargs)

        return write


def fenced(github: P, fence: Callable[[], None]) -> P:
    """``github`` (one role, several, or the whole ``GitHubPort``) with ``fence`` asked before
    each of its writes; reads pass."""
    return cast(P, _Fenced(github, fence))


def fence_github(github: GitHubPort, fence: Callable[[], None]) -> FencedGitHub:
    """The whole ``GitHubPort`` fenced, its ``fence()`` in reach."""
    return cast(FencedGitHub, _Fenced(github, fence))


def add_in_progress(github: GitHubPort, ref: IssueRef, label: str) -> None:
    """Put the in-progress ``label`` on the issue, making the repository's label first."""
    github.ensure_label(ref.owner, ref.repo, label, "fbca04", "thirdshift is working on this issue")
    github.add_label(ref.owner, ref.repo, ref.number, label)


def claim_labels(
    github: GitHubPort,
    ref: IssueRef,
    issue: IssueInfo,
    *,
    ready_label: str,
    in_progress_label: str,
    say: Callable[[str], None],
    ready_taken: bool = False,
) -> Claim:
    """Put ``in-progress`` in place of ``ready-for-agent``, one label at a time. An issue
    already in progress and no longer ready is left as it is. ``ready_taken``: the Run took the
    Ready label off already, as its claim against Runs sharing no database."""
    ready, busy = ready_label, in_progress_label
    if ready_taken:  # the Run swapped both labels before it was recorded
        return Claim(had_ready_label=True, added_label=True)
    labels = list(issue.labels)
    had_ready = any(label.lower() == ready.lower() for label in labels)
    had_busy = any(label.lower() == busy.lower() for label in labels)
    if had_busy and not had_ready:
        return Claim(had_ready_label=False, added_label=False)
    # One label at a time, never the whole set: a label a person adds meanwhile must stay.
    if not had_busy:
        add_in_progress(github, ref, busy)
    if had_ready and not ready_taken:
        ready_name = next(label for label in labels if label.lower() == ready.lower())
        github.remove_label(ref.owner, ref.repo, ref.number, ready_name)
    say(f"labelling #{ref.number} {busy}" + (f", in place of {ready}" if had_ready else ""))
    return Claim(had_ready_label=had_ready, added_label=not had_busy)


CLAIM_MARKER = "<!-- thirdshift:claim -->"


def claim_comment(
    github: GitHubPort,
    ref: IssueRef,
    *,
    run_id: int,
    branch: str,
    claimant: str,
    continuation: bool,
    rescue_of: int | None,
) -> None:
    """The Claim's one marked comment: who works on the issue, as which Run, on which branch.
    A later Run edits it, so an issue never collects one per Run."""
    if rescue_of is not None:
        how = f", taking over from Run {rescue_of}, which crashed"
    elif continuation:
        how = ", continuing the work already on that branch"
    else:
        how = ""
    body = (
        f"{CLAIM_MARKER}\nthirdshift is working on this issue as Run {run_id} ({claimant}), on "
        f"branch `{branch}`{how}. It ends with a pull request ready for review, or with a "
        "comment here saying what stopped it and where the work is."
    )
    github.upsert_marked_comment(ref.owner, ref.repo, ref.number, CLAIM_MARKER, body)


def text_not_approved(
    github: ApprovalReads,
    ref: tuple[str, str, int],
    *,
    title: str,
    body: str,
    ready_label: str,
    earlier: Run | None,
    may_label: Callable[[str], bool],
    read_edits: Callable[[], tuple[TextEdit, ...]] | None = None,
    own_login: str | None = None,
) -> str | None:
    """Why the issue's title and body are not approved by the Ready label (``approval``), or
    None. ``earlier``: the issue's latest Run, whose recorded text a changed one must be
    approved over. ``read_edits``: how the edits are read (a daemon keeps them a while)."""
    owner, name, number = ref
    labelling = github.labelling(owner, name, number, ready_label)
    edits = read_edits() if read_edits else github.text_edits(owner, name, number)
    return approval_reason(
        ready_label=ready_label,
        labelling=labelling,
        edits=edits,
        may_label=may_label,
        text_now=text_sha256(title, body),
        earlier_text=earlier.text_sha256 if earlier else None,
        earlier_run=earlier.id if earlier else None,
        earlier_started_at=earlier.started_at if earlier else None,
        own_login=own_login,
    )
