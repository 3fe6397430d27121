"""A Run: one issue to a pull request thirdshift stands behind, or a Failed run that loses
nothing.

Pre-flight first, before anything is created or labelled; then the Issue branch, the Claim, a
Worktree from thirdshift's own clone, the opening ``implement`` session, the deterministic
takeover (push, open or update the pull request from the agent's file, check it, mark it ready),
the Repair loop, and for a Merge run the Self-merge. Any other ending is a Failed run
(``thirdshift.runs.failed_run``).
"""

from __future__ import annotations

import contextlib
import shutil
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from thirdshift.defang import defanged, defanged_title, pull_request_body
from thirdshift.errors import (
    GitError,
    GitHubError,
    Interrupted,
    LeaseLost,
    NotClaimed,
    ThirdshiftError,
)
from thirdshift.git import ManagedClone, Worktree, tracking
from thirdshift.issue_url import IssueRef
from thirdshift.records import Comment, IssueInfo, PullRequestInfo, RepoInfo, Repository, Run
from thirdshift.runs.approval import ROLES_THAT_LABEL, text_sha256
from thirdshift.runs.branches import (
    BranchChoice,
    adoptable,
    branch_name,
    branch_number,
    choose_issue_branch,
    unadopted_ref,
)
from thirdshift.runs.claims import (
    CLAIM_MARKER,
    Claim,
    LeaseKeeper,
    add_in_progress,
    claim_comment,
    claim_labels,
    fenced,
    text_not_approved,
)
from thirdshift.runs.context import RunHooks, RunParts
from thirdshift.runs.failed_run import COMMENT_MARKER, FailedRun, Salvage
from thirdshift.runs.loop_outside import RunLoopOutside
from thirdshift.runs.notices import announce_run_end
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.ports import GitHubPort, SessionSource
from thirdshift.runs.post_mortem import PostMortem
from thirdshift.runs.prompts import (
    PULL_REQUEST_FILE,
    cut_bytes,
    implement_prompt,
    trusted_comments,
)
from thirdshift.runs.repair_loop import (
    Budgets,
    InheritedFailure,
    LoopResult,
    RepairLoop,
    RunFailed,
)
from thirdshift.runs.review import (
    NO_FEEDBACK,
    Feedback,
    read_feedback,
    reply_marker,
    review_prompt,
    review_reply,
)
from thirdshift.runs.secret_check import push_checked
from thirdshift.sessions import EVENTS_IN_RESUME, LaterStepFailed, Sessions, follow_up_preamble
from thirdshift.store.retry import retrying

PERMISSIONS_THAT_PUSH = frozenset({"admin", "maintain", "write"})
PASSED_OVER = " is passed over: "
"""Between the issue and why, in the Not claimed of a Run whose approval the text voided."""


def is_integration(login: str) -> bool:
    """Whether ``login`` is a GitHub App's or a workflow's (``<slug>[bot]``), not a person's."""
    return login.endswith("[bot]")


def token_role(github: GitHubPort, owner: str, name: str, login: str) -> str:
    """The role of the token's own user (``login``) on the repository. GitHub shows a
    permission only to those who can push, so a refusal (403) is the answer "no push"; an App
    or a workflow is no collaborator (404), so its token's own permissions decide, and a push or
    a label it may not make fails naming itself. Any other 404 (no such repository) raises."""
    try:
        return github.permission(owner, name, login)
    except GitHubError as error:
        if error.status == 404 and is_integration(login):
            return "write"
        if error.status == 403:
            return "no push"
        raise


def check_harness_and_token(
    github: GitHubPort,
    source: SessionSource,
    environ: Mapping[str, str],
    owner: str,
    name: str,
    *,
    needs: str,
) -> None:
    """Pre-flight of anything that starts a session and writes to GitHub: the Harness's CLI is
    on PATH and the token may push (``needs`` says what for, in the refusal)."""
    if shutil.which(source.executable, path=environ.get("PATH")) is None:
        raise ThirdshiftError(
            f"{source.executable} (the {source.harness_name} Harness) is not on PATH; "
            "install it or choose another with --harness"
        )
    login = github.authenticated_login()
    permission = token_role(github, owner, name, login)
    if permission not in PERMISSIONS_THAT_PUSH:
        raise ThirdshiftError(
            f"the token's user {login} has {permission} permission on {owner}/{name}; "
            f"thirdshift needs write {needs}, so use a token with write access"
        )


EARLIER_REPORT_BYTES = 6000


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


@dataclass(frozen=True)
class _KeptWork:
    """What an earlier Run left in the clone: ``left`` to adopt, or nothing, then perhaps
    ``set_aside`` (a head thirdshift never recorded, kept under a ref, never pushed)."""

    left: str | None
    set_aside: bool


