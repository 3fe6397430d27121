"""An Architect run's publishing: its checked result as issues on GitHub (a Spec and its
Tickets, or an idea), each carrying the plan's marker, so a publishing cut short is completed by
the next Architect run and never repeated (adr/0022)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from thirdshift.errors import LeaseLost, NotFound, ThirdshiftError
from thirdshift.git import Worktree
from thirdshift.records import IssueInfo, Lease, RepoInfo, Run
from thirdshift.runs.ports import GitHubPort
from thirdshift.runs.rules.plans import (
    ARCHITECT_RESULT_FILE,
    IDEA_LABEL,
    LABEL_COLORS,
    LABEL_WORDS,
    PLAN_LABEL,
    RESULT_BYTES,
    TRIAGE_LABEL,
    Covered,
    Draft,
    Idea,
    Plan,
    Result,
    ResultInvalid,
    new_plan_key,
    parse_result,
    result_from_json,
    result_to_json,
    scrubbed,
)
from thirdshift.runs.rules.published_issues import PlanPart, Reviewed, issue_text
from thirdshift.runs.scope import Say
from thirdshift.scrub import Scrubber
from thirdshift.sessions import Sessions
from thirdshift.settings import Settings
from thirdshift.store import Store


@dataclass(frozen=True)
class Publication:
    """What an Architect run publishes: ``result`` as plan ``key``, kept with ``digest``,
    reviewed at ``base_sha``; ``found`` holds its issues already on GitHub, by part (none for
    a fresh key), which are reused and added to as the others open."""

    result: Result
    key: str
    digest: str
    base_sha: str
    found: dict[str, IssueInfo]


@dataclass(frozen=True)
class Published:
    numbers: tuple[int, ...]
    urls: tuple[str, ...]


def check_covered(gh: GitHubPort, repo: RepoInfo, covered: Covered) -> None:
    """A result that says the opportunity is covered names an issue of the repository."""
    try:
        gh.issue(repo.owner, repo.name, covered.issue_number)
    except NotFound:
        raise ResultInvalid(
            f"{ARCHITECT_RESULT_FILE} says the opportunity is covered by "
            f"#{covered.issue_number}, which is no issue of {repo.full_name}"
        ) from None


@dataclass(frozen=True)
class _Parts:
    """One publishing under way: where, on which GitHub, with which labels, and which issues
    this run opened itself."""

    record: Run
    publication: Publication
    repo: RepoInfo
    gh: GitHubPort
    labels: tuple[str, ...]
    opened_here: set[int]


@dataclass(frozen=True)
class Publisher:
    store: Store
    settings: Settings
    scrub: Scrubber
    say: Say

    def checked(
        self, worktree: Worktree, repo: RepoInfo, gh: GitHubPort
    ) -> tuple[Result, str, str]:
        """The session's result file, checked, as a completing Run would read it back from the
        text it is kept as (scrubbed, with a new plan key): the result, its key and that text.
        Read back before it is kept, so a result the scrubbing made invalid (a title grown past
        its limit) fails here, with nothing kept."""
        result = parse_result(
            worktree.read_agent_file(ARCHITECT_RESULT_FILE, RESULT_BYTES),
            max_tickets=self.settings.architect_max_tickets,
        )
        if isinstance(result, Covered):
            check_covered(gh, repo, result)
        kept = result_to_json(scrubbed(result, self.scrub), new_plan_key())
        result, key = result_from_json(kept, max_tickets=self.settings.architect_max_tickets)
        return result, key, kept

    def keep(
        self,
        lease: Lease,
        record: Run,
        kept: str,
        base_sha: str,
        sessions: Sessions,
        fence: Callable[[], None],
    ) -> None:
        """Kept before the first issue is opened, so a Run after a crash completes this plan;
        only under this Run's Lease, in one conditional write: a run that lost its Lease
        meanwhile keeps nothing (its successor decides). It is published as a completing Run
        would read it back: the two never differ."""
        if not self.store.keep_architect_result(
            lease,
            record.id,
            kept,
            head_sha=base_sha,
            last_session_log=str(sessions.last_log) if sessions.last_log else None,
        ):
            fence()  # says the Lease was lost, as every fenced write does
            raise LeaseLost(
                "lost the repository's Architect Lease before the result was kept: another "
                "Architect run holds it now; this one published nothing"
            )

    def publish(
        self, record: Run, publication: Publication, repo: RepoInfo, gh: GitHubPort
    ) -> Published:
        """Publish the result; what reached GitHub is on the record at once."""
        result = publication.result
        if isinstance(result, Covered):
            issue = gh.issue(repo.owner, repo.name, result.issue_number)
            return Published((), (issue.html_url,))
        kind_label = IDEA_LABEL if isinstance(result, Idea) else PLAN_LABEL
        for label in (kind_label, TRIAGE_LABEL):
            gh.ensure_label(repo.owner, repo.name, label, LABEL_COLORS[label], LABEL_WORDS[label])
        parts = _Parts(record, publication, repo, gh, (kind_label, TRIAGE_LABEL), set())
        if isinstance(result, Idea):
            idea = self._open_part(parts, result.draft, "idea", "An Architect idea")
            return Published((idea.number,), (idea.html_url,))
        if not isinstance(result, Plan):
            raise ThirdshiftError(f"an Architect result of an unknown kind: {result!r}")
        return self._plan(parts, result)

    def _plan(self, parts: _Parts, result: Plan) -> Published:
        owner, name, gh = parts.repo.owner, parts.repo.name, parts.gh
        spec = None
        if result.spec is not None:
            spec = self._open_part(parts, result.spec, "spec", "A Spec")
        tickets: list[IssueInfo] = []
        for index, draft in enumerate(result.tickets, start=1):
            blockers = [tickets[position - 1].number for position in draft.blocked_by]
            ticket = self._open_part(
                parts,
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
        if self.settings.architect_hand_over:
            # What this run opened, and what an earlier run opened that nobody triaged since
            # (it still waits for triage, not Ready): a person's triage is never undone.
            ready = self.settings.ready_label.lower()
            untriaged = [
                issue
                for issue in ([spec] if spec else []) + tickets
                if issue.number in parts.opened_here
                or (
                    TRIAGE_LABEL in {label.lower() for label in issue.labels}
                    and ready not in {label.lower() for label in issue.labels}
                )
            ]
            self._hand_over(parts, untriaged, spec)
        issues = ([spec] if spec else []) + tickets
        return Published(tuple(i.number for i in issues), tuple(i.html_url for i in issues))

    def _open_part(
        self,
        parts: _Parts,
        draft: Draft,
        part: str,
        kind: str,
        blockers: Sequence[int] = (),
        spec_number: int | None = None,
    ) -> IssueInfo:
        publication, found = parts.publication, parts.publication.found
        if part in found:
            self.say(f"#{found[part].number} ({part}) was published already")
            return found[part]
        record = parts.record
        body = issue_text(
            draft,
            place=PlanPart(publication.key, part, publication.digest),
            reviewed=Reviewed(
                record.id,
                record.base_branch or parts.repo.default_branch,
                publication.base_sha,
            ),
            kind=kind,
            blockers=blockers,
            spec_number=spec_number,
        )
        opened = parts.gh.open_issue(
            parts.repo.owner,
            parts.repo.name,
            title=self.scrub(draft.title),
            body=self.scrub(body),
            labels=parts.labels,
        )
        self.say(f"opened #{opened.number} ({part}): {opened.html_url}")
        found[part] = opened
        parts.opened_here.add(opened.number)
        # What reached GitHub is on the record at once, whatever happens next.
        self.store.update_run(record.id, published=" ".join(str(i.number) for i in found.values()))
        return opened

    def _hand_over(
        self, parts: _Parts, issues: Sequence[IssueInfo], spec: IssueInfo | None
    ) -> None:
        """``architect_hand_over``: the plan is Ready without a person's triage. A plan with a
        Spec is handed over as the Spec: it alone gets the Ready label, so a daemon runs it as
        one Spec run (its Tickets in blocker order into one Spec branch, one Spec PR), and its
        Tickets lose the triage label without getting Ready (a Ready Ticket would be passed
        over anyway, and run on its own once the Spec run ended). A lone Ticket is Ready
        itself."""
        if not issues:
            return
        ready, repo, gh = self.settings.ready_label, parts.repo, parts.gh
        for issue in issues:
            if spec is None or issue.number == spec.number:
                gh.add_label(repo.owner, repo.name, issue.number, ready)
            gh.remove_label(repo.owner, repo.name, issue.number, TRIAGE_LABEL)
        made_ready = [i for i in issues if spec is None or i.number == spec.number]
        listed = ", ".join(f"#{i.number}" for i in made_ready)
        if made_ready:
            self.say(f"handed over: {listed} labelled {ready} in place of {TRIAGE_LABEL}")
        if spec is not None:
            rest = ", ".join(f"#{i.number}" for i in issues if i.number != spec.number)
            if rest:
                self.say(f"handed over with Spec #{spec.number}: {rest}, no longer {TRIAGE_LABEL}")
