"""The Repair loop step: the pull request recorded, then CI watched and repaired (a Merge run
merges at the end) until the Run's goal is reached or a verdict fails it."""

from __future__ import annotations

import threading

from thirdshift.clock import Clock
from thirdshift.git import Worktree
from thirdshift.records import PullRequestInfo
from thirdshift.runs.base_fixes import is_base_fix
from thirdshift.runs.loop_outside import LoopRun, RunLoopOutside
from thirdshift.runs.repair_loop import Budgets, LoopResult, RepairLoop
from thirdshift.runs.scope import RunScope, Say
from thirdshift.scrub import Scrubber
from thirdshift.sessions import Sessions
from thirdshift.settings import Settings
from thirdshift.store import Store
from thirdshift.store.retry import retrying


class RepairStep:
    def __init__(
        self,
        store: Store,
        settings: Settings,
        scrub: Scrubber,
        clock: Clock,
        say: Say,
        interrupt: threading.Event,
    ) -> None:
        self._store = store
        self._settings = settings
        self._scrub = scrub
        self._clock = clock
        self._say = say
        self._interrupt = interrupt

    def repair(
        self, scope: RunScope, worktree: Worktree, sessions: Sessions, pull: PullRequestInfo
    ) -> LoopResult:
        """The Repair loop's result on ``pull``, recorded on the Run first."""
        opened = pull.number
        retrying(  # the pull request is open: a blip must not fail the Run now
            lambda: self._store.update_run(scope.record.id, pull_request_number=opened),
            seconds=self._settings.salvage_wait_seconds,
            sleep=self._clock.sleep,
            monotonic=self._clock.monotonic,
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
        outside = RunLoopOutside(
            run,
            github=scope.github,
            store=self._store,
            settings=self._settings,
            scrub=self._scrub,
            clock=self._clock,
            say=self._say,
            interrupt=self._interrupt,
        )
        budgets = Budgets(self._settings.max_repairs, self._settings.max_upstream_moves)
        return RepairLoop(outside, budgets, merge=scope.request.merge).run()
