"""An Architect run: a session reviews the Base branch for its single best deepening
opportunity, and thirdshift (never the agent, which holds no token) publishes what it found.

Under the repository's Architect Lease (one Architect run at a time): first finish the
publishing of an earlier Architect run that stopped half way (``architect_complete``: its
result is in the database, its issues carry markers, so nothing is published twice; the
markers carry the kept result's digest, so a result rewritten in the database is refused, not
published); else the gates (``plan_gate``); else an ``architect`` session in a detached
Worktree at the Base branch's head, whose result file is checked and kept before anything is
published (``architect_publish``). The Worktree is removed at the end: whatever the session
changed or committed there is discarded, and nothing is pushed. The Lease, the fetch, the
Worktree, the session and the ending's record are a Run's own steps (``runs.steps``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from thirdshift.errors import Interrupted, NotClaimed, ThirdshiftError
from thirdshift.git import Worktree
from thirdshift.home import Home
from thirdshift.issue_url import RepoRef
from thirdshift.records import IssueInfo, IssueSummary, Lease, RepoInfo, Repository, Run
from thirdshift.run_states import RunEnd, RunKind
from thirdshift.runs.architect.complete import Completion, Refused, Unfinished
from thirdshift.runs.architect.end import ArchitectEndings
from thirdshift.runs.architect.publish import Publication, Publisher
from thirdshift.runs.fence import FencedGitHub, fence_github
from thirdshift.runs.lease import LeaseKeeper
from thirdshift.runs.notices import Announcer
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.rules.plans import (
    ARCHITECT_RESULT_FILE,
    Covered,
    ResultInvalid,
    result_digest,
)
from thirdshift.runs.rules.prompts import architect_prompt
from thirdshift.runs.rules.published_issues import published_line
from thirdshift.runs.scope import RunHooks, RunParts
from thirdshift.runs.steps.branch import fetched
from thirdshift.runs.steps.finish import record_end
from thirdshift.runs.steps.preflight import check_harness_and_token
from thirdshift.runs.steps.session import SessionStep
from thirdshift.runs.steps.take_lease import LeaseStep
from thirdshift.runs.steps.worktree import WorktreeStep
from thirdshift.sessions import Sessions

OPEN_TITLES = 100  # the open issues the prompt names
CLOSED_TITLES = 50  # and the recently closed ones


@dataclass(frozen=True)
class ArchitectRequest:
    owner: str
    name: str
    focus: str | None = None
    base: str | None = None


class ArchitectRun:
    """Runs one Architect run. Built by the composition root with real adapters, and by the
    orchestration tests with the GitHub fake and scripted sessions."""

    def __init__(self, parts: RunParts, hooks: RunHooks, *, web_host: str) -> None:
        self._parts, self._hooks, self._web_host = parts, hooks, web_host
        store, settings, scrub, say = parts.store, parts.settings, parts.scrub, self.say
        self._lease = LeaseStep(
            parts.github, store, settings, parts.clock, hooks.interrupt, hooks.claimant
        )
        self._session = SessionStep(store, parts.session_source, scrub, say)
        self._completion = Completion(parts.github, store, settings, parts.clock, say)
        self._publisher = Publisher(store, settings, scrub, say)
        announcer = Announcer(store, hooks.notifier, scrub, say)
        self._keeper: LeaseKeeper | None = None
        self._endings = ArchitectEndings(
            store, scrub, say, announcer, hooks.interrupt, web_host, self._lease_lost
        )

    def say(self, line: str) -> None:
        self._hooks.progress(self._parts.scrub(line))

    def _lease_lost(self) -> bool:
        return self._keeper is not None and self._keeper.lost

    def run(self, request: ArchitectRequest) -> RunOutcome:
        """Published, covered, skipped or failed; ``NotClaimed`` (exit status 3) is raised
        when another Architect run holds the repository."""
        parts = self._parts
        check_harness_and_token(
            parts.github,
            parts.session_source,
            parts.environ,
            request.owner,
            request.name,
            needs="to publish a plan",
        )
        repo = parts.github.repo(request.owner, request.name)
        repository = parts.store.ensure_repository(repo.owner, repo.name)
        self._completion.record_crashes(repository)
        keeper = self._lease.keeper(repository, None)
        with contextlib.ExitStack() as stack:
            try:
                lease = stack.enter_context(keeper)
            except NotClaimed as error:
                raise NotClaimed(
                    f"another Architect run works on {repo.full_name} now ({error}); one at a "
                    "time, so this one changed nothing"
                ) from None
            gh = fence_github(parts.github, keeper.check)
            self._keeper = keeper
            unfinished = self._completion.unfinished(repository, repo, lease)
            if isinstance(unfinished, Refused):
                return self._refuse(unfinished, repo, repository, lease)
            if unfinished is not None:
                return self._complete(unfinished, repo, repository, gh, lease)
            skip = self._completion.gate(repo, repository)
            if skip is not None:
                self.say(f"skipped: {skip.reason}")
                for url in skip.urls:
                    self._hooks.emit_url(url)
                return RunOutcome(RunEnd.SKIPPED, 0, cause=skip.reason)
            return self._review(request, repo, repository, gh, lease)

    def _recorded(self, lease: Lease, repository: Repository, **fields: object) -> Run:
        """This Architect run, recorded under the Lease."""
        source = self._parts.session_source
        fields = {"harness": source.harness_name, "model": source.model, **fields}
        record = self._parts.store.start_run_under(
            lease, repository, None, kind=RunKind.ARCHITECT, **fields
        )
        if record is None:
            raise ThirdshiftError("lost the Architect Lease before the Run was recorded")
        self._hooks.on_recorded(record.id)
        return record

    def _recorded_after(
        self, earlier: Run, lease: Lease, repository: Repository, **fields: object
    ) -> Run:
        """This Architect run, recorded as taking up ``earlier``'s result."""
        return self._recorded(
            lease,
            repository,
            base_branch=earlier.base_branch,
            harness=earlier.harness,
            model=earlier.model,
            **fields,
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
        ref = RepoRef(self._web_host, repo.owner, repo.name)
        base = request.base or repo.default_branch
        clone = self._parts.clones(ref, repo)
        fetched(clone, repo, base, self.say)
        record = self._recorded(lease, repository, base_branch=base)
        self.say(f"Architect run {record.id} on {repo.full_name}, reviewing {base}")
        path = Home(self._parts.settings.home).worktree(repo.owner, repo.name, "architect")
        worktree: Worktree | None = None
        sessions: Sessions | None = None
        try:
            self._check_interrupt()
            worktree = WorktreeStep.detached(clone, path, base)
            worktree.exclude(f"/{ARCHITECT_RESULT_FILE}")
            base_sha = worktree.head()
            self.say(f"reviewing in {worktree.path}, detached at {base}'s {base_sha[:12]}")
            prompt = self._prompt(request, repo, base, base_sha)
            sessions = self._session.sessions(record.id, worktree, ref)
            self._session.take_turn(sessions, "architect", prompt)
            self._check_interrupt()
            result, key, kept = self._publisher.checked(worktree, repo, gh)
            self._publisher.keep(lease, record, kept, base_sha, sessions, gh.fence)
            found: dict[str, IssueInfo] = {}
            publication = Publication(result, key, result_digest(kept), base_sha, found)
            return self._publish_and_finish(record, publication, repo, gh)
        except Exception as error:
            return self._endings.failed(record, error, sessions)
        finally:
            if worktree is not None:  # its changes and commits are not the Run's output
                with contextlib.suppress(ThirdshiftError, OSError):
                    clone.remove_worktree(worktree.path)

    def _prompt(self, request: ArchitectRequest, repo: RepoInfo, base: str, base_sha: str) -> str:
        return architect_prompt(
            repository=repo.full_name,
            base=base,
            base_sha=base_sha,
            focus=request.focus,
            open_issues=self._issues(repo, "open", OPEN_TITLES),
            closed_issues=self._issues(repo, "closed", CLOSED_TITLES),
            result_file=ARCHITECT_RESULT_FILE,
            max_tickets=self._parts.settings.architect_max_tickets,
        )

    def _issues(self, repo: RepoInfo, state: str, limit: int) -> Sequence[IssueSummary]:
        return self._parts.github.recent_issues(repo.owner, repo.name, state, limit)

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
        # In the same statement: the newest Run always keeps the result while it runs.
        record = self._recorded_after(earlier, lease, repository, architect_result=kept)
        self.say(
            f"Architect run {record.id} on {repo.full_name}: completing what Architect run "
            f"{earlier.id} began to publish ({earlier.state}), before any new review"
        )
        self._parts.store.update_run(
            record.id, head_sha=earlier.head_sha, last_session_log=earlier.last_session_log
        )
        # Its issues were read under this Lease: nobody published since.
        found = dict(unfinished.publication.found)
        publication = replace(unfinished.publication, found=found)
        try:
            return self._publish_and_finish(record, publication, repo, gh)
        except Exception as error:
            return self._endings.failed(record, error, None)

    def _refuse(
        self, refused: Refused, repo: RepoInfo, repository: Repository, lease: Lease
    ) -> RunOutcome:
        """A failed Architect run whose cause says what did not match, publishing nothing.
        It keeps no result, so the next Architect run does not try again: it goes through the
        gates (the half plan's open issues stop it until a person looks)."""
        earlier = refused.run
        record = self._recorded_after(earlier, lease, repository)
        self.say(
            f"Architect run {record.id} on {repo.full_name}: refusing to complete what "
            f"Architect run {earlier.id} began to publish"
        )
        return self._endings.failed(record, ResultInvalid(refused.cause), None)

    # -- endings -------------------------------------------------------------------------------

    def _publish_and_finish(
        self, record: Run, publication: Publication, repo: RepoInfo, gh: FencedGitHub
    ) -> RunOutcome:
        result = publication.result
        published = self._publisher.publish(record, publication, repo, gh)
        line = published_line(result, published.numbers, published.urls)
        numbers = " ".join(map(str, published.numbers))
        record_end(
            self._parts.store, record, self.say, "the Architect run's end", published=numbers
        )
        self.say(line)
        self._hooks.emit_url(published.urls[0])
        state = RunEnd.COVERED if isinstance(result, Covered) else RunEnd.PUBLISHED
        self._endings.announce(record, state, published.urls[0])
        return RunOutcome(state, 0, run_id=record.id, published=published.urls)

    def _check_interrupt(self) -> None:
        if self._hooks.interrupt.is_set():
            raise Interrupted("interrupted before the Architect run finished")
