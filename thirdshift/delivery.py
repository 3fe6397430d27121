"""A Run: one issue to a pull request thirdshift stands behind, or a Failed run that loses
nothing.

Pre-flight first, before anything is created or labelled; then the Issue branch, the Claim, a
Worktree from thirdshift's own clone, the opening ``implement`` session, the deterministic
takeover (push, open or update the pull request from the agent's file, check it, mark it ready),
the Repair loop, and for a Merge run the Self-merge. Any other ending is a Failed run
(``thirdshift.failed_run``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from thirdshift.branches import BranchChoice, branch_name, branch_number, choose_issue_branch
from thirdshift.ci_watch import CiResult, inherited_failures, latest_per_name, watch_ci
from thirdshift.errors import Interrupted, ThirdshiftError
from thirdshift.failed_run import FailedRun, Salvage
from thirdshift.git import Identity, ManagedClone, Worktree
from thirdshift.github import GitHub, GitHubError, MergeRefused
from thirdshift.github_records import (
    CheckRun,
    CommitStatus,
    IssueInfo,
    PullRequestInfo,
    RepoInfo,
)
from thirdshift.harnesses import Harness
from thirdshift.issue_url import IssueRef
from thirdshift.preamble import follow_up_preamble
from thirdshift.prompts import (
    PULL_REQUEST_FILE,
    FailedCheck,
    ci_fix_prompt,
    conflict_prompt,
    implement_prompt,
)
from thirdshift.repair_loop import (
    BaseMerge,
    Budgets,
    LoopResult,
    MergeRefusedError,
    RepairLoop,
    RunFailed,
)
from thirdshift.scrub import Scrubber
from thirdshift.session_runner import CliOutside, log_stamp, session_log_paths
from thirdshift.sessions import LaterStepFailed, Sessions
from thirdshift.settings import Settings
from thirdshift.store import Lease, Repository, Run, Store

PERMISSIONS_THAT_PUSH = frozenset({"admin", "maintain", "write"})
LOG_TAIL_CHARS = 3000


@dataclass(frozen=True)
class RunRequest:
    issue: IssueRef
    merge: bool = False
    base: str | None = None


@dataclass(frozen=True)
class Claim:
    """The GitHub half of a Claim as this Run made it: whether it took ``ready-for-agent``
    away (a release gives it back) and whether it added ``in-progress`` itself (only then may
    a release take it off again)."""

    had_ready_label: bool
    added_label: bool


class _LeaseKeeper:
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
        owner = f"{socket.gethostname()}:{os.getpid()}"
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


class Delivery:
    """Runs one issue. Built by the composition root with real adapters."""

    def __init__(
        self,
        *,
        settings: Settings,
        github: GitHub,
        store: Store,
        harness: Harness,
        environ: Mapping[str, str],
        token: str,
        scrub: Scrubber,
        progress: Callable[[str], None],
        interrupt: threading.Event,
        emit_url: Callable[[str], None],
    ) -> None:
        self._settings = settings
        self._github = github
        self._store = store
        self._harness = harness
        self._environ = environ
        self._token = token
        self._scrub = scrub
        self._progress = progress
        self._interrupt = interrupt
        self._emit_url = emit_url

    def say(self, line: str) -> None:
        self._progress(self._scrub(line))

    # -- the Run -------------------------------------------------------------------------------

    def run(self, request: RunRequest) -> int:
        """Run the issue; return the exit status (0 success, 1 failure)."""
        ref = request.issue
        owner, name, number = ref.owner, ref.repo, ref.number
        repo, issue = self._preflight(ref)
        base = request.base or repo.default_branch
        clone = ManagedClone(
            self._settings.home,
            owner,
            name,
            repo.clone_url,
            self._token,
            Identity(self._settings.git_user_name, self._settings.git_user_email),
        )
        self.say(f"fetching {repo.full_name} into {clone.path}")
        clone.sync()
        remote = clone.remote_branches()
        if base not in remote:
            raise ThirdshiftError(
                f"base branch {base} does not exist on origin; push it first or pass --base"
            )
        choice = choose_issue_branch(number, remote, self._issue_pulls(ref, remote))
        if choice.open_pull is not None:
            if request.base is not None and request.base != choice.open_pull.base_ref:
                raise ThirdshiftError(
                    f"pull request {choice.open_pull.html_url} targets "
                    f"{choice.open_pull.base_ref}, not {request.base}; change its base or drop "
                    "--base"
                )
            base = choice.open_pull.base_ref
        worktree_path = self._settings.home / "worktrees" / f"{owner}-{name}-{choice.branch}"
        left = clone.unpushed_work(worktree_path)
        if left is not None:
            raise ThirdshiftError(
                f"the worktree {worktree_path} from an earlier Run holds work that is not on "
                f"origin ({left}); push it, or remove the worktree if it is not wanted"
            )
        repository = self._store.ensure_repository(owner, name)
        with _LeaseKeeper(self._store, repository, number, self._settings.lease_seconds) as lease:
            if choice.continuation:
                self.say(f"continuing {choice.branch}, which an earlier Run left on origin")
            record = self._store.start_run(
                repository,
                number,
                kind="merge" if request.merge else "run",
                base_branch=base,
                issue_branch=choice.branch,
                harness=self._harness.name,
                model=self._settings.model,
            )
            self._store.attach_run_to_lease(lease, record.id)
            self.say(f"Run {record.id} on {ref}: {issue.title}")
            return self._deliver(request, record, clone, issue, choice, base, worktree_path)

    def _deliver(
        self,
        request: RunRequest,
        record: Run,
        clone: ManagedClone,
        issue: IssueInfo,
        choice: BranchChoice,
        base: str,
        worktree_path: Path,
    ) -> int:
        ref = request.issue
        gh = self._github
        owner, name, number = ref.owner, ref.repo, ref.number
        claim = Claim(had_ready_label=False, added_label=False)
        worktree: Worktree | None = None
        sessions: Sessions | None = None
        pull: PullRequestInfo | None = choice.open_pull
        salvage = Salvage(
            github=gh,
            store=self._store,
            scrub=self._scrub,
            progress=self.say,
            ref=ref,
            run=record,
            branch=choice.branch,
            base=base,
            ready_label=self._settings.ready_label,
            in_progress_label=self._settings.in_progress_label,
            branch_on_origin=lambda: clone.has_remote_branch(choice.branch),
        )
        try:
            claim = self._claim(ref, issue)
            start = f"origin/{choice.branch}" if choice.continuation else f"origin/{base}"
            clone.remove_worktree(worktree_path)
            worktree = clone.add_worktree(worktree_path, choice.branch, start)
            worktree.exclude(f"/{PULL_REQUEST_FILE}")
            self.say(f"working in {worktree.path} on {choice.branch}, from {start}")
            sessions = self._sessions(record, worktree, ref)
            with sessions.failures_name_killed_work():
                self._check_interrupt()
                prompt = implement_prompt(
                    issue,
                    gh.issue_comments(owner, name, number),
                    base_branch=base,
                    issue_branch=choice.branch,
                    continuation=choice.continuation,
                    pull_request_url=pull.html_url if pull else None,
                    earlier=self._earlier_run(record) if choice.continuation else "",
                )
                sessions.run("implement", self._scrub(prompt))
                self._check_interrupt()
                pull = self._takeover(ref, worktree, choice, base, pull)
                self._store.update_run(record.id, pull_request_number=pull.number)
                outside = _LoopOutside(self, ref, worktree, sessions, record, base, pull)
                result = RepairLoop(
                    outside,
                    Budgets(self._settings.max_repairs, self._settings.max_upstream_moves),
                    merge=request.merge,
                ).run()
                pull = self._finish(ref, worktree, pull, result)
        except Exception as error:  # whatever went wrong, the work is saved first
            failure = self._as_failure(error, sessions)
            outcome = salvage.fail(
                FailedRun(
                    error=failure,
                    worktree=worktree,
                    pull=pull,
                    last_log=sessions.last_log if sessions else None,
                    killed_work=sessions.endings if sessions else (),
                    claim_had_ready_label=claim.had_ready_label,
                    claim_added_label=claim.added_label,
                )
            )
            if worktree is not None and not outcome.kept_worktree:
                self._remove_worktree(clone, worktree.path)
            if outcome.open_pull_url:
                self._emit_url(outcome.open_pull_url)
            for line in outcome.last_lines:
                self._progress(self._scrub(line))
            return 1
        # The goal is reached: from here on a problem is a warning, never a Failed run.
        try:
            self._store.finish_run(
                record.id,
                "succeeded",
                head_sha=result.head,
                last_session_log=str(sessions.last_log) if sessions.last_log else None,
            )
        except ThirdshiftError as problem:
            self.say(f"warning: could not record the Run's success: {problem}")
        self._remove_worktree(clone, worktree.path)
        state = "merged" if result.merged else "ready"
        self.say(f"pull request {pull.html_url} is {state}")
        self._emit_url(pull.html_url)
        return 0

    def _remove_worktree(self, clone: ManagedClone, path: Path) -> None:
        try:
            clone.remove_worktree(path)
        except ThirdshiftError as problem:
            self.say(f"warning: could not remove the worktree {path}: {problem}")

    def _earlier_run(self, record: Run) -> str:
        """What the last Run on this issue did and why it ended, for a Continuation's prompt,
        from the database (never from a Harness transcript)."""
        earlier = [
            run
            for run in self._store.list_runs(limit=20)
            if run.repository.id == record.repository.id
            and run.issue_number == record.issue_number
            and run.id != record.id
        ]
        if not earlier:
            return ""
        last = earlier[0]
        sessions = [
            (
                session.kind,
                session.final_message,
                [event.summary for event in self._store.session_events(session.id, last=50)],
            )
            for session in self._store.run_sessions(last.id)
        ]
        ending = f"The earlier Run ended {last.state}" + (f": {last.cause}" if last.cause else "")
        return self._scrub(f"{follow_up_preamble(sessions)}{ending}.\n")

    # -- steps ---------------------------------------------------------------------------------

    def _preflight(self, ref: IssueRef) -> tuple[RepoInfo, IssueInfo]:
        gh = self._github
        if shutil.which(self._harness.executable, path=self._environ.get("PATH")) is None:
            raise ThirdshiftError(
                f"{self._harness.executable} (the {self._harness.name} Harness) is not on PATH; "
                "install it or choose another with --harness"
            )
        login = gh.authenticated_login()
        try:
            permission = gh.permission(ref.owner, ref.repo, login)
        except GitHubError as error:
            if error.status != 403:
                raise
            # GitHub shows a permission only to those who can push: a refusal is the answer.
            permission = "no push"
        if permission not in PERMISSIONS_THAT_PUSH:
            raise ThirdshiftError(
                f"the token's user {login} has {permission} permission on {ref.full_name}; "
                "thirdshift needs write to push, so use a token with write access"
            )
        repo = gh.repo(ref.owner, ref.repo)
        issue = gh.issue(ref.owner, ref.repo, ref.number)
        if issue.is_pull_request:
            raise ThirdshiftError(f"#{ref.number} is a pull request, not an issue")
        if issue.state != "open":
            raise ThirdshiftError(
                f"issue #{ref.number} is {issue.state}; reopen it to run thirdshift on it"
            )
        return repo, issue

    def _issue_pulls(self, ref: IssueRef, remote: Mapping[str, str]) -> list[PullRequestInfo]:
        """Every pull request from one of the issue's branches, newest first."""
        highest = max(
            (k for k in (branch_number(ref.number, b) for b in remote) if k is not None),
            default=0,
        )
        pulls: list[PullRequestInfo] = []
        k = 1
        while True:
            found = self._github.pulls_for_head(ref.owner, ref.repo, branch_name(ref.number, k))
            if not found and k > highest:
                break
            pulls.extend(found)
            k += 1
        return sorted(pulls, key=lambda p: p.number, reverse=True)

    def _claim(self, ref: IssueRef, issue: IssueInfo) -> Claim:
        ready = self._settings.ready_label
        busy = self._settings.in_progress_label
        labels = list(issue.labels)
        had_ready = any(label.lower() == ready.lower() for label in labels)
        had_busy = any(label.lower() == busy.lower() for label in labels)
        if had_busy and not had_ready:
            return Claim(had_ready_label=False, added_label=False)
        if not had_busy:
            self._github.ensure_label(
                ref.owner, ref.repo, busy, "fbca04", "thirdshift is working on this issue"
            )
        kept = [label for label in labels if label.lower() not in (ready.lower(), busy.lower())]
        self._github.set_issue_labels(ref.owner, ref.repo, ref.number, [*kept, busy])
        self.say(
            f"labelling #{ref.number} {busy}" + (f", in place of {ready}" if had_ready else "")
        )
        return Claim(had_ready_label=had_ready, added_label=not had_busy)

    def _sessions(self, record: Run, worktree: Worktree, ref: IssueRef) -> Sessions:
        # The agent commits as the factory: its HOME may hold no git identity at all.
        identity = {
            "GIT_AUTHOR_NAME": self._settings.git_user_name,
            "GIT_AUTHOR_EMAIL": self._settings.git_user_email,
            "GIT_COMMITTER_NAME": self._settings.git_user_name,
            "GIT_COMMITTER_EMAIL": self._settings.git_user_email,
        }
        outside = CliOutside(
            harness=self._harness,
            worktree=worktree.path,
            store=self._store,
            run_id=record.id,
            environ={**self._environ, **identity},
            watchdogs=self._settings.session_watchdogs,
            grace_seconds=self._settings.session_stop_grace_seconds,
            interrupt=self._interrupt,
            progress=self.say,
            scrub=self._scrub,
            model=self._settings.model,
        )
        logs = self._settings.home / "logs"
        return Sessions(
            outside, session_log_paths(logs, ref.owner, ref.repo, ref.number, log_stamp())
        )

    def _takeover(
        self,
        ref: IssueRef,
        worktree: Worktree,
        choice: BranchChoice,
        base: str,
        pull: PullRequestInfo | None,
    ) -> PullRequestInfo:
        gh = self._github
        if worktree.is_dirty() and worktree.commit_all(
            "thirdshift: work the implement session left uncommitted"
        ):
            self.say("committed work the session left uncommitted")
        if worktree.is_ancestor("HEAD", f"origin/{base}"):
            raise ThirdshiftError(
                f"the implement session made no commits on {choice.branch}; there is nothing to "
                "open a pull request for"
            )
        self.say(f"pushing {choice.branch}")
        worktree.push(choice.branch)
        title, body = self._pull_request_text(ref, worktree)
        if pull is None:
            open_pulls = [
                p
                for p in gh.pulls_for_head(ref.owner, ref.repo, choice.branch)
                if p.state == "open"
            ]
            pull = open_pulls[0] if open_pulls else None
        if pull is None:
            pull = gh.create_pull(
                ref.owner, ref.repo, head=choice.branch, base=base, title=title, body=body
            )
            self.say(f"opened pull request {pull.html_url}")
        else:
            pull = gh.update_pull(ref.owner, ref.repo, pull.number, title=title, body=body)
            self.say(f"updated pull request {pull.html_url}")
        if pull.state != "open":
            raise ThirdshiftError(f"pull request {pull.html_url} is {pull.state}, not open")
        if pull.base_ref != base:
            raise ThirdshiftError(
                f"pull request {pull.html_url} targets {pull.base_ref}, not {base}"
            )
        if pull.draft:
            gh.mark_ready(ref.owner, ref.repo, pull.number)
            self.say(f"marked {pull.html_url} ready for review")
            pull = gh.pull(ref.owner, ref.repo, pull.number)
        return pull

    def _pull_request_text(self, ref: IssueRef, worktree: Worktree) -> tuple[str, str]:
        """The title and body the agent wrote, or plain defaults; always closes the issue."""
        path = worktree.path / PULL_REQUEST_FILE
        title, body = f"Fix #{ref.number}", ""
        if path.exists():
            text = path.read_text(errors="replace").strip()
            first, _, rest = text.partition("\n")
            title = first.lstrip("# ").strip() or title
            body = rest.strip()
        else:
            self.say(f"the session wrote no {PULL_REQUEST_FILE}; using a plain title and body")
        if not re.search(
            rf"\b(close[sd]?|fix(e[sd])?|resolve[sd]?)\s+#{ref.number}\b", body, re.IGNORECASE
        ):
            body = f"{body}\n\nCloses #{ref.number}".strip()
        return self._scrub(title)[:250], self._scrub(body)

    def _finish(
        self,
        ref: IssueRef,
        worktree: Worktree,
        pull: PullRequestInfo,
        result: LoopResult,
    ) -> PullRequestInfo:
        gh = self._github
        title, body = self._pull_request_text(ref, worktree)
        if (title, body) != (pull.title, pull.body) and not result.merged:
            pull = gh.update_pull(ref.owner, ref.repo, pull.number, title=title, body=body)
        if not result.merged:
            pull = gh.pull(ref.owner, ref.repo, pull.number)
            if pull.state != "open" or pull.draft:
                raise ThirdshiftError(
                    f"pull request {pull.html_url} is {'a draft' if pull.draft else pull.state}, "
                    "not open and ready"
                )
            if pull.head_sha != result.head:
                raise ThirdshiftError(
                    f"pull request {pull.html_url} moved to {pull.head_sha[:7]} after CI was "
                    f"watched on {result.head[:7]}; run thirdshift again to verify the new head"
                )
            return pull
        branch = pull.head_ref
        try:
            gh.delete_branch(ref.owner, ref.repo, branch)
            self.say(f"deleted {branch}")
            issue = gh.issue(ref.owner, ref.repo, ref.number)
            if issue.state == "open":
                gh.close_issue(ref.owner, ref.repo, ref.number)
                self.say(f"closed issue #{ref.number}")
            busy = self._settings.in_progress_label.lower()
            labels = [label for label in issue.labels if label.lower() != busy]
            if len(labels) != len(issue.labels):
                gh.set_issue_labels(ref.owner, ref.repo, ref.number, labels)
                self.say(f"removing {self._settings.in_progress_label} from issue #{ref.number}")
        except ThirdshiftError as problem:
            self.say(f"warning: after the merge: {problem}")
        return pull

    def _as_failure(self, error: Exception, sessions: Sessions | None) -> ThirdshiftError:
        """The cause a Failed run reports: an interrupt wins over what it broke (a killed git
        command, a stopped session), except over a verdict of the Repair loop; killed work of
        earlier sessions is still named ahead of it."""
        original = error.original if isinstance(error, LaterStepFailed) else error
        if self._interrupt.is_set() and not isinstance(original, RunFailed):
            endings = sessions.endings if sessions else ()
            if endings:
                return LaterStepFailed(
                    f"{'; '.join(endings)} and a later step failed: interrupted",
                    Interrupted("interrupted"),
                )
            return Interrupted("interrupted")
        if isinstance(error, ThirdshiftError):
            return error
        self.say("".join(traceback.format_exception(error)).rstrip())
        return ThirdshiftError(
            f"unexpected {error.__class__.__name__}: {error} (a bug in thirdshift; the work was "
            "saved below, please report it with the lines above)"
        )

    def _check_interrupt(self) -> None:
        if self._interrupt.is_set():
            raise Interrupted("interrupted")

    # -- used by the loop's Outside ------------------------------------------------------------

    def repair_prompt(
        self,
        record: Run,
        cause_prompt: Callable[[str], str],
    ) -> str:
        earlier = [
            (
                session.kind,
                session.final_message,
                [event.summary for event in self._store.session_events(session.id, last=50)],
            )
            for session in self._store.run_sessions(record.id)
            if session.state == "ended"
        ]
        return self._scrub(cause_prompt(follow_up_preamble(earlier)))