class Delivery:
    """Runs one issue. The composition root builds it, with real adapters or (for the
    orchestration tests) the GitHub fake, scripted sessions and bare repositories on disk."""

    def __init__(self, parts: RunParts, hooks: RunHooks) -> None:
        self._settings = parts.settings
        self._github = parts.github
        self._store = parts.store
        self._session_source = parts.session_source
        self._clones = parts.clones
        self._environ = parts.environ
        self._scrub = parts.scrub
        self._clock = parts.clock
        self._progress = hooks.progress
        self._interrupt = hooks.interrupt
        self._emit_url = hooks.emit_url
        self._claimant = hooks.claimant
        self._stopped_because = hooks.stopped_because
        self._on_recorded = hooks.on_recorded
        self._notifier = hooks.notifier

    def say(self, line: str) -> None:
        self._progress(self._scrub(line))

    # -- the Run -------------------------------------------------------------------------------

    def run(self, request: RunRequest) -> RunOutcome:
        """Run the issue to its end: a ready (or merged) pull request, or a Failed run. An
        error before the Run is recorded (pre-flight, ``NotClaimed``) is raised, having
        changed nothing."""
        ref = request.issue
        number = ref.number
        repo, issue = self._preflight(ref)
        self._check_interrupt()
        base = request.base or repo.default_branch
        clone = self._clones(ref, repo)
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
        # GitHub's own spelling: an Issue URL in another case is the same repository, with the
        # same Worktrees (a daemon looks for kept ones by that spelling too).
        worktree_path = (
            self._settings.home / "worktrees" / f"{repo.owner}-{repo.name}-{choice.branch}"
        )
        repository = self._store.ensure_repository(repo.owner, repo.name)
        keeper = LeaseKeeper(
            self._store,
            repository,
            number,
            self._settings.lease_seconds,
            on_lost=self._interrupt.set,  # its session stops at once
            owner=self._claimant,
            clock=self._clock,
            release_seconds=self._settings.salvage_wait_seconds,
        )
        with keeper as lease:
            issue = self._still_wanted(request, repository, issue)
            self._check_approval(request, repository, issue)
            # Under the Lease: a live Run's Worktree is that Run's business, not left-overs.
            busy = self._session_source.still_working_in(worktree_path)
            if busy:
                raise ThirdshiftError(
                    f"processes of an earlier Run still work in {worktree_path} (pids "
                    f"{', '.join(map(str, busy))}); stop them, then run thirdshift again"
                )
            kept = self._kept_work(clone, worktree_path, repository, number, choice.branch, remote)
            left = kept.left
            if left is not None:
                self._adopt(clone, worktree_path, choice.branch, base, left, keeper.check)
                clone.sync()
                remote = clone.remote_branches()
                choice = choose_issue_branch(number, remote, self._issue_pulls(ref, remote))
            feedback = self._review_feedback(
                ref, repository, choice.open_pull, rescue_of=request.rescue_of
            )
            if request.review_of is not None and not feedback:
                raise NotClaimed(f"the review feedback on {ref}'s pull request was taken meanwhile")
            # An interrupt before the Claim changes nothing: no record, no label, no comment.
            self._check_interrupt()
            ready_taken = self._take_ready(ref, issue, keeper.check)
            if choice.continuation:
                self.say(f"continuing {choice.branch}, which an earlier Run left on origin")
            try:
                record = self._store.start_run_under(
                    lease,
                    repository,
                    number,
                    kind="merge" if request.merge else "run",
                    base_branch=base,
                    issue_branch=choice.branch,
                    harness=self._session_source.harness_name,
                    model=self._session_source.model,
                    text_sha256=text_sha256(issue.title, issue.body),
                )
            except ThirdshiftError:
                self._give_ready_back(ref, ready_taken)
                raise
            if record is None:  # paused past the Lease before this Run was even recorded
                # The Run holding the issue now may want its Ready label; its in-progress stays.
                self._give_ready_back(ref, ready_taken, busy_too=False)
                raise keeper.lost_error()
            self._on_recorded(record.id)
            self.say(f"Run {record.id} on {ref}: {issue.title}")
            if request.rescue_of is not None:
                self.say(f"taking over from Run {request.rescue_of}, which crashed")
            return self._deliver(
                request,
                record,
                clone,
                issue,
                choice,
                base,
                worktree_path,
                keeper,
                ready_taken=ready_taken is not None,
                feedback=feedback,
                default_branch=repo.default_branch,
                work_set_aside=kept.set_aside,
            )

    def _review_feedback(
        self,
        ref: IssueRef,
        repository: Repository,
        pull: PullRequestInfo | None,
        *,
        rescue_of: int | None = None,
    ) -> Feedback:
        """The review feedback waiting on the issue's open pull request, when thirdshift opened
        it (a person's own pull request is theirs to answer). A Rescue finds again what the
        crashed Run had taken: that Run never answered it."""
        # A draft is not skipped here: this Run was asked for (a label, by hand). The daemon
        # proposes no review Repair of a draft of its own accord (a person may hold it).
        if pull is None or pull.state != "open":
            return NO_FEEDBACK
        me = self._github.authenticated_login()
        if pull.author.lower() != me.lower():  # unknown counts as not ours
            return NO_FEEDBACK
        rescued = self._store.feedback_of_run(rescue_of) if rescue_of is not None else frozenset()
        roles: dict[str, str] = {}

        def role_of(login: str) -> str:
            if login not in roles:
                try:
                    roles[login] = self._github.permission(ref.owner, ref.repo, login)
                except GitHubError:
                    roles[login] = "none"
            return roles[login]

        feedback = read_feedback(
            self._github,
            ref.owner,
            ref.repo,
            pull.number,
            me=me,
            handle=self._settings.review_handle,
            role_of=role_of,
            handled=self._store.handled_feedback(repository, pull.number) - rescued,
        )
        if feedback.ignored:
            self.say(
                f"leaving {feedback.ignored} review item(s) on {pull.html_url} by bots or by "
                "people without write permission out of every prompt"
            )
        if feedback and not rescued:
            spent = self._store.review_repairs(repository, pull.number)
            if spent >= self._settings.max_review_repairs:
                self.say(
                    f"review feedback waits on {pull.html_url}, but its "
                    f"{self._settings.max_review_repairs} review Repairs (max_review_repairs) "
                    "are spent: it is left for people"
                )
                return NO_FEEDBACK
        return feedback

    def _take_review(
        self, record: Run, pull: PullRequestInfo, feedback: Feedback, from_run: int | None
    ) -> str:
        """Record the feedback as this Run's (each piece handled once, whatever happens
        next), and the review session's kind, ``review-<i>``; ``implement`` when another Run
        took all of it meanwhile."""
        taken = self._store.take_feedback(
            record.repository, pull.number, feedback.keys, record.id, from_run=from_run
        )
        if not taken:
            return "implement"
        count = self._store.review_repairs(record.repository, pull.number)
        who = ", ".join(feedback.reviewers)
        self.say(
            f"answering the review of {pull.html_url} by {who} ({len(feedback.notes)} "
            f"comment(s)) in session review-{count}"
        )
        return f"review-{count}"

    def _reply(
        self,
        gh: GitHubPort,
        ref: IssueRef,
        pull: PullRequestInfo,
        record: Run,
        feedback: Feedback,
        worktree: Worktree,
        since: str,
        result: LoopResult,
    ) -> None:
        """One marked reply on the pull request saying what the review Repair changed."""
        body = review_reply(
            feedback,
            run_id=record.id,
            commits=worktree.log_subjects(since),
            head=result.head,
            checks=checks_line(result),
        )
        try:
            gh.upsert_marked_comment(
                ref.owner, ref.repo, pull.number, reply_marker(record.id), self._scrub(body)
            )
            self.say(f"replied to the review on {pull.html_url}")
        except ThirdshiftError as problem:
            self.say(f"warning: could not reply to the review on {pull.html_url}: {problem}")

    def _take_ready(self, ref: IssueRef, issue: IssueInfo, fence: Callable[[], None]) -> str | None:
        """The first step of the Claim on GitHub, taken under the Lease: the Ready label off.
        Runs that share no database (a workflow, a daemon elsewhere) can both hold a Lease of
        their own; GitHub answers only one of two removals of a label, so the other Run backs
        off, ``NotClaimed``, having changed nothing. The label's name as the issue spells it,
        or None when the issue had no Ready label (a Run by hand, a Continuation)."""
        wanted = self._settings.ready_label.lower()
        ready = next((label for label in issue.labels if label.lower() == wanted), None)
        if ready is None:
            return None
        fence()
        if not self._github.take_label(ref.owner, ref.repo, ref.number, ready):
            raise NotClaimed(
                f"{ref} was claimed on GitHub by another Run first (it took the {ready} label "
                "off); this Run changed nothing"
            )
        # At once in-progress, before the Run is recorded: an issue must never be left with
        # neither label (a crash then would leave nothing for a daemon's sweep to find).
        busy = self._settings.in_progress_label
        try:
            add_in_progress(self._github, ref, busy)
        except ThirdshiftError:
            with contextlib.suppress(ThirdshiftError):
                self._github.add_label(ref.owner, ref.repo, ref.number, ready)
            raise
        self.say(f"labelling #{ref.number} {busy}, in place of {ready}")
        return ready

    def _open_base_fix(
        self,
        gh: GitHubPort,
        ref: IssueRef,
        base: str,
        failure: InheritedFailure,
        default_branch: str,
    ) -> IssueInfo | None:
        """The Base fix issue for the checks red on the Base branch (one per branch and set
        of checks: an open one is found again by its marker, never opened twice), labelled to
        run as a Merge run, and made a blocker of this issue. None, with a warning, when GitHub
        would not have it: the Failed run still says what to do by hand."""
        checks = ", ".join(sorted(failure.checks))
        marker = base_fix_marker(base, failure.checks)
        if base != default_branch:
            # The daemon runs a Base fix against the default branch; another base is a
            # person's to fix.
            return None
        try:
            ready, merge = self._settings.ready_label, self._settings.merge_label
            me = gh.authenticated_login()

            def existing() -> list[IssueInfo]:
                found = [
                    gh.issue(ref.owner, ref.repo, summary.number)
                    for summary in gh.issues_labelled(ref.owner, ref.repo, merge, state="all")
                    if not summary.is_pull_request
                ]
                # Only thirdshift's own issues: a person's that quotes the marker is not one.
                ours = [i for i in found if same_login(i.author, me) and marker in i.body]
                return sorted(ours, key=lambda i: i.number)

            earlier = existing()
            if any(i.state != "open" for i in earlier) and not any(
                i.state == "open" for i in earlier
            ):
                # A person closed the Base fix for these checks: theirs to decide, not again.
                closed = next(i for i in earlier if i.state != "open")
                self.say(
                    f"a Base fix for {checks} on {base} was closed ({closed.html_url}); "
                    "thirdshift opens no other"
                )
                return None
            issue = next((i for i in earlier if i.state == "open"), None)
            if issue is None:
                gh.ensure_label(
                    ref.owner, ref.repo, merge, "5319e7", "thirdshift runs this as a Merge run"
                )
                issue = gh.open_issue(
                    ref.owner,
                    ref.repo,
                    title=defanged_title(f"Fix {checks} on {base}", ref.full_name),
                    body=base_fix_body(base, failure, marker, ref.full_name),
                    labels=[ready, merge],
                )
                self.say(f"opened {issue.html_url} to fix {checks} on {base}")
                # Two Runs meeting the same red Base at once may each open one: the lowest
                # number stays, the other is closed again.
                first = next(i for i in existing() if i.state == "open")
                if first.number != issue.number:
                    gh.close_issue(ref.owner, ref.repo, issue.number)
                    self.say(f"closed {issue.html_url} again: {first.html_url} was first")
                    issue = first
        except ThirdshiftError as problem:
            self.say(f"warning: could not open an issue to fix {checks} on {base}: {problem}")
            return None
        try:
            gh.block_issue(ref.owner, ref.repo, ref.number, issue.number)
        except ThirdshiftError as problem:
            self.say(
                f"warning: could not mark #{ref.number} blocked by {issue.html_url}: {problem}"
            )
        return issue

    def _is_base_fix(self, issue: IssueInfo) -> bool:
        """Whether ``issue`` is a Base fix: one thirdshift opened, carrying its marker (a
        person's issue quoting the marker is an issue like any other)."""
        if BASE_FIX_MARKER_PREFIX not in issue.body:
            return False
        try:
            return same_login(issue.author, self._github.authenticated_login())
        except ThirdshiftError:
            return False

    def _give_ready_back(self, ref: IssueRef, ready: str | None, *, busy_too: bool = True) -> None:
        """Undo a Claim on GitHub made before the Run could be recorded (best effort: the
        issue gets its Ready label back and, with ``busy_too``, loses in-progress)."""
        if ready is None:
            return
        with contextlib.suppress(ThirdshiftError):
            self._github.add_label(ref.owner, ref.repo, ref.number, ready)
            if busy_too:
                self._github.remove_label(
                    ref.owner, ref.repo, ref.number, self._settings.in_progress_label
                )

    def _deliver(
        self,
        request: RunRequest,
        record: Run,
        clone: ManagedClone,
        issue: IssueInfo,
        choice: BranchChoice,
        base: str,
        worktree_path: Path,
        keeper: LeaseKeeper,
        *,
        ready_taken: bool,
        feedback: Feedback = NO_FEEDBACK,
        default_branch: str = "",
        work_set_aside: bool = False,
    ) -> RunOutcome:
        ref = request.issue
        gh = fenced(self._github, keeper.check)
        owner, name, number = ref.owner, ref.repo, ref.number
        claim = Claim(had_ready_label=ready_taken, added_label=ready_taken)
        reviewed_from: str | None = None  # the head a review Repair started from
        worktree: Worktree | None = None
        sessions: Sessions | None = None
        pull: PullRequestInfo | None = choice.open_pull
        salvage = Salvage(
            github=gh,
            store=self._store,
            scrub=self._scrub,
            clock=self._clock,
            progress=self.say,
            ref=ref,
            run=record,
            branch=choice.branch,
            base=base,
            ready_label=self._settings.ready_label,
            in_progress_label=self._settings.in_progress_label,
            branch_on_origin=lambda: clone.has_remote_branch(choice.branch),
            fence=keeper.check,
            home=self._settings.home,
            job_url=request.job_url,
            store_wait_seconds=self._settings.salvage_wait_seconds,
            allow_workflow_changes=self._workflows_allowed(ref.owner, ref.repo),
        )
        try:
            claim = claim_labels(
                gh,
                ref,
                issue,
                ready_label=self._settings.ready_label,
                in_progress_label=self._settings.in_progress_label,
                say=self.say,
                ready_taken=ready_taken,
            )
            claim_comment(
                gh,
                ref,
                run_id=record.id,
                branch=choice.branch,
                claimant=self._scrub(self._claimant),
                continuation=choice.continuation,
                rescue_of=request.rescue_of,
            )
            start = tracking(choice.branch) if choice.continuation else tracking(base)
            clone.remove_worktree(worktree_path)
            worktree = clone.add_worktree(worktree_path, choice.branch, start)
            worktree.on_head = self._head_recorder(record.id)
            worktree.exclude(f"/{PULL_REQUEST_FILE}")
            shown = start.removeprefix("refs/remotes/")
            self.say(f"working in {worktree.path} on {choice.branch}, from {shown}")
            sessions = self._session_source.sessions(record.id, worktree.path, ref)
            with sessions.failures_name_killed_work():
                self._check_interrupt()
                everything = gh.issue_comments(owner, name, number)
                # thirdshift's own marked comments are not the discussion: the claim says
                # nothing, and a Failed-run report reaches the prompt as the earlier Run's. A
                # person's comment that quotes a marker is discussion like any other.
                me = gh.authenticated_login()
                ours = [
                    c
                    for c in everything
                    if same_login(c.author, me)
                    and (COMMENT_MARKER in c.body or CLAIM_MARKER in c.body)
                ]
                reports = [c for c in ours if COMMENT_MARKER in c.body]
                comments = [c for c in everything if c not in ours]
                trusted, left_out = trusted_comments(comments, self._roles(ref, comments))
                if left_out:
                    self.say(
                        f"leaving {left_out} comment(s) by people without triage or write "
                        "permission out of the prompt"
                    )
                kind, prompt = "implement", ""
                if feedback and pull is not None:
                    kind = self._take_review(record, pull, feedback, request.rescue_of)
                if kind != "implement" and pull is not None:
                    reviewed_from = worktree.head()
                    prompt = review_prompt(
                        self._earlier_run(record, reports, worktree.remote_sha(choice.branch)),
                        issue=issue,
                        pull=pull,
                        feedback=feedback,
                        issue_branch=choice.branch,
                    )
                else:
                    feedback = NO_FEEDBACK
                    prompt = implement_prompt(
                        issue,
                        trusted,
                        left_out=left_out,
                        base_branch=base,
                        issue_branch=choice.branch,
                        continuation=choice.continuation,
                        pull_request_url=pull.html_url if pull else None,
                        earlier=(
                            self._earlier_run(record, reports, worktree.remote_sha(choice.branch))
                            if choice.continuation
                            else ""
                        ),
                    )
                done = (
                    self._turn_done(request.rescue_of)
                    # Work kept aside is not on the branch: its turn must be taken again.
                    if kind == "implement" and not work_set_aside
                    else None
                )
                if done is not None:
                    # Its work is on the branch (the takeover pushed the kept Worktree):
                    # opening the session again would pay for the same turn twice.
                    self.say(
                        f"not opening the {done} session again: Run {request.rescue_of}'s "
                        "ended its turn before the crash (its result is in its Session log)"
                    )
                else:
                    try:
                        sessions.run(kind, self._scrub(prompt))
                    finally:  # the session's end is a head thirdshift stands behind (adr/0027)
                        worktree.record_head()
                self._check_interrupt()
                pull = self._takeover(ref, worktree, choice, base, pull, gh, keeper.check)
                opened = pull.number
                retrying(  # the pull request is open: a blip must not fail the Run now
                    lambda: self._store.update_run(record.id, pull_request_number=opened),
                    seconds=self._settings.salvage_wait_seconds,
                    sleep=self._clock.sleep,
                    monotonic=self._clock.monotonic,
                )
                outside = RunLoopOutside(
                    github=gh,
                    store=self._store,
                    settings=self._settings,
                    scrub=self._scrub,
                    clock=self._clock,
                    say=self.say,
                    interrupt=self._interrupt,
                    ref=ref,
                    worktree=worktree,
                    sessions=sessions,
                    record=record,
                    base=base,
                    pull=pull,
                    fence=keeper.check,
                    fixing_base=self._is_base_fix(issue),
                )
                result = RepairLoop(
                    outside,
                    Budgets(self._settings.max_repairs, self._settings.max_upstream_moves),
                    merge=request.merge,
                ).run()
                pull = self._finish(ref, worktree, pull, result, gh)
        except Exception as error:  # whatever went wrong, the work is saved first
            # An interrupt no longer cuts waits short: the salvage keeps GitHub's retries.
            self._clock.salvaging(self._settings.salvage_wait_seconds)
            failure = self._as_failure(error, sessions, keeper)
            base_fix: IssueInfo | None = None
            # A Base fix red from the same checks failed at its one job: no Base fix for it.
            own_fix = self._is_base_fix(issue)
            if isinstance(failure, InheritedFailure) and self._settings.base_fix and not own_fix:
                base_fix = self._open_base_fix(gh, ref, base, failure, default_branch)
                if base_fix is not None:
                    failure = InheritedFailure(
                        f"{failure}; thirdshift opened {base_fix.html_url} to fix it as a Merge "
                        f"run first, and #{number} waits for it (blocked by it) to run again",
                        failure.checks,
                        failure.base_sha,
                    )
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
            if base_fix is not None:  # Ready again, for once its blocker is closed
                with contextlib.suppress(ThirdshiftError):
                    gh.add_label(owner, name, number, self._settings.ready_label)
            if worktree is not None and not outcome.kept_worktree:
                self._remove_worktree(clone, worktree.path)
            if outcome.open_pull_url:
                self._emit_url(outcome.open_pull_url)
            self._announce(
                record,
                issue,
                outcome.state,
                cause=outcome.cause,
                pull_url=outcome.open_pull_url,
                report=outcome.report,
            )
            for line in outcome.last_lines:
                self._progress(self._scrub(line))
            return RunOutcome(
                outcome.state,
                1,
                run_id=record.id,
                pull_request_url=outcome.open_pull_url,
                cause=outcome.cause,
            )
        # The goal is reached: from here on a problem is a warning, never a Failed run.
        if feedback and reviewed_from is not None:
            self._reply(gh, ref, pull, record, feedback, worktree, reviewed_from, result)
        try:
            # Tried again while the store is away: a Run left "running" would be reaped as
            # crashed and Rescued, paying for its work again.
            retrying(
                lambda: self._store.finish_run(
                    record.id,
                    "succeeded",
                    head_sha=result.head,
                    last_session_log=str(sessions.last_log) if sessions.last_log else None,
                ),
                seconds=self._settings.salvage_wait_seconds,
                sleep=self._clock.sleep,
                monotonic=self._clock.monotonic,
            )
        except ThirdshiftError as problem:  # an interrupt included
            self.say(f"warning: could not record the Run's success: {problem}")
        self._remove_worktree(clone, worktree.path)
        state = "merged" if result.merged else "ready"
        self.say(f"pull request {pull.html_url} is {state}")
        self._emit_url(pull.html_url)
        self._announce(record, issue, state, pull_url=pull.html_url)
        return RunOutcome(
            state, 0, run_id=record.id, pull_request_url=pull.html_url, checks=checks_line(result)
        )

    def _announce(
        self,
        record: Run,
        issue: IssueInfo,
        state: str,
        *,
        cause: str | None = None,
        pull_url: str | None = None,
        report: PostMortem | None = None,
    ) -> None:
        announce_run_end(
            store=self._store,
            notifier=self._notifier,
            scrub=self._scrub,
            progress=self.say,
            run=record,
            issue_url=issue.html_url,
            state=state,
            cause=cause,
            pull_request_url=pull_url,
            report=report,
        )

    def _still_wanted(
        self, request: RunRequest, repository: Repository, seen: IssueInfo
    ) -> IssueInfo:
        """Under the Lease, the issue as the daemon chose it, or ``NotClaimed``: between its
        poll and this Lease another daemon may have run the issue to its end."""
        if not request.expect_ready and request.rescue_of is None and request.review_of is None:
            return seen
        ref = request.issue
        earlier = request.rescue_of if request.rescue_of is not None else request.review_of
        if earlier is not None:
            latest = self._store.latest_run(repository, ref.number)
            if latest is None or latest.id != earlier:
                raise NotClaimed(
                    f"{ref} was taken over by Run {latest.id if latest else '?'} meanwhile"
                )
            return seen
        issue = self._github.issue(ref.owner, ref.repo, ref.number)
        ready = self._settings.ready_label.lower()
        if issue.state != "open" or ready not in {label.lower() for label in issue.labels}:
            raise NotClaimed(f"{ref} is no longer open with {self._settings.ready_label}")
        return issue

    def _check_approval(
        self, request: RunRequest, repository: Repository, issue: IssueInfo
    ) -> None:
        """Under the Lease, before the Claim: ``NotClaimed`` when the issue's text is no longer
        what a person who may label approved. A Run by hand of an issue without the Ready label
        is approved by whoever started it."""
        ready = self._settings.ready_label
        labelled = ready.lower() in {label.lower() for label in issue.labels}
        asked = request.expect_ready or request.rescue_of is not None
        if not (asked or request.review_of is not None or labelled):
            return
        ref = request.issue
        me = self._github.authenticated_login().lower()
        roles: dict[str, str] = {}

        def may_label(login: str) -> bool:
            if login.lower() == me:
                return True  # thirdshift's own edit (a Base fix it opened)
            if login not in roles:
                try:
                    roles[login] = self._github.permission(ref.owner, ref.repo, login)
                except GitHubError:
                    roles[login] = "none"
            return roles[login] in ROLES_THAT_LABEL

        reason = text_not_approved(
            self._github,
            (ref.owner, ref.repo, ref.number),
            title=issue.title,
            body=issue.body,
            ready_label=ready,
            earlier=self._store.latest_run(repository, ref.number),
            may_label=may_label,
            own_login=me,
        )
        if reason is not None:
            raise NotClaimed(f"{ref}{PASSED_OVER}{reason}")

    def _kept_work(
        self,
        clone: ManagedClone,
        path: Path,
        repository: Repository,
        number: int,
        branch: str,
        remote: Mapping[str, str],
    ) -> _KeptWork:
        """What the Worktree an earlier Run kept at ``path`` holds that is not on origin, when it
        may be adopted; else nothing (and whether it was set aside). The clone is shared and the
        agents of other Runs can move its refs, so kept work (a Worktree's, a local Issue
        branch's) at a head thirdshift never recorded for this branch, and that origin's branch
        does not hold, is never adopted: it is kept aside under a ref that says so, and the Run
        starts from origin."""
        left = clone.unpushed_work(path)
        kept = clone.kept_worktree(path, branch) if left is not None else None
        where = f"the worktree {path}" if kept is not None else "the managed clone"
        try:
            head = kept.head() if kept is not None else clone.local_head(branch)
        except GitError as problem:
            self.say(f"not adopting {branch} in {where}: its head cannot be read ({problem})")
            # Unknown is not adopted: a Rescue takes the crashed turn again.
            return _KeptWork(None, set_aside=True)
        if head is None:
            return _KeptWork(None, set_aside=False)
        on_origin = remote.get(branch)
        held = on_origin is not None and clone.is_ancestor(head, on_origin)
        recorded = self._store.recorded_heads(repository, number, branch)
        if adoptable(head, recorded, held_by_origin=held):
            return _KeptWork(left, set_aside=False)
        kept_sha, loose = head, ""
        if kept is not None and kept.is_dirty():
            # Set aside with it, not lost; it is never pushed.
            kept.commit_all("thirdshift: uncommitted work of a Worktree that was not adopted")
            kept_sha, loose = kept.head(), " with the Worktree's uncommitted work"
        aside = unadopted_ref(branch, head)
        clone.keep_aside(aside, kept_sha)
        self.say(
            f"not adopting {branch} in {where}: its head {head[:7]} is not one thirdshift "
            f"recorded for #{number} (the agent of another Run may have moved it); kept it "
            f"aside{loose} as {aside}, and starting from origin"
        )
        return _KeptWork(None, set_aside=True)

    def _head_recorder(self, run_id: int) -> Callable[[str], None]:
        """Records each head thirdshift leaves the Run's branch at. A head the store missed is
        only one a later Run will not adopt, so a failure is a warning."""

        def record(sha: str) -> None:
            try:
                self._store.record_branch_head(run_id, sha)
            except ThirdshiftError as problem:
                self.say(
                    f"warning: could not record the head {sha[:7]} of Run {run_id} ({problem}); "
                    "a Worktree kept at it will not be adopted"
                )

        return record

    def _adopt(
        self,
        clone: ManagedClone,
        path: Path,
        branch: str,
        base: str,
        left: str,
        fence: Callable[[], None],
    ) -> None:
        """Push what an earlier Run left in its Worktree (it died before saving it): committed
        as it is, secret-checked like every push. A Continuation then starts from it."""
        self.say(f"the worktree {path} from an earlier Run holds {left}; pushing it to {branch}")
        kept = clone.kept_worktree(path, branch)
        kept.commit_all("thirdshift: work an earlier Run left in its Worktree")
        try:
            push_checked(
                kept,
                branch,
                base,
                self._scrub.findings,
                fence,
                say=self.say,
                allow_workflow_changes=self._workflows_allowed(clone.owner, clone.name),
            )
        except ThirdshiftError as error:
            raise ThirdshiftError(
                f"the worktree {path} from an earlier Run holds work that is not on origin "
                f"({left}) and thirdshift could not push it: {error}"
            ) from error

    def _workflows_allowed(self, owner: str, name: str) -> bool:
        return self._settings.allow_workflow_changes_for(owner, name)

    def _remove_worktree(self, clone: ManagedClone, path: Path) -> None:
        try:
            clone.remove_worktree(path)
        except ThirdshiftError as problem:
            self.say(f"warning: could not remove the worktree {path}: {problem}")

    def _turn_done(self, rescue_of: int | None) -> str | None:
        """For a Rescue: the kind of the crashed Run's last session when that session had
        ended its turn (recorded ended, or its result in its Session log), else None."""
        if rescue_of is None:
            return None
        crashed = self._store.run_sessions(rescue_of)
        if not crashed:
            return None
        last = crashed[-1]
        if last.state == "ended" or self._session_source.turn_ended(
            last.harness, Path(last.log_path)
        ):
            return last.kind
        return None

    def _earlier_run(
        self, record: Run, reports: Sequence[Comment] = (), head: str | None = None
    ) -> str:
        """What the last Run on this issue did and why it ended, for a Continuation's prompt,
        from the database (never from a Harness transcript); when the database knows no earlier
        Run (it ran on another machine, a runner whose database died with its job), from the
        Failed-run report thirdshift left on the issue. That report is the last Run's only when
        it names the branch's head on origin (``head``); otherwise a later Run went further."""
        earlier = self._store.earlier_runs(record, limit=1)
        if not earlier:
            if not reports:
                return ""
            report = reports[-1].body.replace(COMMENT_MARKER, "").strip()
            if head is not None and f"at `{head[:7]}`" in report:
                opening = "The earlier Run ran elsewhere and left no record here; its report on "
                opening += "the issue:\n"
            else:
                opening = (
                    "An earlier Run ran elsewhere and failed; a later Run may have gone further "
                    "since (the branch has moved). Its report on the issue:\n"
                )
            return self._scrub(
                opening
                + cut_bytes(report, EARLIER_REPORT_BYTES, "[the rest of the report is left out]")
                + "\n"
            )
        history = self._store.issue_history(record, last_events=EVENTS_IN_RESUME)
        if history:
            cap = self._settings.follow_up_preamble_tokens
            return self._scrub(follow_up_preamble(history, cap_tokens=cap))
        last = earlier[0]  # it ran no session: how it ended is all there is
        if last.state in ("running", "crashed"):  # it never recorded an ending itself
            ending = "The earlier Run stopped without recording how it ended (its process died)"
        else:
            ending = f"The earlier Run ended {last.state}" + (
                f": {last.cause}" if last.cause else ""
            )
        return self._scrub(f"{ending}.\n")

    # -- steps ---------------------------------------------------------------------------------

    def _preflight(self, ref: IssueRef) -> tuple[RepoInfo, IssueInfo]:
        gh = self._github
        check_harness_and_token(
            gh, self._session_source, self._environ, ref.owner, ref.repo, needs="to push"
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

    def _roles(self, ref: IssueRef, comments: Sequence[Comment]) -> dict[str, str]:
        """Each commenter's role on the repository; one GitHub cannot tell counts as none."""
        roles: dict[str, str] = {}
        for author in sorted({comment.author for comment in comments}):
            try:
                roles[author] = self._github.permission(ref.owner, ref.repo, author)
            except GitHubError:
                roles[author] = "none"
        return roles

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

    def _takeover(
        self,
        ref: IssueRef,
        worktree: Worktree,
        choice: BranchChoice,
        base: str,
        pull: PullRequestInfo | None,
        gh: GitHubPort,
        fence: Callable[[], None],
    ) -> PullRequestInfo:
        if worktree.is_dirty() and worktree.commit_all(
            "thirdshift: work the implement session left uncommitted"
        ):
            self.say("committed work the session left uncommitted")
        if worktree.is_ancestor("HEAD", tracking(base)):
            raise ThirdshiftError(
                f"the implement session made no commits on {choice.branch}; there is nothing to "
                "open a pull request for"
            )
        self.say(f"pushing {choice.branch}")
        push_checked(
            worktree,
            choice.branch,
            base,
            self._scrub.findings,
            fence,
            say=self.say,
            allow_workflow_changes=self._workflows_allowed(ref.owner, ref.repo),
        )
        written = self._pull_request_text(ref, worktree)
        title, body = written or self._default_text(ref)
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
        elif written is not None:
            pull = gh.update_pull(ref.owner, ref.repo, pull.number, title=title, body=body)
            self.say(f"updated pull request {pull.html_url}")
        else:  # a Continuation's session that wrote nothing keeps the pull request's own text
            pull = gh.pull(ref.owner, ref.repo, pull.number)
            self.say(f"kept the title and body of pull request {pull.html_url}")
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

    def _pull_request_text(
        self, ref: IssueRef, worktree: Worktree, *, say: bool = True
    ) -> tuple[str, str] | None:
        """The title and body the agent wrote, defanged, with thirdshift's one ``Closes #n``,
        or None when it wrote no Pull request file."""
        text = worktree.read_agent_file(PULL_REQUEST_FILE)
        if text is None:
            if say:
                self.say(f"the session wrote no {PULL_REQUEST_FILE}")
            return None
        first, _, rest = text.strip().partition("\n")
        title = first.lstrip("# ").strip() or f"Fix #{ref.number}"
        # Scrubbed first: a zero-width space inside a secret would hide it from the scrubber.
        return (
            defanged_title(self._scrub(title), ref.full_name),
            pull_request_body(self._scrub(rest.strip()), ref.number, ref.full_name),
        )

    @staticmethod
    def _default_text(ref: IssueRef) -> tuple[str, str]:
        """A plain title and body for a new pull request whose session wrote none."""
        return f"Fix #{ref.number}", f"Closes #{ref.number}"

    def _finish(
        self,
        ref: IssueRef,
        worktree: Worktree,
        pull: PullRequestInfo,
        result: LoopResult,
        gh: GitHubPort,
    ) -> PullRequestInfo:
        written = self._pull_request_text(ref, worktree, say=False)
        if written is not None and written != (pull.title, pull.body) and not result.merged:
            title, body = written
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

        # Each step on its own: the first failing must not skip the rest, and each says how
        # it went (the merge itself is done; these only tidy up).
        def step(what: str, action: Callable[[], str | None]) -> None:
            try:
                said = action()
            except ThirdshiftError as problem:
                self.say(f"warning: after the merge, {what} failed: {problem}; do it by hand")
                return
            if said:
                self.say(said)

        def delete_branch() -> str:
            gh.delete_branch(ref.owner, ref.repo, branch)
            return f"deleted {branch}"

        def close_issue() -> str | None:
            if gh.issue(ref.owner, ref.repo, ref.number).state != "open":
                return None
            gh.close_issue(ref.owner, ref.repo, ref.number)
            return f"closed issue #{ref.number}"

        def remove_label() -> str | None:
            busy = self._settings.in_progress_label.lower()
            labels = gh.issue(ref.owner, ref.repo, ref.number).labels
            found = [label for label in labels if label.lower() == busy]
            for label in found:
                gh.remove_label(ref.owner, ref.repo, ref.number, label)
            if not found:
                return None
            return f"removed {self._settings.in_progress_label} from issue #{ref.number}"

        step(f"deleting {branch}", delete_branch)
        step(f"closing issue #{ref.number}", close_issue)
        step(f"removing {self._settings.in_progress_label}", remove_label)
        return pull

    def _as_failure(
        self, error: Exception, sessions: Sessions | None, keeper: LeaseKeeper
    ) -> ThirdshiftError:
        """The cause a Failed run reports: a lost Lease wins over everything (it stopped the
        Run); an interrupt wins over what it broke (a killed git command, a stopped session),
        except over a verdict of the Repair loop; killed work of earlier sessions is still
        named ahead of it."""
        if keeper.lost:
            return error if isinstance(error, LeaseLost) else keeper.lost_error()
        original = error.original if isinstance(error, LaterStepFailed) else error
        if self._interrupt.is_set() and not isinstance(original, RunFailed):
            why = self._stopped_because() or "interrupted"
            endings = sessions.endings if sessions else ()
            if endings:
                return LaterStepFailed(
                    f"{'; '.join(endings)} and a later step failed: {why}", Interrupted(why)
                )
            return Interrupted(why)
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


def same_login(author: str, me: str) -> bool:
    """Whether ``author`` is thirdshift's own login (GitHub logins ignore case); an unknown
    author never is."""
    return bool(author) and author.lower() == me.lower()


def checks_line(result: LoopResult) -> str:
    """What CI said of the head a Run ended on, in a few words (the job summary's Checks)."""
    head = result.head[:7]
    said = (
        f"none appeared on {head}: CI counted as absent" if result.ci_absent else f"green on {head}"
    )
    if result.repairs:
        said += f", after {result.repairs} Repair(s)"
    return said


BASE_FIX_MARKER_PREFIX = "<!-- thirdshift:base-fix:"


def base_fix_marker(base: str, checks: Sequence[str]) -> str:
    """The hidden mark of the Base fix issue for ``checks`` red on ``base``."""
    names = ",".join(sorted(checks)).replace("--", "- -")
    return f"{BASE_FIX_MARKER_PREFIX}{base}:{names} -->"


def base_fix_body(
    base: str, failure: InheritedFailure, marker: str, repository: str | None = None
) -> str:
    """What the Base fix issue asks: make the named checks pass on the Base branch. The same
    for every Run that meets these checks, so a retried opening finds its own issue."""
    listed = "\n".join(f"- `{name}`" for name in sorted(failure.checks))
    # Check names are whatever CI (and an agent's workflow) called them: defanged like any
    # agent text, all but the marker thirdshift finds the issue by.
    return (
        defanged(
            f"These checks fail on `{base}` at `{failure.base_sha[:7]}`, so every pull request "
            f"into `{base}` inherits them:\n\n{listed}\n\nMake them pass on `{base}` without "
            "changing what they check. The issues that met them wait for this fix (they are "
            "blocked by this issue). thirdshift runs it as a Merge run: once its CI is green it "
            "merges it."
        )
        + f"\n\n{marker}"
    )
