"""A Spec run's Claim (adr/0032): under the Spec's Lease, the Spec still wanted and its text
approved (as for a Run), the Ready label taken off, the Spec branch pinned (made from the Base
branch when new) and the Spec run recorded with it; then in-progress and the one claim comment
on the Spec. The landings a crash kept from the records are the Ticket loop's to record
(``TicketReads.settle``), before each of its decisions."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime

from thirdshift.errors import Interrupted, ThirdshiftError
from thirdshift.home import Home
from thirdshift.issue_url import IssueRef
from thirdshift.records import IssueInfo, Lease, RepoInfo, Repository, Run
from thirdshift.run_states import RunKind
from thirdshift.runs.fence import fenced
from thirdshift.runs.lease import LeaseKeeper
from thirdshift.runs.rules.approval import text_sha256
from thirdshift.runs.scope import RunHooks, RunParts, RunRequest
from thirdshift.runs.spec.branch import pin_spec_branch
from thirdshift.runs.spec.brief import IssueSpec
from thirdshift.runs.spec.pull import SpecPull
from thirdshift.runs.spec.review import ReviewPlace
from thirdshift.runs.steps.claim import ClaimStep, claim_comment, claim_labels
from thirdshift.runs.steps.take_lease import LeaseStep
from thirdshift.sessions.spec_preamble import SpecBrief


@dataclass(frozen=True)
class SpecRequest:
    """What to run: the Spec, how many Tickets at once, and whether the Spec PR is merged."""

    spec: IssueRef
    parallel: int = 3
    merge: bool = False
    base: str | None = None
    # A daemon's, checked again under the Spec's Lease as for a Run: the Spec still Ready
    # (``expect_ready``), or that crashed Spec run still its newest (``rescue_of``).
    expect_ready: bool = False
    rescue_of: int | None = None

    def as_run(self) -> RunRequest:
        """The request as the Run's own checks under the Lease read it."""
        return RunRequest(
            issue=self.spec,
            merge=self.merge,
            base=self.base,
            expect_ready=self.expect_ready,
            rescue_of=self.rescue_of,
        )


@dataclass(frozen=True)
class Pinned:
    """The Spec run as recorded under the Spec's Lease."""

    repository: Repository
    record: Run
    branch: str
    base: str
    pull: SpecPull
    spec: IssueSpec
    place: ReviewPlace
    continued: bool  # the Spec branch was on origin already (an earlier Spec run's)
    approved: bool  # by the Spec's Ready label (a daemon's Spec run, or the Spec carried it)


@dataclass(frozen=True)
class SpecClaim:
    """Claims a Spec for a Spec run, on GitHub and in the database."""

    parts: RunParts
    hooks: RunHooks

    def say(self, line: str) -> None:
        self.hooks.progress(self.parts.scrub(line))

    def leases(self) -> LeaseStep:
        parts, hooks = self.parts, self.hooks
        return LeaseStep(
            parts.github, parts.store, parts.settings, parts.clock, hooks.interrupt, hooks.claimant
        )

    def take(
        self,
        request: SpecRequest,
        repo: RepoInfo,
        repository: Repository,
        issue: IssueInfo,
        keeper: LeaseKeeper,
        lease: Lease,
    ) -> tuple[Pinned, bool]:
        """Under the Lease: the checks, the Ready label off, the Spec branch pinned and the
        Spec run recorded; with whether the Ready label was taken. An error before the record
        gives the label back (best effort) and is raised, having recorded nothing."""
        parts, ref, leases = self.parts, request.spec, self.leases()
        # As for a Run: a daemon's Spec is still what its poll saw, and its text approved.
        issue = leases.still_wanted(request.as_run(), repository, issue)
        labelled_at = leases.check_approval(request.as_run(), repository, issue)
        if self.hooks.interrupt.is_set():  # before the Claim: nothing changed
            raise Interrupted("interrupted")
        claim = ClaimStep(
            parts.github,
            parts.store,
            parts.settings,
            parts.session_source,
            parts.scrub,
            self.say,
            self.hooks.claimant,
        )
        taken = claim.take_ready(ref, issue, keeper.check)
        try:
            approved = request.expect_ready or request.rescue_of is not None or taken is not None
            pinned = self._pin(
                request,
                repo,
                repository,
                lease,
                keeper,
                issue,
                approved=approved,
                labelled_at=labelled_at,
            )
            return pinned, taken is not None
        except ThirdshiftError:
            if taken is not None:  # the Spec is Ready again, as it was
                with suppress(ThirdshiftError):
                    parts.github.add_label(ref.owner, ref.repo, ref.number, taken)
            raise

    def _pin(
        self,
        request: SpecRequest,
        repo: RepoInfo,
        repository: Repository,
        lease: Lease,
        keeper: LeaseKeeper,
        issue: IssueInfo,
        *,
        approved: bool,
        labelled_at: datetime | None,
    ) -> Pinned:
        """The Spec branch chosen (and made from the Base branch when new) and the Spec run
        recorded with it, under the Lease."""
        parts, ref = self.parts, request.spec
        base = request.base or repo.default_branch
        clone = parts.clones(ref, repo)
        choice = pin_spec_branch(
            parts.github, clone, ref, repo, base, parts.settings.home, keeper.check
        )
        if choice.made:
            self.say(f"made the Spec branch {choice.branch} from {base}")
        record = parts.store.start_run_under(
            lease,
            repository,
            ref.number,
            kind=RunKind.SPEC,
            base_branch=base,
            issue_branch=choice.branch,
            harness=parts.session_source.harness_name,
            model=parts.session_source.model,
            text_sha256=text_sha256(issue.title, issue.body),
            ready_labelled_at=labelled_at,
        )
        if record is None:
            raise keeper.lost_error()
        self.hooks.on_recorded(record.id)
        self.say(f"Spec run {record.id} on {ref}: {issue.title}, into {choice.branch}")
        if request.rescue_of is not None:
            self.say(f"a Rescue of Spec run {request.rescue_of}, which crashed")
        gh = fenced(parts.github, keeper.check)
        pull = SpecPull(gh, ref, parts.scrub(issue.title), choice.branch, base, self.say)
        brief = SpecBrief(ref.number, issue.title, issue.body)
        spec = IssueSpec(ref.owner, ref.repo, brief)
        path = Home(parts.settings.home).worktree(repo.owner, repo.name, choice.branch)
        place = ReviewPlace(ref, repo, issue, clone, choice.branch, base, keeper, path)
        return Pinned(
            repository, record, choice.branch, base, pull, spec, place, not choice.made, approved
        )

    def announce(self, request: SpecRequest, pinned: Pinned, ready_taken: bool) -> None:
        """The Spec's Claim on GitHub: in-progress (in place of the Ready label, taken off
        already when it had it) and the one claim comment saying which Spec run works on it."""
        parts, ref, place = self.parts, request.spec, pinned.place
        gh = fenced(parts.github, place.keeper.check)
        claim_labels(
            gh,
            ref,
            place.issue,
            ready_label=parts.settings.ready_label,
            in_progress_label=parts.settings.in_progress_label,
            say=self.say,
            ready_taken=ready_taken,
        )
        claim_comment(
            gh,
            ref,
            run_id=pinned.record.id,
            branch=pinned.branch,
            claimant=parts.scrub(self.hooks.claimant),
            continuation=pinned.continued,
            rescue_of=request.rescue_of,
        )
