"""The Failed run: any ending without the goal, handled so that nothing is lost and the user
can see what happened.

Abort an unfinished merge; commit uncommitted work as ``thirdshift: failed run (<reason>)`` and
push it (never forced); turn an open pull request back to draft (not after a Policy refusal);
record the cause, the killed work, the last Session log, branch and head in the database; post
one marked, scrubbed and defanged comment on the issue with the cause and the Post-mortem (a
later Run edits it rather than adding another); release the Claim when nothing reached origin.
If the push fails, the Worktree is kept and named. Salvage problems, even a defect's, are
warnings, never in place of the cause, and never stop the rest."""

from __future__ import annotations

import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from thirdshift.defang import defanged
from thirdshift.errors import LeaseLost, ThirdshiftError
from thirdshift.git import Worktree, tracking
from thirdshift.home import Home
from thirdshift.issue_url import IssueRef
from thirdshift.records import PullRequestInfo, Run
from thirdshift.run_states import RunEnd, RunState
from thirdshift.runs import full_disk
from thirdshift.runs.ports import GitHubPort
from thirdshift.runs.rules.failed_causes import ending_state, is_policy_refusal, reason_of, stopped
from thirdshift.runs.rules.post_mortem import (
    LAST_LINES,
    PostMortem,
    markdown,
    post_mortem,
    run_page_part,
    run_page_url,
)
from thirdshift.runs.scope import RunTools
from thirdshift.runs.secret_check import push_checked

COMMENT_MARKER = "<!-- thirdshift:failed-run -->"
_T = TypeVar("_T")


@dataclass(frozen=True)
class FailedRun:
    error: ThirdshiftError
    worktree: Worktree | None
    pull: PullRequestInfo | None
    last_log: Path | None
    killed_work: Sequence[str]
    claim_had_ready_label: bool
    claim_added_label: bool


@dataclass(frozen=True)
class FailedOutcome:
    cause: str
    open_pull_url: str | None
    last_lines: tuple[str, ...]
    kept_worktree: bool
    state: RunEnd = RunEnd.FAILED
    """How the Run ended: ``refused`` (a Policy refusal), ``interrupted`` or ``failed``."""
    report: PostMortem | None = None
    removed_worktree: bool = False
    """True when the Worktree was removed already, to make room on a full disk."""


@dataclass(frozen=True)
class SalvagedRun:
    """The Run a Salvage saves: its issue, record, branches, whether its branch is on origin
    now, the Lease's fence, and (on GitHub Actions) the workflow run's page."""

    ref: IssueRef
    run: Run
    branch: str
    base: str
    branch_on_origin: Callable[[], bool]
    fence: Callable[[], None]
    job_url: str | None = None
    remove_worktree: Callable[[Path], None] | None = None
    """Removes the Worktree at a path, on a full disk (adr/0041)."""


