"""Review feedback: what waits on the issue's open pull request for this Run to answer, read
before the Claim (a daemon's review pickup ends ``NotClaimed`` when it was taken meanwhile)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from thirdshift.issue_url import IssueRef
from thirdshift.records import PullRequestInfo, Repository
from thirdshift.runs.ports import Identity
from thirdshift.runs.rules.review import NO_FEEDBACK, Feedback, FeedbackReads, read_feedback
from thirdshift.runs.rules.roles import Roles
from thirdshift.runs.scope import Say
from thirdshift.settings import Settings
from thirdshift.store import Store


class ReviewReads(Identity, FeedbackReads, Protocol):
    """Who thirdshift is, who may review, and the review feedback on a pull request."""


@dataclass(frozen=True)
class FeedbackStep:
    github: ReviewReads
    store: Store
    settings: Settings
    say: Say

    def waiting(
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
        me = self.github.authenticated_login()
        if pull.author.lower() != me.lower():  # unknown counts as not ours
            return NO_FEEDBACK
        rescued = self.store.feedback_of_run(rescue_of) if rescue_of is not None else frozenset()
        feedback = read_feedback(
            self.github,
            ref.owner,
            ref.repo,
            pull.number,
            me=me,
            handle=self.settings.review_handle,
            role_of=Roles(self.github, ref.owner, ref.repo),
            handled=self.store.handled_feedback(repository, pull.number) - rescued,
        )
        if feedback.ignored:
            self.say(
                f"leaving {feedback.ignored} review item(s) on {pull.html_url} by bots or by "
                "people without write permission out of every prompt"
            )
        if feedback and not rescued:
            spent = self.store.review_repairs(repository, pull.number)
            if spent >= self.settings.max_review_repairs:
                self.say(
                    f"review feedback waits on {pull.html_url}, but its "
                    f"{self.settings.max_review_repairs} review Repairs (max_review_repairs) "
                    "are spent: it is left for people"
                )
                return NO_FEEDBACK
        return feedback
