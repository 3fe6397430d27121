"""The Repair loop step: the pull request recorded, then CI watched and repaired (a Merge run
merges at the end) until the Run's goal is reached or a verdict fails it; with the loop's real
Outside (``RunLoopOutside``): one Run's Worktree, GitHub and Repair sessions."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from thirdshift.defang import closed_elsewhere
from thirdshift.errors import Interrupted, MergeRefused, ThirdshiftError
from thirdshift.git import Worktree, tracking
from thirdshift.issue_url import IssueRef
from thirdshift.records import CheckRun, CommitStatus, PullRequestInfo, Run
from thirdshift.runs.ports import GitHubPort
from thirdshift.runs.rules.base_fixes import is_base_fix
from thirdshift.runs.rules.ci_watch import (
    WORKFLOW_TOKEN_LOGIN,
    CiResult,
    inherited_failures,
    latest_per_name,
    watch_ci,
)
from thirdshift.runs.rules.prompts import (
    FailedCheck,
    ci_fix_prompt,
    conflict_prompt,
    foreign_review_prompt,
)
from thirdshift.runs.rules.repair_loop import (
    BaseMerge,
    HeadMoved,
    LoopResult,
    MergeHeld,
    MergeRefusedError,
    RepairBudgets,
    RepairLoop,
    RunFailed,
    merge_held,
    merge_not_yet,
)
from thirdshift.runs.scope import RunScope, RunTools
from thirdshift.runs.secret_check import push_checked
from thirdshift.sessions import EVENTS_IN_RESUME, Sessions, follow_up_preamble


@dataclass(frozen=True)
class RepairStep:
    tools: RunTools
    interrupt: threading.Event

    def repair(
        self, scope: RunScope, worktree: Worktree, sessions: Sessions, pull: PullRequestInfo
    ) -> LoopResult:
        """The Repair loop's result on ``pull``, recorded on the Run first."""
        opened = pull.number
        # The pull request is open: a blip must not fail the Run now.
        self.tools.retrying(
            lambda: self.tools.store.update_run(scope.record.id, pull_request_number=opened)
        )
        run = LoopRun(
            ref=scope.ref,
            worktree=worktree,
            sessions=sessions,
            record=scope.record,
            base=scope.base,
            pull=pull,
            fence=scope.keeper.check,
            fixing_base=is_base_fix(scope.issue, scope.github.authenticated_login),
        )
        outside = RunLoopOutside(run, scope.github, self.tools, self.interrupt)
        settings = self.tools.settings
        budgets = RepairBudgets(settings.max_repairs, settings.max_upstream_moves)
        return RepairLoop(outside, budgets, merge=scope.request.merge).run()


LOG_TAIL_CHARS = 3000


@dataclass(frozen=True)
class LoopRun:
    """The Run the Repair loop works for: its issue, Worktree, sessions and record, the Base
    branch, its open pull request, the Lease's fence, and whether it is a Base fix."""

    ref: IssueRef
    worktree: Worktree
    sessions: Sessions
    record: Run
    base: str
    pull: PullRequestInfo
    fence: Callable[[], None]
    fixing_base: bool = False