class Salvage:
    """Carries out a Failed run for one Run."""

    def __init__(
        self,
        salvaged: SalvagedRun,
        github: GitHubPort,
        tools: RunTools,
    ) -> None:
        ref, settings = salvaged.ref, tools.settings
        self._tools = tools
        self._allow_workflow_changes = settings.allow_workflow_changes_for(ref.owner, ref.repo)
        self._job_url = salvaged.job_url
        self._remove = salvaged.remove_worktree
        self._min_free = settings.min_free_disk_mb
        self._fence = salvaged.fence
        self._home = settings.home
        self._branch_on_origin_now = salvaged.branch_on_origin
        self._gh, self._ref = github, ref
        self._store, self._clock, self._scrub = tools.store, tools.clock, tools.scrub
        self._progress = tools.say
        self._run, self._branch, self._base = salvaged.run, salvaged.branch, salvaged.base
        self._ready_label = settings.ready_label
        self._public_url = settings.public_url
        self._in_progress_label = settings.in_progress_label

    def fail(self, failed: FailedRun) -> FailedOutcome:
        cause = self._scrub(str(failed.error) or failed.error.__class__.__name__)
        policy = is_policy_refusal(failed.error)
        self._progress(f"the Run failed: {cause}")
        if isinstance(failed.error, LeaseLost):
            return self._lost(failed, cause)
        full = full_disk.ended_on_one(failed.error, failed.worktree, self._home, self._min_free)
        head, pushed, kept = self._saved(failed, cause, policy, full)
        removed = (
            full
            and kept is None
            and full_disk.make_room(failed.worktree, self._remove, self._progress)
        )
        if full:
            # An agent may fill its home instead: its transcripts go too (no native Resume
            # after a Failed run needs them).
            agent_home = Home(self._home).agent_home(self._ref.owner, self._ref.repo, self._run.id)
            full_disk.remove_agent_home(agent_home, self._progress)
        found = self._guarded("looking up the pull request", lambda: self._pull_after(failed.pull))
        pull = found or failed.pull  # GitHub away: the one this Run knew, if any
        to_draft = pull is not None and pull.state == "open" and not pull.draft and not policy
        if to_draft and pull is not None and self._to_draft(pull):
            self._progress(f"turned {pull.html_url} back to draft")
        self._attempt(
            "recording the Failed run",
            lambda: self._record(failed, cause, policy, head, pull),
        )
        # Work kept only in the Worktree must not invite another Run on top of it.
        nothing_anywhere = not pushed and kept is None and pull is None
        releasing = nothing_anywhere and failed.claim_added_label and not self._branch_on_origin()
        # Only a Run that was stopped gets the Ready label back: any other failure would
        # happen again, and a daemon would run the issue again and again. A person asks.
        give_back = releasing and failed.claim_had_ready_label and stopped(failed.error)
        ask = releasing and failed.claim_had_ready_label and not give_back
        report = self._guarded("reading the Post-mortem", lambda: self.post_mortem(cause))
        self._attempt(
            "commenting on the issue",
            lambda: self._comment(failed, cause, head, pull, report, ask=ask),
        )
        if releasing:
            self._release_claim(give_back)
        lines = [cause]
        if kept is not None:
            lines.append(kept)
        lines.append(f"session log: {failed.last_log if failed.last_log else 'none'}")
        open_url = pull.html_url if pull is not None and pull.state == "open" else None
        return FailedOutcome(
            cause=cause,
            open_pull_url=open_url,
            last_lines=tuple(lines),
            kept_worktree=kept is not None,
            state=RunEnd.REFUSED if policy else ending_state(failed.error),
            report=report,
            removed_worktree=removed,
        )

    def post_mortem(self, cause: str | None) -> PostMortem | None:
        """The Run's Post-mortem from the database, or None (with a warning) when it cannot be
        read: the comment then goes without it rather than not at all."""
        try:
            sessions = self._store.run_sessions(self._run.id)
            events = (
                self._store.session_events(sessions[-1].id, last=LAST_LINES) if sessions else []
            )
        except ThirdshiftError as problem:
            self._progress(f"warning: could not read the Run's Sessions: {problem}")
            return None
        return post_mortem(self._run.id, cause, sessions, events, self._scrub)

    def _lost(self, failed: FailedRun, cause: str) -> FailedOutcome:
        """Another Run holds the issue now: nothing is pushed, drafted, labelled or posted (that
        would undo the successor's work); the work stays in the Worktree, and the record says
        why."""
        kept = None
        if failed.worktree is not None:
            self._attempt(
                "committing the work in the Worktree",
                lambda: self._commit_failure(failed.worktree, cause),
            )
            kept = self._kept(failed.worktree, None)
        self._attempt(
            "recording the Failed run",
            lambda: self._record(failed, cause, False, None, None),
        )
        lines = [cause, *([kept] if kept else [])]
        lines.append(f"session log: {failed.last_log if failed.last_log else 'none'}")
        return FailedOutcome(
            cause=cause,
            open_pull_url=None,
            last_lines=tuple(lines),
            kept_worktree=kept is not None,
            state=ending_state(failed.error),
            report=self.post_mortem(cause),
        )

    def _commit_failure(self, worktree: Worktree | None, cause: str) -> None:
        if worktree is not None and worktree.is_dirty():
            worktree.commit_all(f"thirdshift: failed run ({reason_of(cause)})")

    def _record(
        self,
        failed: FailedRun,
        cause: str,
        policy: bool,
        head: str | None,
        pull: PullRequestInfo | None,
    ) -> None:
        # A store away for a moment must not leave the Run "running" for the reaper.
        self._tools.retrying(
            lambda: self._store.finish_run(
                self._run.id,
                RunState.REFUSED if policy else RunState.FAILED,
                cause=cause,
                killed_work="\n".join(failed.killed_work) or None,
                last_session_log=str(failed.last_log) if failed.last_log else None,
                head_sha=head,
                pull_request_number=pull.number if pull else None,
            )
        )
        self._tools.retrying(lambda: full_disk.end_sessions_left(self._store, self._run.id, cause))

    def _saved(
        self, failed: FailedRun, cause: str, policy: bool, full: bool
    ) -> tuple[str | None, bool, str | None]:
        saved = self._guarded(
            "saving the work", lambda: self._save_work(failed, cause, policy, full=full)
        )
        if saved is not None or failed.worktree is None:
            return saved or (None, False, None)
        return None, False, self._kept(failed.worktree, None)  # it stays, whatever it holds

    def _save_work(
        self, failed: FailedRun, cause: str, policy: bool, *, full: bool = False
    ) -> tuple[str | None, bool, str | None]:
        """Commit and push what the Worktree holds. Returns (head, pushed, kept-worktree line).
        On a ``full`` disk, work that cannot be committed is given up (adr/0041)."""
        worktree = failed.worktree
        if worktree is None:
            return None, False, None
        try:
            if worktree.merge_in_progress():
                worktree.abort_merge()
                self._progress("aborted the unfinished merge")
            dirty = worktree.is_dirty()
            if not dirty and not self._new_commits(worktree):
                return worktree.head(), False, None  # nothing of ours to keep on origin
            if not policy:
                stamp = self._clock.now().isoformat(timespec="seconds")
                worktree.commit_all(
                    f"thirdshift: failed run ({reason_of(cause)})\n\n"
                    f"{stamp}, host {socket.gethostname()}. "
                    + (
                        "Uncommitted work at the time of the failure is included in this commit."
                        if dirty
                        else "Nothing was left uncommitted; this commit marks where the Run ended."
                    ),
                    allow_empty=True,
                )
                if dirty:
                    self._progress("committed the uncommitted work")
            head = worktree.head()
        except ThirdshiftError as problem:
            self._progress(f"warning: could not save the work in {worktree.path}: {problem}")
            found = full_disk.commits(worktree, self._new_commits, self._progress) if full else None
            if found is None:
                return None, False, self._kept(worktree, None)
            head, to_push = found
            if not to_push:
                return head, False, None  # nothing of ours to keep on origin
        return self._push(worktree, head)

    def _push(self, worktree: Worktree, head: str) -> tuple[str | None, bool, str | None]:
        try:
            push_checked(
                worktree,
                self._branch,
                self._base,
                self._scrub.findings,
                self._fence,
                say=self._progress,
                allow_workflow_changes=self._allow_workflow_changes,
            )
            head = worktree.head()  # a merge of commits pushed meanwhile moves it
            self._progress(f"pushed {self._branch} at {head[:7]}")
        except ThirdshiftError as problem:
            self._progress(
                f"could not push the failed run's work, so it exists only locally: {problem}"
            )
            return head, False, self._kept(worktree, head)
        return head, True, None

    def _new_commits(self, worktree: Worktree) -> bool:
        """Whether the Worktree holds work of ours to mark and keep on origin: a change from
        the Base branch, or a commit the Issue branch on origin lacks, even one that brings the
        files back to the Base branch's (a Repair undoing an earlier commit is work too)."""
        on_origin = worktree.remote_sha(self._branch)
        if on_origin is not None and not worktree.is_ancestor("HEAD", on_origin):
            return True
        return bool(worktree.changed_files(tracking(self._base)))

    def _kept(self, worktree: Worktree, head: str | None) -> str:
        at = f" at {head[:7]}" if head else ""
        return f"keeping the worktree {worktree.path} (branch {self._branch}{at})"

    def _pull_after(self, known: PullRequestInfo | None) -> PullRequestInfo | None:
        if known is not None:
            return self._gh.pull(self._ref.owner, self._ref.repo, known.number)
        pulls = self._gh.pulls_for_head(self._ref.owner, self._ref.repo, self._branch)
        return pulls[0] if pulls else None

    def _branch_on_origin(self) -> bool:
        # Unsure (git or GitHub away, a defect): keep the Claim rather than release it wrongly.
        found = self._guarded("looking for the branch on origin", self._branch_on_origin_now)
        return True if found is None else found

    def _comment(
        self,
        failed: FailedRun,
        cause: str,
        head: str | None,
        pull: PullRequestInfo | None,
        report: PostMortem | None,
        *,
        ask: bool = False,
    ) -> None:
        parts = [f"thirdshift could not finish this issue.\n\n**Cause:** {cause}"]
        if failed.killed_work:
            parts.append("**Background work that was killed:** " + "; ".join(failed.killed_work))
        where = f"`{self._branch}`" + (f" at `{head[:7]}`" if head else "")
        parts.append(f"**Work:** {where}" + (f", pull request #{pull.number}" if pull else ""))
        log_name = failed.last_log.name if failed.last_log is not None else None
        if report is not None:
            parts += markdown(report, log_name)
        else:
            parts.append(f"**See more:** `thirdshift show {self._run.id}`.")
        run_page = run_page_url(self._public_url, self._run.id)
        if run_page is not None:
            parts.append(run_page_part(run_page))
        if self._job_url:
            parts.append(f"**Job:** {self._job_url} (its log, and the Session logs as an artifact)")
        if ask:
            parts.append(
                f"Nothing reached origin. To run it again, add `{self._ready_label}` again."
            )
        # The comment is public: this machine's paths stay on it. Its cause, killed work and
        # last lines are the agent's words (the CLI's stderr among them), so it is defanged,
        # after scrubbing (a zero-width space inside a secret would hide it from the scrubber).
        body = defanged(
            self._scrub("\n\n".join(parts)).replace(str(self._home), "$THIRDSHIFT_HOME"),
            self._ref.full_name,
        )
        self._gh.upsert_marked_comment(
            self._ref.owner, self._ref.repo, self._ref.number, COMMENT_MARKER, body
        )

    def _release_claim(self, give_back: bool) -> None:
        def release() -> None:
            # One label at a time: a label a person added meanwhile stays.
            owner, repo, number = self._ref.owner, self._ref.repo, self._ref.number
            issue = self._gh.issue(owner, repo, number)
            busy = self._in_progress_label.lower()
            if give_back and self._ready_label.lower() not in [x.lower() for x in issue.labels]:
                self._gh.add_label(owner, repo, number, self._ready_label)
            for label in [label for label in issue.labels if label.lower() == busy]:
                self._gh.remove_label(owner, repo, number, label)

        if self._attempt("releasing the Claim", release):
            after = (
                f"{self._ready_label} is back"
                if give_back
                else f"add {self._ready_label} again to run it again"
            )
            self._progress(
                f"released the Claim on #{self._ref.number}: nothing reached origin; {after}"
            )

    def _to_draft(self, pull: PullRequestInfo) -> bool:
        return self._attempt(
            "turning the pull request back to draft",
            lambda: self._gh.convert_to_draft(self._ref.owner, self._ref.repo, pull.number),
        )

    def _attempt(self, what: str, action: Callable[[], object]) -> bool:
        """Run one salvage step; a problem is reported as a warning, never raised, so it
        cannot take the place of the cause."""
        return self._guarded(what, lambda: action() or True) is not None

    def _guarded(self, what: str, action: Callable[[], _T]) -> _T | None:
        return full_disk.warned_on_failure(what, action, self._progress, self._scrub)
