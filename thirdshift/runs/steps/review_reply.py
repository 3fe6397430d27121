"""The review reply: once a review Repair reached its goal, one marked reply on the pull
request saying what changed. A failure to post it is a warning; the goal is reached."""

from __future__ import annotations

from dataclasses import dataclass

from thirdshift.errors import ThirdshiftError
from thirdshift.git import Worktree
from thirdshift.records import PullRequestInfo
from thirdshift.runs.outcome import checks_line
from thirdshift.runs.ports import MarkedComments
from thirdshift.runs.rules.repair_loop import LoopResult
from thirdshift.runs.rules.review import reply_marker, review_reply
from thirdshift.runs.scope import Brief, RunScope, Say
from thirdshift.scrub import Scrubber


@dataclass(frozen=True)
class ReviewReplyStep:
    scrub: Scrubber
    say: Say

    def reply(
        self,
        scope: RunScope,
        brief: Brief,
        pull: PullRequestInfo,
        worktree: Worktree,
        result: LoopResult,
    ) -> None:
        """One marked reply on the pull request saying what the review Repair changed (none
        when the Run answered no review)."""
        if not brief.feedback or brief.reviewed_from is None:
            return
        body = review_reply(
            brief.feedback,
            run_id=scope.record.id,
            commits=worktree.log_subjects(brief.reviewed_from),
            head=result.head,
            checks=checks_line(result),
        )
        gh: MarkedComments = scope.github
        ref = scope.ref
        try:
            gh.upsert_marked_comment(
                ref.owner, ref.repo, pull.number, reply_marker(scope.record.id), self.scrub(body)
            )
            self.say(f"replied to the review on {pull.html_url}")
        except ThirdshiftError as problem:
            self.say(f"warning: could not reply to the review on {pull.html_url}: {problem}")
