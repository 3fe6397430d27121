"""Before an Architect run reviews anything: an earlier one that died is recorded crashed; an
earlier one's kept result that it did not finish publishing is completed (or refused, or let
go) under this run's Lease, never published twice (adr/0022); else the gates are read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from thirdshift.clock import Clock
from thirdshift.records import IssueInfo, KeptResult, Lease, RepoInfo, Repository, Run
from thirdshift.run_states import RunKind, RunState
from thirdshift.runs.architect.publish import Publication
from thirdshift.runs.ports import GitHubPort
from thirdshift.runs.rules.gates import Skip, architect_gate, waiting_for_triage
from thirdshift.runs.rules.plans import (
    IDEA_LABEL,
    PLAN_LABEL,
    Covered,
    Idea,
    Result,
    ResultInvalid,
    result_digest,
    result_from_json,
)
from thirdshift.runs.rules.published_issues import kept_mismatch, plan_parts
from thirdshift.runs.scope import Say
from thirdshift.settings import Settings
from thirdshift.store import Store

COMPLETION_TRIES = 3  # runs that may fail at completing one kept result before it is let go
COMPLETION_LOOK_BACK = 10  # the earlier runs looked at for those tries
INTERRUPTED = "interrupted: "  # how the cause of an Architect run stopped by a signal begins


@dataclass(frozen=True)
class Unfinished:
    """An earlier Architect run's publishing to complete: its kept result as kept, and what
    completing it publishes (the result read back with its plan key, and the issues of that
    plan already on GitHub, by part)."""

    run: Run
    kept: str
    publication: Publication


@dataclass(frozen=True)
class Refused:
    """An earlier Architect run's kept result that does not match what it published (or does
    not read): it is never completed, and ``cause`` says why."""

    run: Run
    cause: str


@dataclass(frozen=True)
class Completion:
    github: GitHubPort
    store: Store
    settings: Settings
    clock: Clock
    say: Say

    def gate(self, repo: RepoInfo, repository: Repository) -> Skip | None:
        """Why no review goes ahead now (``plan_gate``), or None."""
        gh, settings = self.github, self.settings
        owner, name = repo.owner, repo.name
        plans = [i for i in gh.issues_labelled(owner, name, PLAN_LABEL) if not i.is_pull_request]
        ideas = gh.issues_labelled(owner, name, IDEA_LABEL)
        excluded = {label.lower() for label in settings.excluded_labels}
        ready = [
            issue
            for issue in gh.issues_labelled(owner, name, settings.ready_label)
            if not issue.is_pull_request
            and issue.state == "open"
            and not excluded & {label.lower() for label in issue.labels}
        ]
        now = self.clock.now()
        return architect_gate(
            repository=repo.full_name,
            open_plans=[i for i in plans if i.state == "open"],
            waiting_ideas=waiting_for_triage([i for i in ideas if not i.is_pull_request]),
            ready=ready,
            published=self.store.architect_publications(repository, now - timedelta(days=7)),
            per_week=settings.architect_plans_per_week,
            now=now,
        )

    def record_crashes(self, repository: Repository) -> None:
        """An earlier Architect run still recorded running whose Lease is gone died: say so,
        so its kept result is completed and ``runs`` shows it."""
        for run in self.store.dead_runs(repository):
            if run.kind == RunKind.ARCHITECT and self.store.record_crash(
                run.id, "the Architect run stopped without recording an ending (its process died)"
            ):
                self.say(f"Architect run {run.id} crashed earlier")

    def unfinished(
        self, repository: Repository, repo: RepoInfo, lease: Lease
    ) -> Unfinished | Refused | None:
        """The newest Architect run when it kept a result it did not finish publishing, unless
        a person closed an issue it did publish: that plan was answered, and is never made
        whole behind their back (its kept result is let go). Refused when the kept result
        does not match what it published."""
        latest = self.store.latest_run(repository, None)
        if latest is None or latest.state in (RunState.SUCCEEDED, RunState.RUNNING):
            return None
        kept = self.store.kept_result(latest.id)
        if kept is None:
            return None
        why = self._completable(latest, kept, repo, lease)
        if isinstance(why, Unfinished | Refused):
            return why
        self.say(f"Architect run {latest.id} stopped before it finished publishing; {why}")
        self.store.update_run(latest.id, architect_result=None, architect_fencing_token=None)
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
                kept.text, max_tickets=self.settings.architect_max_tickets
            )
        except ResultInvalid as error:
            return Refused(
                latest,
                f"the kept result of Architect run {latest.id} cannot be read ({error}); "
                "nothing was published",
            )
        if isinstance(result, Covered):
            return "it had found the opportunity covered, and had nothing to publish"
        found = self._on_github(latest, kept, repo, result, key)
        if not isinstance(found, dict):
            return found
        same = self._failed_tries(latest, kept)
        if same >= COMPLETION_TRIES:
            return (
                f"{same} runs in a row failed to publish the rest of it (the last: "
                f"{latest.cause}), so it is left as it is for a person"
            )
        publication = Publication(
            result,
            key,
            result_digest(kept.text),  # the one its markers carry: it was checked
            latest.head_sha or "unknown",
            found,
        )
        return Unfinished(latest, kept.text, publication)

    def _on_github(
        self, latest: Run, kept: KeptResult, repo: RepoInfo, result: Result, key: str
    ) -> dict[str, IssueInfo] | Refused | str:
        """The issues of the kept plan on GitHub, by part, once they vouch for it."""
        label = IDEA_LABEL if isinstance(result, Idea) else PLAN_LABEL
        issues = self._labelled(repo, label)
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
        return marked

    def _failed_tries(self, latest: Run, kept: KeptResult) -> int:
        """How many runs in a row failed at completing ``kept``."""
        same = 0
        for run in [latest, *self.store.earlier_runs(latest, limit=COMPLETION_LOOK_BACK)]:
            if run.state == RunState.SUCCEEDED or self.store.architect_result(run.id) != kept.text:
                break
            # A completing run (it ran no session) that failed or crashed at it; one stopped by
            # a signal or that lost its Lease says nothing about whether it can be published.
            if (
                run.state in (RunState.FAILED, RunState.CRASHED)
                and not self.store.run_sessions(run.id)
                and not (run.cause or "").startswith((INTERRUPTED, "lost the"))
            ):
                same += 1
        return same

    def _labelled(self, repo: RepoInfo, label: str) -> dict[int, IssueInfo]:
        """Every issue thirdshift opened labelled ``label``, open or closed, read with its
        body, as listed: a plan's published issues are found among them by their markers (a
        person's issue quoting a marker is never one of them)."""
        gh = self.github
        me = gh.authenticated_login().lower()
        issues = (
            gh.issue(repo.owner, repo.name, summary.number)
            for summary in gh.issues_labelled(repo.owner, repo.name, label, state="all")
            if not summary.is_pull_request
        )
        return {issue.number: issue for issue in issues if issue.author.lower() == me}
