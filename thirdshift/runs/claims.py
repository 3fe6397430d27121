"""A Claim: thirdshift's hold on an issue, in two halves that go together.

The Lease, in the database, is taken before a Run changes anything, renewed while it lives and
given up when it ends (ADR 0003). The label half, on GitHub, swaps ``ready-for-agent`` for
``in-progress`` so people (and other daemons) see who is on the issue.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from thirdshift.errors import ThirdshiftError
from thirdshift.issue_url import IssueRef
from thirdshift.records import IssueInfo, Lease, Repository
from thirdshift.runs.ports import GitHubPort
from thirdshift.store import Store


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
    elsewhere stops before it starts."""

    def __init__(
        self, store: Store, repository: Repository, issue_number: int, seconds: float
    ) -> None:
        self._store = store
        self._repository = repository
        self._issue_number = issue_number
        self._ttl = timedelta(seconds=seconds)
        self._stop = threading.Event()
        self._lease: Lease | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Lease:
        # One owner per Run: two Runs in one process must never share a Lease.
        owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        lease = self._store.acquire_lease(self._repository, self._issue_number, owner, self._ttl)
        if lease is None:
            held = self._store.lease_of(self._repository, self._issue_number)
            holder = f"{held.owner} until {held.expires_at:%H:%M:%S} UTC" if held else "another Run"
            raise ThirdshiftError(
                f"issue #{self._issue_number} is claimed by {holder}; wait for that Run to end "
                "(or for its Lease to expire if it died)"
            )
        self._lease = lease
        self._thread = threading.Thread(target=self._renew, name="thirdshift-lease", daemon=True)
        self._thread.start()
        return lease

    def _renew(self) -> None:
        while not self._stop.wait(self._ttl.total_seconds() / 3):
            if self._lease is None:
                return
            try:
                self._lease = self._store.renew_lease(self._lease, self._ttl)
            except ThirdshiftError:
                continue  # the next renewal tries again; the Lease is still ours until expiry

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._lease is not None:
            with contextlib.suppress(ThirdshiftError):  # it expires by itself
                self._store.release_lease(self._lease)


def claim_labels(
    github: GitHubPort,
    ref: IssueRef,
    issue: IssueInfo,
    *,
    ready_label: str,
    in_progress_label: str,
    say: Callable[[str], None],
) -> Claim:
    """Put ``in-progress`` in place of ``ready-for-agent`` (one request keeping every other
    label). An issue already in progress and no longer ready is left as it is."""
    ready, busy = ready_label, in_progress_label
    labels = list(issue.labels)
    had_ready = any(label.lower() == ready.lower() for label in labels)
    had_busy = any(label.lower() == busy.lower() for label in labels)
    if had_busy and not had_ready:
        return Claim(had_ready_label=False, added_label=False)
    if not had_busy:
        github.ensure_label(
            ref.owner, ref.repo, busy, "fbca04", "thirdshift is working on this issue"
        )
    kept = [label for label in labels if label.lower() not in (ready.lower(), busy.lower())]
    github.set_issue_labels(ref.owner, ref.repo, ref.number, [*kept, busy])
    say(f"labelling #{ref.number} {busy}" + (f", in place of {ready}" if had_ready else ""))
    return Claim(had_ready_label=had_ready, added_label=not had_busy)
