"""The brief: the opening session's prompt, from the issue, the discussion people who may
triage wrote, what an earlier Run did; or, when review feedback waits, the review Repair's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from thirdshift.git import Worktree
from thirdshift.records import Comment, PullRequestInfo, Run
from thirdshift.run_states import RunState
from thirdshift.runs.claims import CLAIM_MARKER
from thirdshift.runs.failed_run import COMMENT_MARKER
from thirdshift.runs.rules.prompts import SPEC_REVIEW, cut_bytes, implement_prompt, trusted_comments
from thirdshift.runs.rules.review import NO_FEEDBACK, Feedback, review_prompt
from thirdshift.runs.rules.roles import Roles, same_login
from thirdshift.runs.scope import Brief, RunScope, Say
from thirdshift.scrub import Scrubber
from thirdshift.sessions import EVENTS_IN_RESUME, follow_up_preamble
from thirdshift.settings import Settings
from thirdshift.store import Store

EARLIER_REPORT_BYTES = 6000


@dataclass(frozen=True)
class BriefStep:
    store: Store
    settings: Settings
    scrub: Scrubber
    say: Say

    def write(self, scope: RunScope, worktree: Worktree, pull: PullRequestInfo | None) -> Brief:
        """The opening session's kind and prompt (unscrubbed: the session scrubs it)."""
        gh, ref, choice = scope.github, scope.ref, scope.choice
        everything = gh.issue_comments(ref.owner, ref.repo, ref.number)
        # thirdshift's own marked comments are not the discussion: the claim says
        # nothing, and a Failed-run report reaches the prompt as the earlier Run's. A
        # person's comment that quotes a marker is discussion like any other.
        me = gh.authenticated_login()
        ours = [
            c
            for c in everything
            if same_login(c.author, me) and (COMMENT_MARKER in c.body or CLAIM_MARKER in c.body)
        ]
        reports = [c for c in ours if COMMENT_MARKER in c.body]
        comments = [c for c in everything if c not in ours]
        role_of = Roles(gh, ref.owner, ref.repo)
        roles = {author: role_of(author) for author in sorted({c.author for c in comments})}
        trusted, left_out = trusted_comments(comments, roles)
        if left_out:
            self.say(
                f"leaving {left_out} comment(s) by people without triage or write "
                "permission out of the prompt"
            )
        kind, feedback = scope.session_kind, scope.feedback
        if kind == SPEC_REVIEW:  # a Spec PR: the Spec run wrote its whole prompt
            return Brief(kind, scope.request.preamble, NO_FEEDBACK)
        if feedback and pull is not None:
            kind = self._take_review(scope, pull, feedback)
        if kind != scope.session_kind and pull is not None:
            reviewed_from = worktree.head()
            prompt = review_prompt(
                self._earlier_run(scope.record, reports, worktree.remote_sha(choice.branch)),
                issue=scope.issue,
                pull=pull,
                feedback=feedback,
                issue_branch=choice.branch,
            )
            return Brief(kind, prompt, feedback, reviewed_from)
        prompt = implement_prompt(
            scope.issue,
            trusted,
            left_out=left_out,
            base_branch=scope.base,
            issue_branch=choice.branch,
            continuation=choice.continuation,
            pull_request_url=pull.html_url if pull else None,
            earlier=(
                self._earlier_run(scope.record, reports, worktree.remote_sha(choice.branch))
                if choice.continuation
                else ""
            ),
        )
        if scope.request.preamble:  # a Ticket Run: the Spec and its blockers come first
            prompt = f"{scope.request.preamble}\n{prompt}"
        return Brief(kind, prompt, NO_FEEDBACK)

    def _take_review(self, scope: RunScope, pull: PullRequestInfo, feedback: Feedback) -> str:
        """Record the feedback as this Run's (each piece handled once, whatever happens
        next), and the review session's kind, ``review-<i>``; the opening kind when another
        Run took all of it meanwhile."""
        record = scope.record
        taken = self.store.take_feedback(
            record.repository,
            pull.number,
            feedback.keys,
            record.id,
            from_run=scope.request.rescue_of,
        )
        if not taken:
            return scope.session_kind
        count = self.store.review_repairs(record.repository, pull.number)
        who = ", ".join(feedback.reviewers)
        self.say(
            f"answering the review of {pull.html_url} by {who} ({len(feedback.notes)} "
            f"comment(s)) in session review-{count}"
        )
        return f"review-{count}"

    def _earlier_run(
        self, record: Run, reports: Sequence[Comment] = (), head: str | None = None
    ) -> str:
        """What the last Run on this issue did and why it ended, for a Continuation's prompt,
        from the database (never from a Harness transcript); when the database knows no earlier
        Run (it ran on another machine, a runner whose database died with its job), from the
        Failed-run report thirdshift left on the issue. That report is the last Run's only when
        it names the branch's head on origin (``head``); otherwise a later Run went further."""
        earlier = self.store.earlier_runs(record, limit=1)
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
            return self.scrub(
                opening
                + cut_bytes(report, EARLIER_REPORT_BYTES, "[the rest of the report is left out]")
                + "\n"
            )
        history = self.store.issue_history(record, last_events=EVENTS_IN_RESUME)
        if history:
            cap = self.settings.follow_up_preamble_tokens
            return self.scrub(follow_up_preamble(history, cap_tokens=cap))
        last = earlier[0]  # it ran no session: how it ended is all there is
        if last.state in (RunState.RUNNING, RunState.CRASHED):  # it never recorded an ending itself
            ending = "The earlier Run stopped without recording how it ended (its process died)"
        else:
            ending = f"The earlier Run ended {last.state}" + (
                f": {last.cause}" if last.cause else ""
            )
        return self.scrub(f"{ending}.\n")
