"""A Run: one issue to a pull request thirdshift stands behind, or a Failed run that loses
nothing.

Read top to bottom, ``Delivery`` is the list of its steps (``runs.steps``, adr/0031):
pre-flight before anything is created or labelled; the branch choice; under the Lease, the
checks that the issue is still wanted and approved, kept work, the review feedback waiting and
the Claim; then a Worktree from thirdshift's own clone, the brief, the opening session, the
deterministic takeover (push, open or update the pull request from the agent's file, mark it
ready), the Repair loop, and the finish (for a Merge run after the Self-merge). Any other ending
is the salvage: a Failed run (``thirdshift.runs.failed_run``), with a Base fix for checks red on
the Base branch.
"""

from __future__ import annotations

from dataclasses import replace

from thirdshift.errors import Interrupted, NotClaimed
from thirdshift.records import Lease, Repository
from thirdshift.runs.claims import Claim
from thirdshift.runs.fence import fenced
from thirdshift.runs.lease import LeaseKeeper
from thirdshift.runs.notices import Announcer
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.scope import Found, RunHooks, RunParts, RunRequest, RunScope, RunTools, Trail
from thirdshift.runs.steps.base_fix import BaseFixStep
from thirdshift.runs.steps.branch import BranchChoiceStep
from thirdshift.runs.steps.brief import BriefStep
from thirdshift.runs.steps.claim import ClaimStep
from thirdshift.runs.steps.feedback import FeedbackStep
from thirdshift.runs.steps.finish import FinishStep
from thirdshift.runs.steps.kept_work import KeptWorkStep
from thirdshift.runs.steps.preflight import preflight
from thirdshift.runs.steps.repair import RepairStep
from thirdshift.runs.steps.review_reply import ReviewReplyStep
from thirdshift.runs.steps.salvage import SalvageStep
from thirdshift.runs.steps.session import SessionStep
from thirdshift.runs.steps.take_lease import LeaseStep
from thirdshift.runs.steps.takeover import TakeoverStep
from thirdshift.runs.steps.worktree import WorktreeStep

__all__ = ["Delivery", "RunRequest"]