class RunLoopOutside:
    """The Repair loop's view of one Run: git in its Worktree, GitHub, and Repair sessions."""

    def __init__(
        self,
        run: LoopRun,
        github: GitHubPort,
        tools: RunTools,
        interrupt: threading.Event,
    ) -> None:
        self._fixing_base = run.fixing_base
        self._fence = run.fence
        self.base_branch = run.base
        self._gh, self._interrupt = github, interrupt
        self._store, self._clock, self._settings = tools.store, tools.clock, tools.settings
        self._scrub, self._say = tools.scrub, tools.say
        self._ref, self._worktree, self._sessions = run.ref, run.worktree, run.sessions
        self._record, self._pull = run.record, run.pull
        self._reviewed = 0  # how many of the Worktree's foreign commits a session reviewed

    def progress(self, line: str) -> None:
        self._say(line)

    def _check_interrupt(self) -> None:
        if self._interrupt.is_set():
            raise Interrupted("interrupted")

    def _repair_prompt(self, cause_prompt: Callable[[str], str]) -> str:
        """A Repair's prompt: what the earlier sessions of this Run did (from the database),
        then the cause."""
        earlier = self._store.issue_history(self._record, last_events=EVENTS_IN_RESUME)
        preamble = follow_up_preamble(earlier, cap_tokens=self._settings.follow_up_preamble_tokens)
        return self._scrub(cause_prompt(preamble))

    def merge_base(self) -> BaseMerge:
        self._check_interrupt()
        self._worktree.fetch(self.base_branch)
        base_sha = self._worktree.remote_sha(self.base_branch) or ""
        outcome = self._worktree.merge(tracking(self.base_branch))
        if outcome.status == "merged":
            self.progress(f"merged origin/{self.base_branch} at {base_sha[:7]} into the branch")
        return BaseMerge(outcome.status, base_sha, outcome.conflicted_paths)

    def merge_problem(self, base_sha: str) -> str | None:
        if self._worktree.merge_in_progress():
            return f"the merge of origin/{self.base_branch} is still in progress after the Repair"
        if not self._worktree.is_ancestor(base_sha):
            return f"origin/{self.base_branch} is not merged into the branch after the Repair"
        return None

    def push(self) -> str:
        self._check_interrupt()
        if self._worktree.is_dirty():
            self._worktree.commit_all("thirdshift: work the Repair left uncommitted")
        push_checked(
            self._worktree,
            self._pull.head_ref,
            self.base_branch,
            self._scrub.findings,
            self._fence,
            say=self.progress,
            allow_workflow_changes=self._settings.allow_workflow_changes_for(
                self._ref.owner, self._ref.repo
            ),
        )
        head = self._worktree.head()
        self._store.update_run(self._record.id, head_sha=head)
        return head

    def foreign_to_review(self) -> tuple[str, ...]:
        merged = self._worktree.foreign_merged
        new = tuple(merged[self._reviewed :])
        self._reviewed = len(merged)
        return new

    def head(self) -> str:
        if self._worktree.is_dirty():
            self._worktree.commit_all("thirdshift: work the Repair left uncommitted")
        return self._worktree.head()

    def watch_ci(self, head: str) -> CiResult:
        settings = self._settings
        result = watch_ci(
            _Checks(self._gh, self._ref),
            head,
            grace_seconds=settings.ci_grace_seconds,
            poll_seconds=settings.ci_poll_seconds,
            progress=self.progress,
            clock=self._clock,
            timeout_seconds=settings.ci_timeout_seconds,
        )
        if result.absent and self._gh.authenticated_login().lower() == WORKFLOW_TOKEN_LOGIN:
            # GitHub starts no workflow for what a workflow's own token pushes: "no checks"
            # cannot tell CI absent from CI never started, and a pull request is not ready on
            # a guess.
            raise RunFailed(
                f"no CI checks appeared on {head[:7]}, and none can: pushes made with a "
                "workflow's own GITHUB_TOKEN start no workflow, so CI never ran on them; give "
                "the workflow a GitHub App (the THIRDSHIFT_APP_ID and THIRDSHIFT_APP_PRIVATE_KEY "
                "secrets) so its pushes start CI, then add the label again"
            )
        return result

    def inherited(self, failed: Sequence[str], base_sha: str) -> tuple[str, ...]:
        if self._fixing_base:  # a Base fix's red checks are the very ones it must fix
            return ()
        checks = _Checks(self._gh, self._ref)
        return inherited_failures(
            failed, checks.check_runs(base_sha), checks.commit_statuses(base_sha)
        )

    def base_moved(self, base_sha: str) -> bool:
        self._worktree.fetch(self.base_branch)
        return (self._worktree.remote_sha(self.base_branch) or base_sha) != base_sha

    def repair(
        self,
        number: int,
        cause: str,
        conflict: BaseMerge | None,
        ci: CiResult | None,
        inherited: Sequence[str],
        foreign: Sequence[str] = (),
    ) -> None:
        self._check_interrupt()
        if foreign:
            prompt = self._repair_prompt(
                lambda preamble: foreign_review_prompt(
                    preamble,
                    issue_number=self._ref.number,
                    issue_branch=self._pull.head_ref,
                    commits=foreign,
                ),
            )
        elif conflict is not None:
            prompt = self._repair_prompt(
                lambda preamble: conflict_prompt(
                    preamble,
                    base_branch=self.base_branch,
                    issue_branch=self._pull.head_ref,
                    paths=conflict.conflicted_paths,
                ),
            )
        else:
            assert ci is not None
            failed = [
                FailedCheck(check.name, self._log_tail(check))
                for check in ci.failed_checks
                if check.name not in inherited
            ]
            prompt = self._repair_prompt(
                lambda preamble: ci_fix_prompt(
                    preamble, head=ci.head, failed=failed, inherited=inherited
                ),
            )
        try:
            self._sessions.run(f"repair-{number}", prompt)
        finally:  # the session's end is a head thirdshift stands behind (adr/0027)
            self._worktree.record_head()

    def _log_tail(self, check: CheckRun) -> str:
        if check.job_id is None:
            return "(no log: not a GitHub Actions job)"
        try:
            return self._gh.job_log_tail(
                self._ref.owner, self._ref.repo, check.job_id, max_chars=LOG_TAIL_CHARS
            )
        except ThirdshiftError as problem:
            return f"(the log could not be read: {problem})"

    def rerun_failed(self, checks: Sequence[CheckRun]) -> None:
        for run_id in sorted({check.run_id for check in checks if check.run_id is not None}):
            self._gh.rerun_failed_jobs(self._ref.owner, self._ref.repo, run_id)
        # GitHub registers the new attempts a little later: until it does, the old failures
        # are all a watch would see. Wait (at most the grace period) for newer check runs.
        if not checks:
            return
        head = checks[0].head_sha
        settings = self._settings
        deadline = self._clock.monotonic() + settings.ci_grace_seconds
        old = {check.name: check.id for check in checks}
        while self._clock.monotonic() < deadline:
            newest = {
                c.name: c.id
                for c in latest_per_name(self._gh.check_runs(self._ref.owner, self._ref.repo, head))
            }
            if all(newest.get(name, 0) > old_id for name, old_id in old.items()):
                return
            self._clock.sleep(settings.ci_poll_seconds)
        self.progress("the re-run's checks did not appear within the grace period")

    def self_merge(self, head: str) -> None:
        pull = self._gh.wait_for_mergeable(
            self._ref.owner, self._ref.repo, self._pull.number, timeout=60
        )
        held = merge_held(pull, self.base_branch)
        unreviewed = self._worktree.foreign_merged[self._reviewed :]
        if held is None and unreviewed:
            # Until a session reviews them, commits by others are not merged unreviewed.
            shown = "; ".join(unreviewed[:5])
            held = (
                f"commits thirdshift did not make were merged into {pull.head_ref} during the "
                f"Run ({shown}); it does not Self-merge them unreviewed: review pull request "
                f"{pull.html_url} and merge it, or run thirdshift with --merge again"
            )
        if held is None:
            closing = closed_elsewhere(
                "\n".join(self._worktree.log_messages(tracking(self.base_branch))),
                self._ref.number,
                self._ref.full_name,
            )
            if closing:
                # GitHub closes what a merged commit's message closes; a commit cannot be
                # defanged without rewriting it, and thirdshift never force-pushes.
                held = (
                    f"commit messages on {pull.head_ref} would close {', '.join(closing)} once "
                    f"merged; thirdshift does not Self-merge them: reword those commits, or "
                    f"merge pull request {pull.html_url} by hand"
                )
        if held is not None:
            raise MergeHeld(held)
        not_yet = merge_not_yet(pull, head)
        if not_yet is not None:
            raise (HeadMoved if pull.head_sha != head else MergeRefusedError)(not_yet)
        try:
            self._gh.merge_pull(
                self._ref.owner,
                self._ref.repo,
                pull.number,
                sha=head,
                title=f"{pull.title} (#{pull.number})",
                message=f"Closes #{self._ref.number}",
            )
        except MergeRefused as refusal:
            raise MergeRefusedError(str(refusal)) from refusal
        self.progress(f"merged {pull.html_url} at {head[:7]}")


class _Checks:
    def __init__(self, github: GitHubPort, ref: IssueRef) -> None:
        self._gh = github
        self._ref = ref

    def check_runs(self, sha: str) -> tuple[CheckRun, ...]:
        return self._gh.check_runs(self._ref.owner, self._ref.repo, sha)

    def commit_statuses(self, sha: str) -> tuple[CommitStatus, ...]:
        return self._gh.commit_statuses(self._ref.owner, self._ref.repo, sha)
