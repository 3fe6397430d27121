"""The finish: the Run's goal reached. Its pull request checked open, ready and at the head CI
was watched on (a Merge run tidies up after its merge instead), the success recorded, and the
end announced. From here on a problem is a warning, never a Failed run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from thirdshift.errors import ThirdshiftError
from thirdshift.git import Worktree
from thirdshift.records import PullRequestInfo, Run
from thirdshift.run_states import RunEnd, RunState
from thirdshift.runs.notices import Announcer
from thirdshift.runs.outcome import RunOutcome, checks_line
from thirdshift.runs.rules.post_mortem import AnnouncedEnd, run_page_url
from thirdshift.runs.rules.prompts import PULL_REQUEST_FILE, pull_request_text
from thirdshift.runs.rules.repair_loop import LoopResult
from thirdshift.runs.scope import RunScope, RunTools, Say
from thirdshift.store import Store


def record_end(
    store: Store,
    run: Run,
    say: Say,
    what: str,
    retry: Callable[[Callable[[], object]], object] = lambda call: call(),
    **fields: object,
) -> None:
    """Record ``run``'s end; a failure is a warning (``what`` names the record in it)."""
    try:
        retry(lambda: store.finish_run(run.id, RunState.SUCCEEDED, **fields))
    except ThirdshiftError as problem:  # an interrupt included
        say(f"warning: could not record {what}: {problem}")


@dataclass(frozen=True)
class FinishStep:
    tools: RunTools
    emit_url: Say
    announcer: Announcer

    def say(self, line: str) -> None:
        self.tools.say(line)

    def check(
        self, scope: RunScope, worktree: Worktree, pull: PullRequestInfo, result: LoopResult
    ) -> PullRequestInfo:
        """The pull request as the Repair loop left it: its text brought up to what the agent
        last wrote, open and ready at the head CI was watched on; after a merge, tidied up."""
        ref, gh = scope.ref, scope.github
        text = worktree.read_agent_file(PULL_REQUEST_FILE)
        run_page = run_page_url(self.tools.settings.public_url, scope.record.id)
        written = (
            pull_request_text(text, ref, self.tools.scrub, run_page) if text is not None else None
        )
        if written is not None and written != (pull.title, pull.body) and not result.merged:
            title, body = written
            pull = gh.update_pull(ref.owner, ref.repo, pull.number, title=title, body=body)
        if result.merged:
            self._tidy_up(scope, pull.head_ref)
            return pull
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

    def _tidy_up(self, scope: RunScope, branch: str) -> None:
        """After the merge: the branch deleted, the issue closed, in-progress off."""
        ref, gh, busy = scope.ref, scope.github, self.tools.settings.in_progress_label

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
            labels = gh.issue(ref.owner, ref.repo, ref.number).labels
            found = [label for label in labels if label.lower() == busy.lower()]
            for label in found:
                gh.remove_label(ref.owner, ref.repo, ref.number, label)
            return f"removed {busy} from issue #{ref.number}" if found else None

        step(f"deleting {branch}", delete_branch)
        step(f"closing issue #{ref.number}", close_issue)
        step(f"removing {busy}", remove_label)

    def record(self, scope: RunScope, result: LoopResult, last_log: str | None) -> None:
        """The success, tried again while the store is away: a Run left "running" would be
        reaped as crashed and Rescued, paying for its work again."""

        record_end(
            self.tools.store,
            scope.record,
            self.say,
            "the Run's success",
            self.tools.retrying,
            head_sha=result.head,
            last_session_log=last_log,
        )

    def announce(self, scope: RunScope, pull: PullRequestInfo, result: LoopResult) -> RunOutcome:
        state = RunEnd.MERGED if result.merged else RunEnd.READY
        self.say(f"pull request {pull.html_url} is {state}")
        self.emit_url(pull.html_url)
        end = AnnouncedEnd(scope.issue.html_url, state, pull_request_url=pull.html_url)
        self.announcer.announce(scope.record, end)
        return RunOutcome(
            state,
            0,
            run_id=scope.record.id,
            pull_request_url=pull.html_url,
            checks=checks_line(result),
        )