class _LoopOutside:
    """The Repair loop's view of this Run: git in the Worktree, GitHub, and Repair sessions."""

    def __init__(
        self,
        delivery: Delivery,
        ref: IssueRef,
        worktree: Worktree,
        sessions: Sessions,
        record: Run,
        base: str,
        pull: PullRequestInfo,
    ) -> None:
        self.base_branch = base
        self._d = delivery
        self._gh = delivery._github
        self._ref = ref
        self._worktree = worktree
        self._sessions = sessions
        self._record = record
        self._pull = pull

    def progress(self, line: str) -> None:
        self._d.say(line)

    def merge_base(self) -> BaseMerge:
        self._d._check_interrupt()
        self._worktree.fetch(self.base_branch)
        base_sha = self._worktree.remote_sha(self.base_branch) or ""
        outcome = self._worktree.merge(f"origin/{self.base_branch}")
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
        self._d._check_interrupt()
        if self._worktree.is_dirty():
            self._worktree.commit_all("thirdshift: work the Repair left uncommitted")
        self._worktree.push(self._pull.head_ref)
        head = self._worktree.head()
        self._d._store.update_run(self._record.id, head_sha=head)
        return head

    def head(self) -> str:
        if self._worktree.is_dirty():
            self._worktree.commit_all("thirdshift: work the Repair left uncommitted")
        return self._worktree.head()

    def watch_ci(self, head: str) -> CiResult:
        settings = self._d._settings
        return watch_ci(
            _Checks(self._gh, self._ref),
            head,
            grace_seconds=settings.ci_grace_seconds,
            poll_seconds=settings.ci_poll_seconds,
            progress=self.progress,
            interrupt=self._d._interrupt,
            timeout_seconds=settings.ci_timeout_seconds,
        )

    def inherited(self, failed: Sequence[str], base_sha: str) -> tuple[str, ...]:
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
    ) -> None:
        self._d._check_interrupt()
        if conflict is not None:
            prompt = self._d.repair_prompt(
                self._record,
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
            prompt = self._d.repair_prompt(
                self._record,
                lambda preamble: ci_fix_prompt(
                    preamble, head=ci.head, failed=failed, inherited=inherited
                ),
            )
        self._sessions.run(f"repair-{number}", prompt)

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
        settings = self._d._settings
        deadline = time.monotonic() + settings.ci_grace_seconds
        old = {check.name: check.id for check in checks}
        while time.monotonic() < deadline:
            newest = {
                c.name: c.id
                for c in latest_per_name(self._gh.check_runs(self._ref.owner, self._ref.repo, head))
            }
            if all(newest.get(name, 0) > old_id for name, old_id in old.items()):
                return
            if self._d._interrupt.wait(settings.ci_poll_seconds):
                raise Interrupted("interrupted")
        self.progress("the re-run's checks did not appear within the grace period")

    def self_merge(self, head: str) -> None:
        pull = self._gh.wait_for_mergeable(
            self._ref.owner, self._ref.repo, self._pull.number, timeout=60
        )
        if pull.draft:
            self._gh.mark_ready(self._ref.owner, self._ref.repo, pull.number)
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
    def __init__(self, github: GitHub, ref: IssueRef) -> None:
        self._gh = github
        self._ref = ref

    def check_runs(self, sha: str) -> tuple[CheckRun, ...]:
        return self._gh.check_runs(self._ref.owner, self._ref.repo, sha)

    def commit_statuses(self, sha: str) -> tuple[CommitStatus, ...]:
        return self._gh.commit_statuses(self._ref.owner, self._ref.repo, sha)
