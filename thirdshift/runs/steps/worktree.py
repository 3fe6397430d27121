"""The Worktree: made afresh from thirdshift's own clone for each Run, on the Issue branch (or
detached at the Base branch's head, for a session whose changes are not the Run's output), and
removed at the end unless the salvage keeps it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from thirdshift.errors import ThirdshiftError
from thirdshift.git import ManagedClone, Worktree, tracking
from thirdshift.runs.rules.prompts import PULL_REQUEST_FILE
from thirdshift.runs.scope import RunScope, Say
from thirdshift.store import Store


@dataclass(frozen=True)
class WorktreeStep:
    store: Store
    say: Say

    def on_branch(self, scope: RunScope) -> Worktree:
        """The Run's Worktree on its Issue branch: from origin's branch for a Continuation,
        else from the Base branch (``ready`` makes it ready for the session)."""
        scope.clone.remove_worktree(scope.found.worktree_path)
        return scope.clone.add_worktree(scope.found.worktree_path, scope.branch, self._start(scope))

    def ready(self, scope: RunScope, worktree: Worktree) -> None:
        """Each head the Worktree is left at recorded; the Pull request file never committed."""
        worktree.on_head = self._head_recorder(scope.record.id)
        worktree.exclude(f"/{PULL_REQUEST_FILE}")
        shown = self._start(scope).removeprefix("refs/remotes/")
        self.say(f"working in {worktree.path} on {scope.branch}, from {shown}")

    @staticmethod
    def _start(scope: RunScope) -> str:
        return tracking(scope.branch) if scope.choice.continuation else tracking(scope.base)

    @staticmethod
    def detached(clone: ManagedClone, path: Path, base: str) -> Worktree:
        """A Worktree detached at ``base``'s head on origin."""
        clone.remove_worktree(path)
        return clone.detached_worktree(path, tracking(base))

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
