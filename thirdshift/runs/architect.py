"""An Architect run: a session reviews the Base branch for its single best deepening
opportunity, and thirdshift (never the agent, which holds no token) publishes what it found.

Under the repository's Architect Lease (one Architect run at a time): first finish the
publishing of an earlier Architect run that stopped half way (its result is in the database, its
issues carry markers, so nothing is published twice; the markers carry the kept result's digest,
so a result rewritten in the database is refused, not published); else the gates
(``plans.architect_gate``);
else an ``architect`` session in a detached Worktree at the Base branch's head, whose result
file is checked and kept before anything is published. The Worktree is removed at the end:
whatever the session changed or committed there is discarded, and nothing is pushed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from thirdshift.errors import Interrupted, LeaseLost, NotClaimed, NotFound, ThirdshiftError
from thirdshift.git import Worktree, tracking
from thirdshift.issue_url import IssueRef
from thirdshift.records import (
    IssueInfo,
    IssueSummary,
    KeptResult,
    Lease,
    RepoInfo,
    Repository,
    Run,
)
from thirdshift.runs.claims import FencedGitHub, LeaseKeeper, fence_github
from thirdshift.runs.context import RunHooks, RunParts
from thirdshift.runs.delivery import check_harness_and_token
from thirdshift.runs.notices import announce_run_end
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.plans import (
    ARCHITECT_ISSUE,
    ARCHITECT_RESULT_FILE,
    IDEA_LABEL,
    PLAN_LABEL,
    RESULT_BYTES,
    TRIAGE_LABEL,
    Covered,
    Draft,
    Idea,
    Plan,
    Result,
    ResultInvalid,
    Skip,
    architect_gate,
    issue_text,
    kept_mismatch,
    new_plan_key,
    parse_result,
    plan_parts,
    published_line,
    result_digest,
    result_from_json,
    result_to_json,
    scrubbed,
    waiting_for_triage,
)
from thirdshift.runs.ports import GitHubPort
from thirdshift.runs.prompts import architect_prompt
from thirdshift.sessions import SessionInterrupted, Sessions

COMPLETION_TRIES = 3  # runs that may fail at completing one kept result before it is let go
COMPLETION_LOOK_BACK = 10  # the earlier runs looked at for those tries
INTERRUPTED = "interrupted: "  # how the cause of an Architect run stopped by a signal begins
OPEN_TITLES = 100  # the open issues the prompt names
CLOSED_TITLES = 50  # and the recently closed ones
LABEL_COLORS = {PLAN_LABEL: "5319e7", IDEA_LABEL: "c5def5", TRIAGE_LABEL: "fbca04"}
LABEL_WORDS = {
    PLAN_LABEL: "Proposed by a thirdshift Architect run",
    IDEA_LABEL: "An idea of a thirdshift Architect run, not yet a plan",
    TRIAGE_LABEL: "Waits for a person to triage it",
}


@dataclass(frozen=True)
class ArchitectRequest:
    owner: str
    name: str
    focus: str | None = None
    base: str | None = None


@dataclass(frozen=True)
class Unfinished:
    """An earlier Architect run's publishing to complete: its kept result (as kept, and read
    back with its plan key) and the issues of that plan already on GitHub, by part."""

    run: Run
    kept: str
    result: Result
    key: str
    marked: dict[str, IssueInfo]


@dataclass(frozen=True)
class Refused:
    """An earlier Architect run's kept result that does not match what it published (or does
    not read): it is never completed, and ``cause`` says why."""

    run: Run
    cause: str


@dataclass(frozen=True)
class Published:
    numbers: tuple[int, ...]
    urls: tuple[str, ...]


class ArchitectRun:
    """Runs one Architect run. Built by the composition root with real adapters, and by the
    orchestration tests with the GitHub fake and scripted sessions."""

    def __init__(self, parts: RunParts, hooks: RunHooks, *, web_host: str) -> None:
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
        self._on_recorded = hooks.on_recorded
        self._notifier = hooks.notifier
        self._web_host = web_host
        self._lease_lost: Callable[[], bool] = lambda: False

    def say(self, line: str) -> None:
        self._progress(self._scrub(line))

    def run(self, request: ArchitectRequest) -> RunOutcome:
        """Published, covered, skipped or failed; ``NotClaimed`` (exit status 3) is raised
        when another Architect run holds the repository."""
        repo = self._preflight(request)
        repository = self._store.ensure_repository(repo.owner, repo.name)
        self._record_crashes(repository)
        keeper = LeaseKeeper(
            self._store,
            repository,
            ARCHITECT_ISSUE,
            self._settings.lease_seconds,
            on_lost=self._interrupt.set,
            owner=self._claimant,
            clock=self._clock,
            release_seconds=self._settings.salvage_wait_seconds,
        )
        with contextlib.ExitStack() as stack:
            try:
                lease = stack.enter_context(keeper)
            except NotClaimed as error:
                raise NotClaimed(
                    f"another Architect run works on {repo.full_name} now ({error}); one at a "
                    "time, so this one changed nothing"
                ) from None
            gh = fence_github(self._github, keeper.check)
            self._lease_lost = lambda: keeper.lost
            unfinished = self._unfinished(repository, repo, lease)
            if isinstance(unfinished, Refused):
                return self._refuse(unfinished, repo, repository, lease)
            if unfinished is not None:
                return self._complete(unfinished, repo, repository, gh, lease)
            skip = self._gate(repo, repository)
            if skip is not None:
                self.say(f"skipped: {skip.reason}")
                for url in skip.urls:
                    self._emit_url(url)
                return RunOutcome("skipped", 0, cause=skip.reason)
            return self._review(request, repo, repository, gh, lease)

    # -- before anything -----------------------------------------------------------------------

    def _preflight(self, request: ArchitectRequest) -> RepoInfo:
        check_harness_and_token(
            self._github,
            self._session_source,
            self._environ,
            request.owner,
            request.name,
            needs="to publish a plan",
        )
        return self._github.repo(request.owner, request.name)

    def _record_crashes(self, repository: Repository) -> None:
        """An earlier Architect run still recorded running whose Lease is gone died: say so,
        so its kept result is completed and ``runs`` shows it."""
        for run in self._store.dead_runs(repository):
            if run.kind == "architect" and self._store.record_crash(
                run.id, "the Architect run stopped without recording an ending (its process died)"
            ):
                self.say(f"Architect run {run.id} crashed earlier")

    def _unfinished(
        self, repository: Repository, repo: RepoInfo, lease: Lease
    ) -> Unfinished | Refused | None:
        """The newest Architect run when it kept a result it did not finish publishing, unless
        a person closed an issue it did publish: that plan was answered, and is never made
        whole behind their back (its kept result is let go). Refused when the kept result
        does not match what it published."""
        latest = self._store.latest_run(repository, ARCHITECT_ISSUE)
        if latest is None or latest.state in ("succeeded", "running"):
            return None
        kept = self._store.kept_result(latest.id)
        if kept is None:
            return None
        why = self._completable(latest, kept, repo, lease)
        if isinstance(why, Unfinished | Refused):
            return why
        self.say(f"Architect run {latest.id} stopped before it finished publishing; {why}")
        self._store.update_run(latest.id, architect_result=None, architect_fencing_token=None)
        return None

    def _completable(
        self, latest: Run, kept: KeptResult, repo: RepoInfo, lease: Lease
    ) -> Unfinished | Refused | str:
        """What to complete of the kept result of ``latest``, why it is refused, or why it is
        let go instead. Only a result kept under an earlier Architect Lease is looked at, and
        it is read as strictly as a fresh result file; it is refused unless its digest is the
        one in the marker of every issue of its plan already on GitHub (the database is a row
        an agent could have written; GitHub is not). Only what already reached GitHub is
        completed (anything else is a new review's business, with the gates first); never
        what a person answered by closing part of it; and not after ``COMPLETION_TRIES`` runs
        failed at it (GitHub refuses it for good)."""
        # Tokens only ever go up, so an earlier holder's is below this Run's.
        if kept.fencing_token is None or kept.fencing_token >= lease.fencing_token:
            return (
                "its result was not kept under the repository's Architect Lease, so it is not "
                "completed"
            )
        try:
            result, key = result_from_json(
                kept.text, max_tickets=self._settings.architect_max_tickets
            )
        except ResultInvalid as error:
            return Refused(
                latest,
                f"the kept result of Architect run {latest.id} cannot be read ({error}); "
                "nothing was published",
            )
        if isinstance(result, Covered):
            return "it had found the opportunity covered, and had nothing to publish"
        label = IDEA_LABEL if isinstance(result, Idea) else PLAN_LABEL
        issues = self._labelled(self._github, repo, label)
        bodies = {number: issue.body for number, issue in issues.items()}
        mismatch = kept_mismatch(kept.text, key, bodies, latest.published)
        if mismatch is not None:
            return Refused(
                latest,
                f"the kept result of Architect run {latest.id} does not match what it "
                f"published ({mismatch}); nothing was published",
            )
        marked = {part: issues[n] for part, n in plan_parts(bodies, key).items()}
        if not marked:
            return "none of it reached GitHub, so a new review goes through the gates first"
        closed = sorted(i.number for i in marked.values() if i.state != "open")
        if closed:
            listed = ", ".join(f"#{n}" for n in closed)
            return f"{listed} of it was closed since, so it is not completed"
        same = 0
        for run in [latest, *self._store.earlier_runs(latest, limit=COMPLETION_LOOK_BACK)]:
            if run.state == "succeeded" or self._store.architect_result(run.id) != kept.text:
                break
            # A completing run (it ran no session) that failed or crashed at it; one stopped by
            # a signal or that lost its Lease says nothing about whether it can be published.
            if (
                run.state in ("failed", "crashed")
                and not self._store.run_sessions(run.id)
                and not (run.cause or "").startswith((INTERRUPTED, "lost the"))
            ):
                same += 1
        if same >= COMPLETION_TRIES:
            return (
                f"{same} runs in a row failed to publish the rest of it (the last: "
                f"{latest.cause}), so it is left as it is for a person"
            )
        return Unfinished(latest, kept.text, result, key, marked)

    def _gate(self, repo: RepoInfo, repository: Repository) -> Skip | None:
        gh = self._github
        owner, name = repo.owner, repo.name
        plans = [i for i in gh.issues_labelled(owner, name, PLAN_LABEL) if not i.is_pull_request]
        ideas = gh.issues_labelled(owner, name, IDEA_LABEL)
        excluded = {label.lower() for label in self._settings.excluded_labels}
        ready = [
            issue
            for issue in gh.issues_labelled(owner, name, self._settings.ready_label)
            if not issue.is_pull_request
            and issue.state == "open"
            and not excluded & {label.lower() for label in issue.labels}
        ]
        now = self._clock.now()
        return architect_gate(
            repository=repo.full_name,
            open_plans=[i for i in plans if i.state == "open"],
            waiting_ideas=waiting_for_triage([i for i in ideas if not i.is_pull_request]),
            ready=ready,
            published=self._store.architect_publications(repository, now - timedelta(days=7)),
            per_week=self._settings.architect_plans_per_week,
            now=now,
        )

    # -- the review ----------------------------------------------------------------------------

    def _review(
        self,
        request: ArchitectRequest,
        repo: RepoInfo,
        repository: Repository,
        gh: FencedGitHub,
        lease: Lease,
    ) -> RunOutcome:
        ref = IssueRef(self._web_host, repo.owner, repo.name, ARCHITECT_ISSUE)
        base = request.base or repo.default_branch
        clone = self._clones(ref, repo)
        self.say(f"fetching {repo.full_name} into {clone.path}")
        clone.sync()
        if base not in clone.remote_branches():
            raise ThirdshiftError(
                f"base branch {base} does not exist on origin; push it first or pass --base"
            )
        record = self._store.start_run_under(
            lease,
            repository,
            ARCHITECT_ISSUE,
            kind="architect",
            base_branch=base,
            harness=self._session_source.harness_name,
            model=self._session_source.model,
        )
        if record is None:
            raise ThirdshiftError("lost the Architect Lease before the Run was recorded")
        self._on_recorded(record.id)
        self.say(f"Architect run {record.id} on {repo.full_name}, reviewing {base}")
        path = self._settings.home / "worktrees" / f"{repo.owner}-{repo.name}-architect"
        worktree: Worktree | None = None
        sessions: Sessions | None = None
        try:
            self._check_interrupt()
            clone.remove_worktree(path)
            worktree = clone.detached_worktree(path, tracking(base))
            worktree.exclude(f"/{ARCHITECT_RESULT_FILE}")
            base_sha = worktree.head()
            self.say(f"reviewing in {worktree.path}, detached at {base}'s {base_sha[:12]}")
            prompt = architect_prompt(
                repository=repo.full_name,
                base=base,
                base_sha=base_sha,
                focus=request.focus,
                open_issues=self._issues(repo, "open", OPEN_TITLES),
                closed_issues=self._issues(repo, "closed", CLOSED_TITLES),
                result_file=ARCHITECT_RESULT_FILE,
                max_tickets=self._settings.architect_max_tickets,
            )
            sessions = self._session_source.sessions(record.id, worktree.path, ref)
            sessions.run("architect", self._scrub(prompt))
            self._check_interrupt()
            result = parse_result(
                worktree.read_agent_file(ARCHITECT_RESULT_FILE, RESULT_BYTES),
                max_tickets=self._settings.architect_max_tickets,
            )
            if isinstance(result, Covered):
                self._check_covered(gh, repo, result)
            kept = result_to_json(scrubbed(result, self._scrub), new_plan_key())
            # Published as a completing Run would read it back: the two never differ.
            result, key = result_from_json(kept, max_tickets=self._settings.architect_max_tickets)
            # Kept before the first issue is opened, so a Run after a crash completes this plan;
            # only under this Run's Lease, in one conditional write: a run that lost its Lease
            # meanwhile keeps nothing (its successor decides).
            if not self._store.keep_architect_result(
                lease,
                record.id,
                kept,
                head_sha=base_sha,
                last_session_log=str(sessions.last_log) if sessions.last_log else None,
            ):
                gh.fence()  # says the Lease was lost, as every fenced write does
                raise LeaseLost(
                    "lost the repository's Architect Lease before the result was kept: another "
                    "Architect run holds it now; this one published nothing"
                )
            return self._publish_and_finish(
                record, result, key, result_digest(kept), repo, gh, base_sha, found={}
            )
        except Exception as error:
            return self._failed(record, error, sessions)
        finally:
            if worktree is not None:  # its changes and commits are not the Run's output
                with contextlib.suppress(ThirdshiftError, OSError):
                    clone.remove_worktree(worktree.path)

    def _issues(self, repo: RepoInfo, state: str, limit: int) -> Sequence[IssueSummary]:
        return self._github.recent_issues(repo.owner, repo.name, state, limit)

    def _check_covered(self, gh: GitHubPort, repo: RepoInfo, covered: Covered) -> None:
        try:
            gh.issue(repo.owner, repo.name, covered.issue_number)
        except NotFound:
            raise ResultInvalid(
                f"{ARCHITECT_RESULT_FILE} says the opportunity is covered by "
                f"#{covered.issue_number}, which is no issue of {repo.full_name}"
            ) from None

    # -- completing an earlier Run's publish ---------------------------------------------------

    def _complete(
        self,
        unfinished: Unfinished,
        repo: RepoInfo,
        repository: Repository,
        gh: FencedGitHub,
        lease: Lease,
    ) -> RunOutcome:
        earlier, kept = unfinished.run, unfinished.kept
        record = self._store.start_run_under(
            lease,
            repository,
            ARCHITECT_ISSUE,
            kind="architect",
            base_branch=earlier.base_branch,
            harness=earlier.harness,
            model=earlier.model,
            # In the same statement: the newest Run always keeps the result while it runs.
            architect_result=kept,
        )
        if record is None:
            raise ThirdshiftError("lost the Architect Lease before the Run was recorded")
        self._on_recorded(record.id)
        self.say(
            f"Architect run {record.id} on {repo.full_name}: completing what Architect run "
            f"{earlier.id} began to publish ({earlier.state}), before any new review"
        )
        self._store.update_run(
            record.id, head_sha=earlier.head_sha, last_session_log=earlier.last_session_log
        )
        try:
            return self._publish_and_finish(
                record,
                unfinished.result,
                unfinished.key,
                result_digest(kept),  # the one its markers carry: it was checked
                repo,
                gh,
                earlier.head_sha or "unknown",
                found=dict(unfinished.marked),  # read under this Lease: nobody published since
            )
        except Exception as error:
            return self._failed(record, error, None)

    def _refuse(
        self, refused: Refused, repo: RepoInfo, repository: Repository, lease: Lease
    ) -> RunOutcome:
        """A failed Architect run whose cause says what did not match, publishing nothing.
        It keeps no result, so the next Architect run does not try again: it goes through the
        gates (the half plan's open issues stop it until a person looks)."""
        earlier = refused.run
        record = self._store.start_run_under(
            lease,
            repository,
            ARCHITECT_ISSUE,
            kind="architect",
            base_branch=earlier.base_branch,
            harness=earlier.harness,
            model=earlier.model,
        )
        if record is None:
            raise ThirdshiftError("lost the Architect Lease before the Run was recorded")
        self._on_recorded(record.id)
        self.say(
            f"Architect run {record.id} on {repo.full_name}: refusing to complete what "
            f"Architect run {earlier.id} began to publish"
        )
        return self._failed(record, ResultInvalid(refused.cause), None)

    # -- publishing ----------------------------------------------------------------------------

    def _publish_and_finish(
        self,
        record: Run,
        result: Result,
        key: str,
        digest: str,
        repo: RepoInfo,
        gh: FencedGitHub,
        base_sha: str,
        *,
        found: dict[str, IssueInfo],
    ) -> RunOutcome:
        published = self._publish(record, result, key, digest, repo, gh, base_sha, found=found)
        line = published_line(result, published.numbers, published.urls)
        try:
            self._store.finish_run(
                record.id, "succeeded", published=" ".join(map(str, published.numbers))
            )
        except ThirdshiftError as problem:
            self.say(f"warning: could not record the Architect run's end: {problem}")
        self.say(line)
        self._emit_url(published.urls[0])
        state = "covered" if isinstance(result, Covered) else "published"
        self._announce(record, state, published.urls[0])
        return RunOutcome(state, 0, run_id=record.id, published=published.urls)

    def _publish(
        self,
        record: Run,
        result: Result,
        key: str,
        digest: str,
        repo: RepoInfo,
        gh: FencedGitHub,
        base_sha: str,
        *,
        found: dict[str, IssueInfo],
    ) -> Published:
        """Publish ``result`` as plan ``key``, kept with ``digest``; ``found`` holds its issues
        already on GitHub, by part (none for a fresh key), which are reused and added to as the
        others open."""
        owner, name = repo.owner, repo.name
        if isinstance(result, Covered):
            issue = gh.issue(owner, name, result.issue_number)
            return Published((), (issue.html_url,))
        base = record.base_branch or repo.default_branch
        kind_label = IDEA_LABEL if isinstance(result, Idea) else PLAN_LABEL
        for label in (kind_label, TRIAGE_LABEL):
            gh.ensure_label(owner, name, label, LABEL_COLORS[label], LABEL_WORDS[label])
        labels = (kind_label, TRIAGE_LABEL)
        opened_here: set[int] = set()

        def open_part(
            draft: Draft,
            part: str,
            kind: str,
            blockers: Sequence[int] = (),
            spec_number: int | None = None,
        ) -> IssueInfo:
            if part in found:
                self.say(f"#{found[part].number} ({part}) was published already")
                return found[part]
            body = issue_text(
                draft,
                key=key,
                part=part,
                digest=digest,
                run_id=record.id,
                base=base,
                base_sha=base_sha,
                kind=kind,
                blockers=blockers,
                spec_number=spec_number,
            )
            opened = gh.open_issue(
                owner, name, title=self._scrub(draft.title), body=self._scrub(body), labels=labels
            )
            self.say(f"opened #{opened.number} ({part}): {opened.html_url}")
            found[part] = opened
            opened_here.add(opened.number)
            # What reached GitHub is on the record at once, whatever happens next.
            self._store.update_run(
                record.id, published=" ".join(str(i.number) for i in found.values())
            )
            return opened

        if isinstance(result, Idea):
            idea = open_part(result.draft, "idea", "An Architect idea")
            return Published((idea.number,), (idea.html_url,))
        if not isinstance(result, Plan):
            raise ThirdshiftError(f"an Architect result of an unknown kind: {result!r}")
        spec = None
        if result.spec is not None:
            spec = open_part(result.spec, "spec", "A Spec")
        tickets: list[IssueInfo] = []
        for index, draft in enumerate(result.tickets, start=1):
            blockers = [tickets[position - 1].number for position in draft.blocked_by]
            ticket = open_part(
                draft,
                f"ticket-{index}",
                "A Ticket",
                blockers=blockers,
                spec_number=spec.number if spec else None,
            )
            if spec is not None:
                gh.add_sub_issue(owner, name, spec.number, ticket.number)
            for blocker in blockers:
                gh.block_issue(owner, name, ticket.number, blocker)
            tickets.append(ticket)
        if self._settings.architect_hand_over:
            # What this run opened, and what an earlier run opened that nobody triaged since
            # (it still waits for triage, not Ready): a person's triage is never undone.
            ready = self._settings.ready_label.lower()
            self._hand_over(
                gh,
                repo,
                [
                    t
                    for t in tickets
                    if t.number in opened_here
                    or (
                        TRIAGE_LABEL in {label.lower() for label in t.labels}
                        and ready not in {label.lower() for label in t.labels}
                    )
                ],
            )
        issues = ([spec] if spec else []) + tickets
        return Published(tuple(i.number for i in issues), tuple(i.html_url for i in issues))

    def _labelled(self, gh: GitHubPort, repo: RepoInfo, label: str) -> dict[int, IssueInfo]:
        """Every issue thirdshift opened labelled ``label``, open or closed, read with its
        body, as listed: a plan's published issues are found among them by their markers (a
        person's issue quoting a marker is never one of them)."""
        me = gh.authenticated_login().lower()
        issues = (
            gh.issue(repo.owner, repo.name, summary.number)
            for summary in gh.issues_labelled(repo.owner, repo.name, label, state="all")
            if not summary.is_pull_request
        )
        return {issue.number: issue for issue in issues if issue.author.lower() == me}

    def _hand_over(self, gh: GitHubPort, repo: RepoInfo, tickets: Sequence[IssueInfo]) -> None:
        """``architect_hand_over``: the plan's Tickets are Ready without a person's triage. A
        blocked Ticket carries the Ready label too and waits, as any blocked issue does, until
        its blockers close; the Spec stays for people (thirdshift runs Tickets, not Specs)."""
        if not tickets:
            return
        ready = self._settings.ready_label
        for ticket in tickets:
            gh.add_label(repo.owner, repo.name, ticket.number, ready)
            gh.remove_label(repo.owner, repo.name, ticket.number, TRIAGE_LABEL)
        listed = ", ".join(f"#{t.number}" for t in tickets)
        self.say(f"handed over: {listed} labelled {ready} in place of {TRIAGE_LABEL}")

    # -- endings -------------------------------------------------------------------------------

    def _failed(self, record: Run, error: BaseException, sessions: Sessions | None) -> RunOutcome:
        if not isinstance(error, ThirdshiftError | OSError):
            error = ThirdshiftError(f"unexpected {error.__class__.__name__}: {error}")
        cause = self._scrub(str(error) or error.__class__.__name__)
        # Stopped by a signal (the interrupt is set), not by losing the Lease (which sets it too).
        stopped = self._interrupt.is_set() and not self._lease_lost()
        interrupted = isinstance(error, Interrupted | SessionInterrupted) or stopped
        state = "interrupted" if interrupted else "failed"
        said = cause
        if interrupted:  # on the record, so a later run knows it says nothing of the plan
            cause = INTERRUPTED + cause
        last_log = sessions.last_log if sessions is not None else None
        fields: dict[str, object] = {"cause": cause}
        if last_log is not None:
            fields["last_session_log"] = str(last_log)
        try:
            self._store.finish_run(record.id, "failed", **fields)
        except ThirdshiftError as problem:
            self.say(f"warning: could not record the Failed run: {problem}")
        kept = self._store_result_kept(record.id)
        self.say(f"the Architect run {'was interrupted' if interrupted else 'failed'}: {said}")
        if kept:
            self.say(
                "its result is kept: the next Architect run on the repository publishes the "
                "rest of it first"
            )
        else:
            self.say("nothing was published")
        self.say(f"session log: {last_log if last_log else 'none'}")
        self._announce(record, state, None, cause=cause)
        return RunOutcome(state, 1, run_id=record.id, cause=cause)

    def _announce(
        self, record: Run, state: str, url: str | None, *, cause: str | None = None
    ) -> None:
        """Tell the team's targets how the Architect run ended (``published``, ``covered``,
        ``failed`` or ``interrupted``), at most once: a plan waiting for triage, or a run that
        keeps failing, is news they should not have to look for."""
        repository = record.repository.full_name
        announce_run_end(
            store=self._store,
            notifier=self._notifier,
            scrub=self._scrub,
            progress=self.say,
            run=record,
            issue_url=url or f"https://{self._web_host}/{repository}/issues",
            state=state,
            cause=cause,
        )

    def _store_result_kept(self, run_id: int) -> bool:
        try:
            return self._store.architect_result(run_id) is not None
        except ThirdshiftError:
            return False

    def _check_interrupt(self) -> None:
        if self._interrupt.is_set():
            raise Interrupted("interrupted before the Architect run finished")
