"""About 580 lines: one class, because the poll and its sweep share what one poll read of GitHub
(the labellers' roles, the open pull requests, the text approvals), and splitting them would pass
that around.

One poll of one repository: record the Runs that died, sweep ``in-progress`` off issues
nobody works on, and decide which issues to take (Rescues first, then Ready issues lowest
number first), writing each pass-over reason to the Activity log. A Ready issue with
sub-issues is a Spec, taken as a Spec run; a Ticket of a Spec that a Spec run holds (or that
this poll takes) is its Spec run's to run, and is passed over naming the Spec.

Everything here asks GitHub through ``DaemonGitHub`` (or, for a watched owner's repository, the
labelled issues and open pull requests through the owner's listing, adr/0048) and the database
through the store; the rules themselves are in ``thirdshift.daemon.ready``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from thirdshift.daemon.parts import PollHooks, PollParts
from thirdshift.daemon.pickup import Pickup
from thirdshift.daemon.ports import DaemonGitHub
from thirdshift.daemon.ready import (
    blocker_reason,
    budget_reason,
    first_look,
    labeller_reason,
    lowest_first,
    pass_over_notification,
    ticket_reason,
)
from thirdshift.daemon.specs import SpecPickups
from thirdshift.errors import GitHubError, ThirdshiftError
from thirdshift.records import IssueSummary, Repository, Run, TextEdit
from thirdshift.run_states import RunKind, RunState
from thirdshift.runs import (
    ROLES_THAT_LABEL,
    IssueText,
    read_approval,
    read_feedback,
)


@dataclass(frozen=True)
class _OpenPull:
    """An open pull request as the poll's listing shows it: enough to tell whether a review
    Repair may be due."""

    number: int
    draft: bool
    author: str
    updated_at: datetime | None


@dataclass(frozen=True)
class _Verdict:
    """A pass-over reason read from GitHub, kept under an owner's listing while the issue is
    unchanged: the issue's stamp and labels then, the owner's listing generation, when it was
    read (monotonic), and whether the reason is about the labeller."""

    updated_at: datetime
    labels: tuple[str, ...]
    generation: int
    at: float
    reason: str
    labeller: bool


class RepositoryPoll:
    """Polls ``owner/name`` through ``github``, with the parts every poll of the daemon shares
    and the hooks to its daemon."""

    def __init__(
        self, owner: str, name: str, github: DaemonGitHub, parts: PollParts, hooks: PollHooks
    ) -> None:
        self._notifier = parts.notifier
        self._paused = parts.paused
        self._sweeper = parts.sweeper
        self._repository: Repository | None = None
        # number -> (GitHub's updated_at as last seen, when this daemon first saw it so)
        self._seen: dict[int, tuple[datetime, float]] = {}
        # (issue, reason) of the pass-overs announced while the issue stays labelled.
        self._announced: set[tuple[int, str]] = set()
        self._passed: set[int] = set()  # Ready issues passed over, while they stay Ready
        self._settled_at: float | None = None  # when the first issue still settling settles
        # The open pull requests as this poll listed them, and when each was last read for
        # review feedback and found none: an unchanged pull request is not read again.
        self._open_pulls: dict[int, _OpenPull] | None = None
        self._pulls_read: dict[int, datetime | None] = {}
        # number -> (updated_at, the title and body edits then): the body's cost a GraphQL
        # query, which has no conditional form, so they are asked again only once the issue
        # changed (an edit moves its updated_at).
        self._edits: dict[int, tuple[datetime, tuple[TextEdit, ...]]] = {}
        self._listings = parts.listings
        self._verdicts: dict[int, _Verdict] = {}  # under an owner's listing only
        self._fresh = False  # this poll was told to look afresh
        self.owner = owner
        self.name = name
        self._gh = github
        self._store = parts.store
        self._rules = parts.rules
        self._activity = parts.activity
        self._clock = parts.clock
        self._running_here = hooks.running_here
        self._stop_here = hooks.stop_here
        self._kept_worktree = hooks.kept_worktree

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def repository(self) -> Repository:
        """The repository's record, made on first use and kept: its id never changes, and every
        poll and Run end asks for it."""
        if self._repository is None:
            self._repository = self._store.ensure_repository(self.owner, self.name)
        return self._repository

    def reap(self) -> None:
        """Record as crashed each Run whose Lease is gone while it still says ``running``."""
        repository = self.repository()
        for run in self._store.dead_runs(repository):
            if self._running_here(run.issue_number):
                continue  # alive in this process: its keeper finds the lost Lease itself
            cause = (
                "the Run stopped without recording an ending: its process or host died (or "
                "was paused) and its Lease ran out"
            )
            if self._store.record_crash(run.id, cause):
                self._activity.line(
                    "crash",
                    f"Run {run.id} ended by a crash ({cause})",
                    repository=repository,
                    issue_number=run.issue_number,
                    run_id=run.id,
                )

    def settles_in(self, now: float) -> float | None:
        """Seconds until the first issue the last poll passed over as still settling has
        settled (by the clock's ``monotonic``); None when none was."""
        return None if self._settled_at is None else max(0.0, self._settled_at - now)

    def __call__(self, *, fresh: bool = False) -> list[Pickup]:
        """One poll: reap, sweep, and the issues to run now, in order. ``fresh``: something
        may have changed (a webhook delivery, an issue settling): an owner's listing is asked
        again, not taken from earlier in the cycle."""
        self._open_pulls = None
        self._settled_at = None
        self._fresh = fresh
        self.reap()
        repository = self.repository()
        leased = {lease.issue_number for lease in self._store.live_leases(repository)}
        rescues = self._swept(repository, leased)
        ready = self._labelled(self._rules.ready_label, "open")
        spent = self._budget_spent()
        paused = self._paused()
        pickups = self._taken(repository, ready, leased, spent or paused)
        listed = {issue.number for issue in ready}
        self._seen = {n: seen for n, seen in self._seen.items() if n in listed}
        self._verdicts = {n: v for n, v in self._verdicts.items() if n in listed}
        # Unlabelled: a new labelling is news again, for the Activity log and the team.
        self._announced = {entry for entry in self._announced if entry[0] in listed}
        for gone in self._passed - listed:
            self._activity.forget(repository, gone)
        self._passed = {number for number in self._passed if number in listed}
        if spent or paused:
            # A Rescue would fail at its first session too, and leave its issue without the
            # label a person must add again: it waits as a Ready issue does.
            for pickup in rescues:
                self._activity.pass_over(repository, pickup.issue, spent or paused or "")
            rescues = []
        taken = {pickup.number for pickup in rescues}
        return rescues + [pickup for pickup in pickups if pickup.number not in taken]

    def _swept(self, repository: Repository, leased: set[int | None]) -> list[Pickup]:
        """Each issue labelled ``in-progress`` that no live Lease holds (or that this daemon
        runs) swept: the Rescues and review Repairs that starts."""
        busy = self._labelled(self._rules.in_progress_label, "all")
        rescues: list[Pickup] = []
        for issue in busy:
            if issue.is_pull_request:
                continue
            if issue.number in leased and not self._running_here(issue.number):
                continue  # another Run holds it; that Run's daemon looks after it
            try:
                pickup = self._sweep(repository, issue)
            except ThirdshiftError as error:  # one issue's failure must not starve the rest
                self._activity.line(
                    "sweep",
                    f"could not sweep: {error}; tried again next poll",
                    repository=repository,
                    issue_number=issue.number,
                )
                continue
            if pickup is not None:
                rescues.append(pickup)
        return rescues

    def _taken(
        self,
        repository: Repository,
        ready: tuple[IssueSummary, ...],
        leased: set[int | None],
        waiting: str | None,
    ) -> list[Pickup]:
        """The Ready issues to take, lowest first, each a Spec run when it is a Spec; every
        other one is passed over with its reason (``waiting``: the one for all of them)."""
        roles: dict[str, str] = {}
        pickups: list[Pickup] = []
        now = self._clock.monotonic()
        specs = SpecPickups(self.owner, self.name, self._gh, self._store, self._activity)
        tickets = specs.held_tickets(repository)
        for issue in lowest_first(ready):
            if issue.number in leased or self._running_here(issue.number):
                continue
            labeller: list[str] = []
            reason = (
                waiting
                or ticket_reason(tickets.get(issue.number))
                or self._pass_over_reason(repository, issue, roles, now, labeller)
            )
            if reason is None:
                pickups.append(Pickup(issue.number, merge=self._merges(issue, roles)))
            else:
                self._passed_over(repository, issue, reason, reason in labeller)
        return specs.taken(repository, pickups, tickets, self._passed)

    def _labelled(self, label: str, state: str) -> tuple[IssueSummary, ...]:
        """The issues carrying ``label`` in ``state``: from the owner's listing where it is
        listed so, else from the repository's own."""
        if self._listings is not None:
            listed = self._listings.labelled(self.owner, self.name, label, state, fresh=self._fresh)
            if listed is not None:
                return listed
        return self._gh.issues_labelled(self.owner, self.name, label, state=state)

    def _open_pull(self, number: int) -> _OpenPull | None:
        """The open pull request ``number`` as this poll's one list of them shows it."""
        if self._open_pulls is None:  # one conditional list per poll, for every issue
            own = None
            if self._listings is not None:
                own = self._listings.own_open_pulls(self.owner, self.name, fresh=self._fresh)
            if own is not None:
                pulls = [
                    _OpenPull(e.issue.number, e.draft, e.author, e.issue.updated_at) for e in own
                ]
            else:
                listed = self._gh.open_pulls(self.owner, self.name)
                pulls = [_OpenPull(p.number, p.draft, p.author, p.updated_at) for p in listed]
            self._open_pulls = {pull.number: pull for pull in pulls}
        return self._open_pulls.get(number)

    def _passed_over(
        self, repository: Repository, issue: IssueSummary, reason: str, labeller: bool
    ) -> None:
        """The pass-over in the Activity log; one about its labeller (``labeller``), the first
        time it is written, to the team too."""
        written = self._activity.pass_over(repository, issue.number, reason)
        self._passed.add(issue.number)
        announce = (issue.number, reason)
        if written and labeller and announce not in self._announced:
            # A person labelled it and waits: tell the team once, however the reason flips
            # meanwhile (a comment makes it "changed recently" for a while).
            self._announced.add(announce)
            self._notifier.notify(
                pass_over_notification(repository.full_name, issue.number, issue.html_url, reason)
            )

    def work_paused(self) -> str | None:
        """Why no session may start on this repository now (its daily budget is spent, its
        Harness's provider is down), or None."""
        return self._budget_spent() or self._paused()

    def _budget_spent(self) -> str | None:
        if self._rules.daily_budget_usd is None:
            return None
        day = self._clock.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        spent = self._store.repository_cost(self.owner, self.name, day, day + timedelta(days=1))
        return budget_reason(spent, self._rules, self.full_name)

    def _pass_over_reason(
        self,
        repository: Repository,
        issue: IssueSummary,
        roles: dict[str, str],
        now: float,
        labeller: list[str],
    ) -> str | None:
        """Why the issue is passed over now, or None; a reason about the labeller's permission
        is also put in ``labeller``."""
        seen = self._seen.get(issue.number)
        if seen is None or seen[0] != issue.updated_at:
            seen = (issue.updated_at, now)
            self._seen[issue.number] = seen
        # The longer of what this daemon saw and what GitHub's stamp says by this host's
        # clock: a daemon that runs on (or a host whose clock lags) still settles by its own
        # watch, and `--once` from cron, which sees each issue once, by the stamp.
        unchanged_for = max(timedelta(seconds=now - seen[1]), self._clock.now() - issue.updated_at)
        reason = first_look(issue, self._rules, unchanged_for)
        if reason is not None:
            if unchanged_for < self._rules.settle:
                settles = now + (self._rules.settle - unchanged_for).total_seconds()
                if self._settled_at is None or settles < self._settled_at:
                    self._settled_at = settles
            return reason
        listings = self._listings
        if listings is None or not listings.covers(self.owner):
            return self._read_reason(repository, issue, roles, labeller)
        # Under the owner's listing an unchanged issue is not read again each cycle: what the
        # listing cannot show (a blocker closed, a labeller's role) is read every
        # recheck_seconds, and after any look afresh at the owner (a webhook delivery).
        generation = listings.generation(self.owner)
        kept = self._verdicts.get(issue.number)
        if (
            kept is not None
            and not self._fresh
            and kept.updated_at == issue.updated_at
            and kept.labels == issue.labels
            and kept.generation == generation
            and now - kept.at < listings.recheck_seconds
        ):
            if kept.labeller:
                labeller.append(kept.reason)
            return kept.reason
        found: list[str] = []
        reason = self._read_reason(repository, issue, roles, found)
        labeller.extend(found)
        if reason is None:
            self._verdicts.pop(issue.number, None)
        else:
            self._verdicts[issue.number] = _Verdict(
                issue.updated_at, issue.labels, generation, now, reason, bool(found)
            )
        return reason

    def _read_reason(
        self,
        repository: Repository,
        issue: IssueSummary,
        roles: dict[str, str],
        labeller: list[str],
    ) -> str | None:
        """Why the issue is passed over, from what GitHub says now of its labeller, its text
        and its blockers; or None. A reason about the labeller is also put in ``labeller``."""
        login = self._gh.labelled_by(self.owner, self.name, issue.number, self._rules.ready_label)
        role = None
        if login is not None:
            if login not in roles:
                roles[login] = self._role(login)
            role = roles[login]
        reason = labeller_reason(login, role, self._rules)
        if reason is not None:
            labeller.append(reason)
            return reason
        reason = self._text_reason(repository, issue, roles)
        if reason is not None:
            return reason
        return blocker_reason(self._gh.blockers(self.owner, self.name, issue.number))

    def _text_reason(
        self,
        repository: Repository,
        issue: IssueSummary,
        roles: dict[str, str],
        latest: Run | None = None,
    ) -> str | None:
        """Why the issue's text is not the one approved (an edit after the Ready label by
        someone who may not label, or text changed since its last Run), or None."""

        def read_edits() -> tuple[TextEdit, ...]:
            known = self._edits.get(issue.number)
            if known is not None and known[0] == issue.updated_at:
                return known[1]
            edits = self._gh.text_edits(self.owner, self.name, issue.number)
            # Kept only for a stamp some seconds old: GitHub's count whole seconds, and an
            # edit in the same second would not move it.
            if self._clock.now() - issue.updated_at > timedelta(seconds=5):
                self._edits[issue.number] = (issue.updated_at, edits)
            return edits

        def may_label(login: str) -> bool:
            if login not in roles:
                roles[login] = self._role(login)
            return roles[login] in ROLES_THAT_LABEL

        return read_approval(
            self._gh,
            IssueText(self.owner, self.name, issue.number, issue.title, issue.body),
            ready_label=self._rules.ready_label,
            earlier=latest or self._store.latest_run(repository, issue.number),
            may_label=may_label,
            read_edits=read_edits,
            own_login=self._gh.authenticated_login(),
        ).reason

    def _merges(self, issue: IssueSummary, roles: dict[str, str]) -> bool:
        """Whether the Ready issue runs as a Merge run: it carries the merge label, added by
        someone who may merge (write, maintain or admin) or by thirdshift itself. Triage may
        say what the factory works on, not what it merges."""
        label = self._rules.merge_label
        if label.lower() not in {name.lower() for name in issue.labels}:
            return False
        login = self._gh.labelled_by(self.owner, self.name, issue.number, label)
        if login is None:
            return False
        if login not in roles:
            roles[login] = self._role(login)
        return roles[login] in ("write", "maintain", "admin")

    def _role(self, login: str) -> str:
        if login.lower() == self._gh.authenticated_login().lower():
            # thirdshift's own label (a Base fix, an issue it made Ready again): a GitHub App
            # is no collaborator, so GitHub would answer it has no permission at all.
            return "write"
        try:
            return self._gh.permission(self.owner, self.name, login)
        except GitHubError as error:
            if error.status in (403, 404):
                return "none"
            raise

    def _sweep(self, repository: Repository, issue: IssueSummary) -> Pickup | None:
        """An issue labelled ``in-progress`` that no live Lease holds: stop our Run on it if it
        was closed; otherwise take the label off a closed issue a Run of ours worked on, start
        a Rescue of the issue of a crashed Run that left work (on origin, or in a Worktree
        here), or give back the Ready label of one that left nothing. An issue whose last Run
        ended (or that no Run of ours touched) is left to people. Label writes are made under
        the issue's Lease, so they never cross a Run another daemon starts meanwhile."""
        number = issue.number
        if self._running_here(number):
            if issue.state == "closed":
                self._stop_here(number, "the issue was closed during the Run")
            return None
        latest = self._store.latest_run(repository, number)
        busy = self._label_named(issue, self._rules.in_progress_label)
        dead = self._store.unrecorded_claim(repository, number)
        if (
            issue.state == "open"
            and dead is not None
            and (latest is None or latest.started_at < dead.acquired_at)
        ):
            with self._holding(repository, number, latest) as held:
                if held:
                    self._hand_back(
                        repository,
                        number,
                        busy,
                        f"a Run ({dead.owner}) died after claiming the issue and before it was "
                        "recorded",
                    )
            return None
        if latest is None:
            return None
        if issue.state == "closed":
            with self._holding(repository, number, latest) as held:
                if held:
                    self._gh.remove_label(self.owner, self.name, number, busy)
                    self._activity.line(
                        "sweep",
                        f"took {busy} off the closed issue",
                        repository=repository,
                        issue_number=number,
                    )
            return None
        if latest.parent_run_id is not None:
            return None  # a Ticket Run: its Spec run (or that one's Rescue) continues it
        if latest.state != RunState.CRASHED:
            pickup = self._review_pickup(repository, latest)
            if pickup is not None:
                reason = self._text_reason(repository, issue, {}, latest)
                if reason is not None:
                    self._activity.pass_over(repository, number, reason)
                    return None
            return pickup
        return self._rescue(repository, issue, latest, busy)

    def _rescue(
        self, repository: Repository, issue: IssueSummary, latest: Run, busy: str
    ) -> Pickup | None:
        """The Rescue of the issue's Crashed Run ``latest`` when it left work (on origin, or in
        a Worktree here) and the issue's text is still the one approved; the Ready label given
        back when it left nothing."""
        number = issue.number
        branch = latest.issue_branch
        if branch is not None and (
            self._gh.branch_exists(self.owner, self.name, branch) or self._kept_worktree(branch)
        ):
            reason = self._text_reason(repository, issue, {}, latest)
            if reason is not None:  # the crashed Run's approval is void: a person relabels
                self._activity.pass_over(repository, number, reason)
                return None
            if latest.kind == RunKind.SPEC:  # its Tickets' landings are in the records
                merge = self._merges(issue, {})
                return Pickup(number, rescue_of=latest.id, merge=merge, spec=True)
            return Pickup(number, rescue_of=latest.id, merge=latest.kind == RunKind.MERGE)
        # Nothing reached origin: the issue is Ready again, for whoever polls first.
        with self._holding(repository, number, latest) as held:
            if held:
                self._hand_back(
                    repository,
                    number,
                    busy,
                    f"Run {latest.id} crashed before anything reached origin",
                    run_id=latest.id,
                )
        return None

    def _hand_back(
        self, repository: Repository, number: int, busy: str, why: str, run_id: int | None = None
    ) -> None:
        """Ready again, for whoever polls first (under the sweep's Lease)."""
        self._gh.add_label(self.owner, self.name, number, self._rules.ready_label)
        self._gh.remove_label(self.owner, self.name, number, busy)
        self._activity.line(
            "sweep",
            f"{why}; {busy} replaced by {self._rules.ready_label}",
            repository=repository,
            issue_number=number,
            run_id=run_id,
        )

    def _review_pickup(self, repository: Repository, latest: Run) -> Pickup | None:
        """A review Repair when the pull request ``latest`` opened (and left ready) is still
        open and has review feedback no Run took, within its budget. Every read is
        conditional: a pull request nobody reviews costs nothing."""
        pull_number = latest.pull_request_number
        if latest.state not in (RunState.SUCCEEDED, RunState.REFUSED) or pull_number is None:
            return None
        if latest.kind == RunKind.SPEC:
            return None  # a Spec PR's review feedback waits for a person (docs: Spec runs)
        if self._store.review_repairs(repository, pull_number) >= self._rules.max_review_repairs:
            return None
        pull = self._open_pull(pull_number)
        me = self._gh.authenticated_login()
        if pull is None or pull.draft or pull.author.lower() != me.lower():
            return None
        if pull.updated_at is not None and self._pulls_read.get(pull_number) == pull.updated_at:
            return None  # nothing was reviewed or said since it was read and found wanting
        feedback = read_feedback(
            self._gh,
            self.owner,
            self.name,
            pull_number,
            me=me,
            handle=self._rules.review_handle,
            role_of=self._role,
            handled=self._store.handled_feedback(repository, pull_number),
        )
        if not feedback:
            # Remembered only once every read succeeded, and not for a change of the last few
            # seconds: GitHub's stamps count whole seconds, and a review in the same second
            # would not move them.
            settled = pull.updated_at is not None and (
                self._clock.now() - pull.updated_at > timedelta(seconds=5)
            )
            if settled:
                self._pulls_read[pull_number] = pull.updated_at
            return None
        self._pulls_read.pop(pull_number, None)  # taken or not, look again next time
        return Pickup(latest.issue, review_of=latest.id)

    @contextmanager
    def _holding(self, repository: Repository, number: int, latest: Run | None) -> Iterator[bool]:
        """The issue's Lease for one sweep, if nobody holds it and ``latest`` is still the
        issue's newest Run (no Run started since the poll looked; None: still none)."""
        owner = f"{self._sweeper}:sweep:{uuid.uuid4().hex[:8]}"
        # Longer than any wait of the poll's GitHub adapter (a rate limit, 900 s at most), so
        # the Lease cannot lapse between the sweep's two label writes.
        lease = self._store.acquire_lease(repository, number, owner, timedelta(seconds=1200))
        if lease is None:
            yield False
            return
        try:
            newest = self._store.latest_run(repository, number)
            yield (newest.id if newest else None) == (latest.id if latest else None)
        finally:
            self._store.release_lease(lease)

    @staticmethod
    def _label_named(issue: IssueSummary, label: str) -> str:
        """The label as the issue spells it (labels match without regard to case)."""
        return next((lb for lb in issue.labels if lb.lower() == label.lower()), label)
