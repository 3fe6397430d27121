"""What a Spec run says on GitHub as its Tickets land or stop (adr/0032): each landed Ticket
closed by thirdshift with a comment naming its merge, the draft Spec PR opened at the first
landing and its checklist rewritten at each, and at the end the Spec PR ready or the one
comment of a Failed spec run. The words come from ``spec_text``; this module only writes
them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from thirdshift.defang import defanged_title
from thirdshift.issue_url import IssueRef
from thirdshift.records import PullRequestInfo
from thirdshift.runs.ports import GitHubPort
from thirdshift.runs.rules.ticket_texts import (
    CHECKLIST_END,
    CHECKLIST_START,
    FAILED_SPEC_RUN_MARKER,
    TicketText,
    checklist_body,
    draft_body,
    failure_comment,
    spec_pr_body,
    with_checklist,
)

LANDED_MARKER = "<!-- thirdshift:ticket-landed -->"


@dataclass(frozen=True)
class SpecPull:
    """The Spec PR of one Spec run: from ``branch`` (the Spec branch) into ``base``."""

    github: GitHubPort
    spec: IssueRef
    title: str
    branch: str
    base: str
    say: Callable[[str], None]

    @property
    def _repository(self) -> str:
        return f"{self.spec.owner}/{self.spec.repo}"

    def find(self) -> PullRequestInfo | None:
        """The open Spec PR an earlier Spec run of this Spec branch left, if any."""
        ref = self.spec
        found = self.github.pulls_for_head(ref.owner, ref.repo, self.branch, "open")
        return found[0] if found else None

    def landed(self, tickets: tuple[TicketText, ...]) -> PullRequestInfo:
        """After a landing: the draft Spec PR opened, or its checklist rewritten (a person's
        text around the markers kept)."""
        ref, checklist = self.spec, checklist_body(tickets, self._repository)
        pull = self.find()
        if pull is None:
            pull = self.github.create_pull(
                ref.owner,
                ref.repo,
                head=self.branch,
                base=self.base,
                title=defanged_title(f"Spec #{ref.number}: {self.title}", self._repository),
                body=draft_body(ref.number, checklist),
                draft=True,
            )
            self.say(f"opened the draft Spec PR {pull.html_url}")
            return pull
        body = with_checklist(pull.body, checklist)
        if body != pull.body:
            pull = self.github.update_pull(ref.owner, ref.repo, pull.number, body=body)
        return pull

    def close_ticket(self, number: int, pull: int | None, run_id: int) -> None:
        """A landed Ticket closed by thirdshift (GitHub closes issues only on merges into the
        default branch), with one marked comment naming its merge."""
        ref, gh = self.spec, self.github
        where = f"pull request #{pull}" if pull is not None else f"Run {run_id}"
        body = (
            f"{LANDED_MARKER}\nLanded in the Spec branch `{self.branch}` of #{ref.number} by "
            f"{where} (Run {run_id}); thirdshift closes this Ticket. The Spec PR brings it into "
            f"`{self.base}`."
        )
        gh.upsert_marked_comment(ref.owner, ref.repo, number, LANDED_MARKER, body)
        if gh.issue(ref.owner, ref.repo, number).state == "open":
            gh.close_issue(ref.owner, ref.repo, number)
            self.say(f"closed Ticket #{number}: it landed in {self.branch}")

    def finished(self, tickets: tuple[TicketText, ...]) -> PullRequestInfo:
        """The delivered Spec PR's body: the Tickets' checklist, then the Spec review's text as
        the takeover wrote it, ending with thirdshift's one line closing the Spec."""
        ref = self.spec
        [pull] = self.github.pulls_for_head(ref.owner, ref.repo, self.branch)[:1]
        review = _without_checklist(pull.body)
        body = spec_pr_body(ref.number, review, tickets, self._repository)
        return self.github.update_pull(ref.owner, ref.repo, pull.number, body=body)

    def failed(self, tickets: tuple[TicketText, ...]) -> None:
        """A Failed spec run: the draft Spec PR (if any) keeps its checklist, and the Spec gets
        the one comment saying what is not done (a later Failed spec run edits it)."""
        ref = self.spec
        pull = self.find()
        if pull is not None:
            pull = self.landed(tickets)
        text = failure_comment(tickets, pull.number if pull else None, self._repository)
        self.github.upsert_marked_comment(
            ref.owner,
            ref.repo,
            ref.number,
            FAILED_SPEC_RUN_MARKER,
            f"{FAILED_SPEC_RUN_MARKER}\n{text}",
        )


def _without_checklist(body: str) -> str:
    """``body`` with thirdshift's checklist (and its markers) taken out, so rewriting the final
    body twice keeps one checklist."""
    if CHECKLIST_START in body and CHECKLIST_END in body:
        head, _, rest = body.partition(CHECKLIST_START)
        _, _, tail = rest.partition(CHECKLIST_END)
        return (head + tail).strip()
    return body
