"""The salvage: any ending without the goal becomes a Failed run that loses nothing
(``runs.failed_run``). Its cause is decided first (a lost Lease, then an interrupt, win), a
red Base branch gets its Base fix, and the end is announced."""

from __future__ import annotations

import contextlib
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from thirdshift.errors import Interrupted, LeaseLost, ThirdshiftError
from thirdshift.git import ManagedClone
from thirdshift.home import disk_error, disk_problem
from thirdshift.records import IssueInfo
from thirdshift.runs.failed_run import FailedOutcome, FailedRun, Salvage, SalvagedRun
from thirdshift.runs.notices import Announcer
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.rules.base_fixes import is_base_fix
from thirdshift.runs.rules.post_mortem import AnnouncedEnd
from thirdshift.runs.rules.repair_loop import InheritedFailure, RunFailed
from thirdshift.runs.scope import RunHooks, RunScope, RunTools, Trail
from thirdshift.sessions import LaterStepFailed

BaseFixOpener = Callable[[RunScope, InheritedFailure], IssueInfo | None]


@dataclass(frozen=True)
class SalvageStep:
    tools: RunTools
    hooks: RunHooks
    announcer: Announcer
    open_base_fix: BaseFixOpener
    remove_worktree: Callable[[ManagedClone, Path], None]

    def say(self, line: str) -> None:
        self.tools.say(line)

    def salvage(self, scope: RunScope, trail: Trail, error: Exception) -> RunOutcome:
        """The Failed run of ``error``, saving what ``trail`` holds."""
        # An interrupt no longer cuts waits short: the salvage keeps GitHub's retries.
        self.tools.clock.salvaging(self.tools.settings.salvage_wait_seconds)
        failure, base_fix = self._with_base_fix(scope, self._as_failure(error, scope, trail))
        sessions = trail.sessions
        outcome = self._salvage(scope).fail(
            FailedRun(
                error=failure,
                worktree=trail.worktree,
                pull=trail.pull,
                last_log=sessions.last_log if sessions else None,
                killed_work=sessions.endings if sessions else (),
                claim_had_ready_label=trail.claim.had_ready_label,
                claim_added_label=trail.claim.added_label,
            )
        )
        if base_fix is not None and scope.request.spec_number is None:
            # Ready again, for once its blocker is closed; a Ticket's Spec run runs it again
            ref = scope.ref
            with contextlib.suppress(ThirdshiftError):
                scope.github.add_label(
                    ref.owner, ref.repo, ref.number, self.tools.settings.ready_label
                )
        if trail.worktree is not None and not (outcome.kept_worktree or outcome.removed_worktree):
            self.remove_worktree(scope.clone, trail.worktree.path)
        return self._end(scope, outcome)

    def _salvage(self, scope: RunScope) -> Salvage:
        clone, branch = scope.clone, scope.branch
        salvaged = SalvagedRun(
            ref=scope.ref,
            run=scope.record,
            branch=branch,
            base=scope.base,
            branch_on_origin=lambda: clone.has_remote_branch(branch),
            fence=scope.keeper.check,
            job_url=scope.request.job_url,
            remove_worktree=lambda path: self.remove_worktree(clone, path),
        )
        return Salvage(salvaged, scope.github, self.tools)

    def _with_base_fix(
        self, scope: RunScope, failure: ThirdshiftError
    ) -> tuple[ThirdshiftError, IssueInfo | None]:
        """For checks red on the Base branch, the Base fix opened, and the cause saying so."""
        # A Base fix red from the same checks failed at its one job: no Base fix for it.
        own_fix = is_base_fix(scope.issue, scope.github.authenticated_login)
        if not isinstance(failure, InheritedFailure) or not self.tools.settings.base_fix or own_fix:
            return failure, None
        base_fix = self.open_base_fix(scope, failure)
        if base_fix is None:
            return failure, None
        number = scope.ref.number
        spec = scope.request.spec_number
        first = (
            f"a Ticket of Spec #{spec}, into {scope.base}" if spec is not None else "a Merge run"
        )
        return InheritedFailure(
            f"{failure}; thirdshift opened {base_fix.html_url} to fix it as {first} "
            f"first, and #{number} waits for it (blocked by it) to run again",
            failure.checks,
            failure.base_sha,
        ), base_fix

    def _end(self, scope: RunScope, outcome: FailedOutcome) -> RunOutcome:
        if outcome.open_pull_url:
            self.hooks.emit_url(outcome.open_pull_url)
        end = AnnouncedEnd(
            scope.issue.html_url,
            outcome.state,
            outcome.cause,
            outcome.open_pull_url,
            outcome.report,
        )
        self.announcer.announce(scope.record, end)
        for line in outcome.last_lines:
            self.say(line)
        return RunOutcome(
            outcome.state,
            1,
            run_id=scope.record.id,
            pull_request_url=outcome.open_pull_url,
            cause=outcome.cause,
        )

    def _as_failure(self, error: Exception, scope: RunScope, trail: Trail) -> ThirdshiftError:
        """The cause a Failed run reports: a lost Lease wins over everything (it stopped the
        Run); an interrupt wins over what it broke (a killed git command, a stopped session),
        except over a verdict of the Repair loop; killed work of earlier sessions is still
        named ahead of it."""
        keeper, sessions = scope.keeper, trail.sessions
        if keeper.lost:
            return error if isinstance(error, LeaseLost) else keeper.lost_error()
        original = error.original if isinstance(error, LaterStepFailed) else error
        if self.hooks.interrupt.is_set() and not isinstance(original, RunFailed):
            why = self.hooks.stopped_because() or "interrupted"
            endings = sessions.endings if sessions else ()
            if endings:
                return LaterStepFailed(
                    f"{'; '.join(endings)} and a later step failed: {why}", Interrupted(why)
                )
            return Interrupted(why)
        if isinstance(error, ThirdshiftError):
            return error
        if (disk := disk_error(error)) is not None:
            # The machine's problem, not thirdshift's: its cause names the disk and the fix.
            failure = ThirdshiftError(disk_problem(disk, "a file operation of the Run"))
            failure.__cause__ = error  # the salvage reads a full disk from it
            return failure
        self.say("".join(traceback.format_exception(error)).rstrip())
        return ThirdshiftError(
            f"unexpected {error.__class__.__name__}: {error} (a bug in thirdshift; the work was "
            "saved below, please report it with the lines above)"
        )