class Delivery:
    """Runs one issue. The composition root builds it, with real adapters or (for the
    orchestration tests) the GitHub fake, scripted sessions and bare repositories on disk."""

    def __init__(self, parts: RunParts, hooks: RunHooks) -> None:
        self._parts, self._hooks = parts, hooks
        store, settings, scrub, clock = parts.store, parts.settings, parts.scrub, parts.clock
        gh, source, say = parts.github, parts.session_source, self.say
        tools = RunTools(store, settings, scrub, clock, say)
        announcer = Announcer(store, hooks.notifier, scrub, say)
        self._branches = BranchChoiceStep(gh, parts.clones, settings.home, say)
        self._lease = LeaseStep(gh, store, settings, clock, hooks.interrupt, hooks.claimant)
        self._kept_work = KeptWorkStep(store, source, settings, scrub, say)
        self._feedback = FeedbackStep(gh, store, settings, say)
        self._claim = ClaimStep(gh, store, settings, source, scrub, say, hooks.claimant)
        self._worktree = WorktreeStep(store, say)
        self._brief = BriefStep(store, settings, scrub, say)
        self._session = SessionStep(store, source, scrub, say)
        self._takeover = TakeoverStep(settings, scrub, say)
        self._repair = RepairStep(tools, hooks.interrupt)
        self._reply = ReviewReplyStep(scrub, say)
        self._finish = FinishStep(tools, hooks.emit_url, announcer)
        base_fix = BaseFixStep(settings, say)
        self._salvage = SalvageStep(tools, hooks, announcer, base_fix.open, self._worktree.remove)

    def say(self, line: str) -> None:
        self._hooks.progress(self._parts.scrub(line))

    def run(self, request: RunRequest) -> RunOutcome:
        """Run the issue to its end: a ready (or merged) pull request, or a Failed run. An
        error before the Run is recorded (pre-flight, ``NotClaimed``) is raised, having
        changed nothing."""
        parts, ref = self._parts, request.issue
        repo, issue = preflight(parts.github, parts.session_source, parts.environ, ref)
        self._check_interrupt()
        found = self._branches.choose(ref, repo, issue, request.base)
        repository = parts.store.ensure_repository(repo.owner, repo.name)
        keeper = self._lease.keeper(repository, ref.number)
        with keeper as lease:
            return self._deliver(self._claimed(request, found, repository, keeper, lease))

    def _claimed(
        self,
        request: RunRequest,
        found: Found,
        repository: Repository,
        keeper: LeaseKeeper,
        lease: Lease,
    ) -> RunScope:
        """Under the Lease: the checks, kept work, the review feedback, and the Claim."""
        ref = request.issue
        issue = self._lease.still_wanted(request, repository, found.issue)
        labelled_at = self._lease.check_approval(request, repository, issue)
        found = replace(found, issue=issue)
        kept = self._kept_work.take(found, repository, keeper.check)
        if kept.left is not None:
            found = self._branches.again(found)
        feedback = self._feedback.waiting(
            ref, repository, found.choice.open_pull, rescue_of=request.rescue_of
        )
        if request.review_of is not None and not feedback:
            raise NotClaimed(f"the review feedback on {ref}'s pull request was taken meanwhile")
        # An interrupt before the Claim changes nothing: no record, no label, no comment.
        self._check_interrupt()
        ready_taken = self._claim.take_ready(ref, issue, keeper.check)
        if found.choice.continuation:
            self.say(f"continuing {found.choice.branch}, which an earlier Run left on origin")
        record = self._claim.record(
            lease, repository, found, request, ready_taken, keeper.lost_error, labelled_at
        )
        self._hooks.on_recorded(record.id)
        self.say(f"Run {record.id} on {ref}: {issue.title}")
        if request.rescue_of is not None:
            self.say(f"a Rescue of Run {request.rescue_of}, which crashed")
        gh = fenced(self._parts.github, keeper.check)
        return RunScope(
            request, record, found, keeper, gh, ready_taken is not None, feedback, kept.set_aside
        )

    def deliver(self, scope: RunScope) -> RunOutcome:
        """From a Claim another Run kind made to the end, as for an issue's Run: a Spec run's
        Spec PR (its opening session the Spec review, adr/0032)."""
        return self._deliver(scope)

    def _deliver(self, scope: RunScope) -> RunOutcome:
        """From the Claim to the end: the goal reached, or the salvage."""
        trail = Trail(Claim(scope.ready_taken, scope.ready_taken), scope.choice.open_pull)
        try:
            trail = replace(trail, claim=self._claim.labels(scope))
            self._claim.comment(scope)
            worktree = self._worktree.on_branch(scope)
            trail = replace(trail, worktree=worktree)
            self._worktree.ready(scope, worktree)
            sessions = self._session.sessions(scope.record.id, worktree, scope.ref)
            trail = replace(trail, sessions=sessions)
            with sessions.failures_name_killed_work():
                self._check_interrupt()
                brief = self._brief.write(scope, worktree, trail.pull)
                trail = replace(trail, brief=brief)
                # Work kept aside is not on the branch: its turn must be taken again.
                fresh = brief.kind == scope.session_kind and not scope.work_set_aside
                rescue_of = scope.request.rescue_of if fresh else None
                self._session.take_turn(
                    sessions, brief.kind, brief.prompt, worktree=worktree, rescue_of=rescue_of
                )
                self._check_interrupt()
                pull = self._takeover.take_over(scope, worktree, trail.pull)
                trail = replace(trail, pull=pull)
                result = self._repair.repair(scope, worktree, sessions, pull)
                pull = self._finish.check(scope, worktree, pull, result)
        except Exception as error:  # whatever went wrong, the work is saved first
            return self._salvage.salvage(scope, trail, error)
        # The goal is reached: from here on a problem is a warning, never a Failed run.
        self._reply.reply(scope, brief, pull, worktree, result)
        self._finish.record(scope, result, str(sessions.last_log) if sessions.last_log else None)
        self._worktree.remove(scope.clone, worktree.path)
        return self._finish.announce(scope, pull, result)

    def _check_interrupt(self) -> None:
        if self._hooks.interrupt.is_set():
            raise Interrupted("interrupted")
