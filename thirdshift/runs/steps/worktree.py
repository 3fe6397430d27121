"""The Worktree: made afresh from thirdshift's own clone for each Run, on the Issue branch (or
detached at the Base branch's head, for a session whose changes are not the Run's output), and
removed at the end unless the salvage keeps it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from thirdshift.errors import ThirdshiftError
from thirdshift.git import ManagedClone, Worktree, tracking
from thirdshift.runs.prompts import PULL_REQUEST_FILE
from thirdshift.runs.scope import RunScope, Say
from thirdshift.store import Store


@dataclass(frozen=True)
class WorktreeStep:
    store: Store
    say: Say

    def on_branch(self, scope: RunScope) -> Worktree:
        """The Run's Worktree on its Issue branch: from origin's branch for a Continuation,
        else from the Base branch; each head it is left at is recorded."""
        choice, path = scope.choice, scope.found.worktree_path
        start = tracking(choice.branch) if choice.continuation else tracking(scope.base)
        scope.clone.remove_worktree(path)
        worktree = scope.clone.add_worktree(path, choice.branch, start)
        worktree.on_head = self._head_recorder(scope.record.id)
        worktree.exclude(f"/{PULL_REQUEST_FILE}")
        shown = start.removeprefix("refs/remotes/")
        self.say(f"working in {worktree.path} on {choice.branch}, from {shown}")
        return worktree

    @staticmethod
    def detached(clone: ManagedClone, path: Path, base: str, agent_file: str) -> Worktree:
        """A Worktree detached at ``base``'s head on origin; ``agent_file`` (what the session
        writes for thirdshift) is never committed."""
        clone.remove_worktree(path)
        worktree = clone.detached_worktree(path, tracking(base))
        worktree.exclude(f"/{agent_file}")
        return worktree

    def remove(self, clone: ManagedClone, path: Path) -> None:
        try:
            clone.remove_worktree(path)
        except ThirdshiftError as problem:
            self.say(f"warning: could not remove the worktree {path}: {problem}")

    def _head_recorder(self, run_id: int) -> Callable[[str], None]:
        """Records each head thirdshift leaves the Run's branch at. A head the store missed is
        only one a later Run will not adopt, so a failure is a warning."""

        def record(sha: str) -> None:
            try:
                self.store.record_branch_head(run_id, sha)
            except ThirdshiftError as problem:
                self.say(
                    f"warning: could not record the head {sha[:7]} of Run {run_id} ({problem}); "
                    "a Worktree kept at it will not be adopted"
                )

        return record
