"""The takeover: after the session, thirdshift (never the agent) commits what it left, pushes
the Issue branch secret-checked, and opens or updates the pull request from the agent's Pull
request file, checks it is open into the Base branch, and marks it ready."""

from __future__ import annotations

from dataclasses import dataclass

from thirdshift.errors import ThirdshiftError
from thirdshift.git import Worktree, tracking
from thirdshift.issue_url import IssueRef
from thirdshift.records import PullRequestInfo
from thirdshift.runs.ports import PullRequests
from thirdshift.runs.rules.post_mortem import run_page_url
from thirdshift.runs.rules.prompts import (
    PULL_REQUEST_FILE,
    fallback_pull_request,
    pull_request_text,
)
from thirdshift.runs.scope import RunScope, Say
from thirdshift.runs.secret_check import push_checked
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings


@dataclass(frozen=True)
class TakeoverStep:
    settings: Settings
    scrub: Scrubber
    say: Say

    def take_over(
        self, scope: RunScope, worktree: Worktree, pull: PullRequestInfo | None
    ) -> PullRequestInfo:
        """The Run's pull request, open and ready, at the pushed head."""
        ref, branch, base = scope.ref, scope.branch, scope.base
        self._push(scope, worktree)
        run_page = run_page_url(self.settings.public_url, scope.record.id)
        written = self._written(ref, worktree, run_page)
        title, body = written or fallback_pull_request(ref, run_page)
        gh: PullRequests = scope.github
        if pull is None:
            open_pulls = [
                p for p in gh.pulls_for_head(ref.owner, ref.repo, branch) if p.state == "open"
            ]
            pull = open_pulls[0] if open_pulls else None
        if pull is None:
            pull = gh.create_pull(
                ref.owner, ref.repo, head=branch, base=base, title=title, body=body
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

    def _push(self, scope: RunScope, worktree: Worktree) -> None:
        if worktree.is_dirty() and worktree.commit_all(
            "thirdshift: work the implement session left uncommitted"
        ):
            self.say("committed work the session left uncommitted")
        if worktree.is_ancestor("HEAD", tracking(scope.base)):
            raise ThirdshiftError(
                f"the implement session made no commits on {scope.branch}; there is nothing to "
                "open a pull request for"
            )
        self.say(f"pushing {scope.branch}")
        push_checked(
            worktree,
            scope.branch,
            scope.base,
            self.scrub.findings,
            scope.keeper.check,
            say=self.say,
            allow_workflow_changes=self.settings.allow_workflow_changes_for(
                scope.ref.owner, scope.ref.repo
            ),
        )

    def _written(
        self, ref: IssueRef, worktree: Worktree, run_page: str | None
    ) -> tuple[str, str] | None:
        text = worktree.read_agent_file(PULL_REQUEST_FILE)
        if text is None:
            self.say(f"the session wrote no {PULL_REQUEST_FILE}")
            return None
        return pull_request_text(text, ref, self.scrub, run_page)
