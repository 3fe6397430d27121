"""The Repair loop step: the pull request recorded, then CI watched and repaired (a Merge run
merges at the end) until the Run's goal is reached or a verdict fails it."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from thirdshift.git import Worktree
from thirdshift.records import PullRequestInfo
from thirdshift.runs.base_fixes import is_base_fix
from thirdshift.runs.loop_outside import LoopRun, RunLoopOutside
from thirdshift.runs.repair_loop import Budgets, LoopResult, RepairLoop
from thirdshift.runs.scope import RunScope, RunTools
from thirdshift.sessions import Sessions


@dataclass(frozen=True)
class RepairStep:
    tools: RunTools
    interrupt: threading.Event

    def repair(
        self, scope: RunScope, worktree: Worktree, sessions: Sessions, pull: PullRequestInfo
    ) -> LoopResult:
        """The Repair loop's result on ``pull``, recorded on the Run first."""
        opened = pull.number
        # The pull request is open: a blip must not fail the Run now.
        self.tools.retrying(
            lambda: self.tools.store.update_run(scope.record.id, pull_request_number=opened)
        )
        run = LoopRun(
            ref=scope.ref,
            worktree=worktree,
            sessions=sessions,
            record=scope.record,
            base=scope.base,
            pull=pull,
            fence=scope.keeper.check,
            fixing_base=is_base_fix(scope.issue, scope.github.authenticated_login),
        )
        outside = RunLoopOutside(run, scope.github, self.tools, self.interrupt)
        settings = self.tools.settings
        budgets = Budgets(settings.max_repairs, settings.max_upstream_moves)
        return RepairLoop(outside, budgets, merge=scope.request.merge).run()
