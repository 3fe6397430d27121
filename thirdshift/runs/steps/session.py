"""The session: the agent's turn in the Worktree. A Rescue whose crashed Run had ended the
same turn does not pay for it twice."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from thirdshift.git import Worktree
from thirdshift.issue_url import RunRef
from thirdshift.runs.ports import SessionSource
from thirdshift.runs.scope import Say
from thirdshift.scrub import Scrubber
from thirdshift.sessions import Sessions
from thirdshift.store import Store


@dataclass(frozen=True)
class SessionStep:
    store: Store
    source: SessionSource
    scrub: Scrubber
    say: Say

    def sessions(self, run_id: int, worktree: Worktree, ref: RunRef) -> Sessions:
        """The Run's sessions in ``worktree``, each recorded with its log."""
        return self.source.sessions(run_id, worktree.path, ref)

    def take_turn(
        self,
        sessions: Sessions,
        kind: str,
        prompt: str,
        *,
        worktree: Worktree | None = None,
        rescue_of: int | None = None,
    ) -> None:
        """Run the ``kind`` session on ``prompt``, scrubbed. With ``worktree``, the head the
        session leaves is recorded (adr/0027); with ``rescue_of``, a turn the crashed Run
        ended already is not taken again."""
        done = self._turn_done(rescue_of)
        if done is not None:
            # Its work is on the branch (the takeover pushed the kept Worktree):
            # opening the session again would pay for the same turn twice.
            self.say(
                f"not opening the {done} session again: Run {rescue_of}'s "
                "ended its turn before the crash (its result is in its Session log)"
            )
            return
        try:
            sessions.run(kind, self.scrub(prompt))
        finally:  # the session's end is a head thirdshift stands behind (adr/0027)
            if worktree is not None:
                worktree.record_head()

    def _turn_done(self, rescue_of: int | None) -> str | None:
        """For a Rescue: the kind of the crashed Run's last session when that session had
        ended its turn (recorded ended, or its result in its Session log), else None."""
        if rescue_of is None:
            return None
        crashed = self.store.run_sessions(rescue_of)
        if not crashed:
            return None
        last = crashed[-1]
        if last.state == "ended" or self.source.turn_ended(last.harness, Path(last.log_path)):
            return last.kind
        return None
