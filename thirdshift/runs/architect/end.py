"""How an Architect run ends when it does not publish: failed or interrupted, on the record
(an interrupted run's cause says so, so a later run knows it says nothing of the plan), told
on stderr and announced at most once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from thirdshift.errors import Interrupted, ThirdshiftError
from thirdshift.records import Run
from thirdshift.run_states import RunEnd, RunState
from thirdshift.runs.architect.complete import INTERRUPTED
from thirdshift.runs.notices import Announcer
from thirdshift.runs.outcome import RunOutcome
from thirdshift.runs.rules.post_mortem import AnnouncedEnd
from thirdshift.runs.scope import Say
from thirdshift.scrub import Scrubber
from thirdshift.sessions import SessionInterrupted, Sessions
from thirdshift.store import Store


@dataclass(frozen=True)
class ArchitectEndings:
    store: Store
    scrub: Scrubber
    say: Say
    announcer: Announcer
    interrupt: threading.Event
    web_host: str
    lease_lost: Callable[[], bool]

    def failed(self, record: Run, error: BaseException, sessions: Sessions | None) -> RunOutcome:
        if not isinstance(error, ThirdshiftError | OSError):
            error = ThirdshiftError(f"unexpected {error.__class__.__name__}: {error}")
        cause = self.scrub(str(error) or error.__class__.__name__)
        # Stopped by a signal (the interrupt is set), not by losing the Lease (which sets it too).
        stopped = self.interrupt.is_set() and not self.lease_lost()
        interrupted = isinstance(error, Interrupted | SessionInterrupted) or stopped
        state = RunEnd.INTERRUPTED if interrupted else RunEnd.FAILED
        said = cause
        if interrupted:  # on the record, so a later run knows it says nothing of the plan
            cause = INTERRUPTED + cause
        last_log = sessions.last_log if sessions is not None else None
        fields: dict[str, object] = {"cause": cause}
        if last_log is not None:
            fields["last_session_log"] = str(last_log)
        try:
            # An interrupted Architect run is recorded failed; its end says interrupted.
            self.store.finish_run(record.id, RunState.FAILED, **fields)
        except ThirdshiftError as problem:
            self.say(f"warning: could not record the Failed run: {problem}")
        kept = self._result_kept(record.id)
        self.say(f"the Architect run {'was interrupted' if interrupted else 'failed'}: {said}")
        if kept:
            self.say(
                "its result is kept: the next Architect run on the repository publishes the "
                "rest of it first"
            )
        else:
            self.say("nothing was published")
        self.say(f"session log: {last_log if last_log else 'none'}")
        self.announce(record, state, None, cause=cause)
        return RunOutcome(state, 1, run_id=record.id, cause=cause)

    def announce(
        self, record: Run, state: RunEnd, url: str | None, *, cause: str | None = None
    ) -> None:
        """Tell the team's targets how the Architect run ended (``published``, ``covered``,
        ``failed`` or ``interrupted``), at most once: a plan waiting for triage, or a run that
        keeps failing, is news they should not have to look for."""
        repository = record.repository.full_name
        fallback = f"https://{self.web_host}/{repository}/issues"
        self.announcer.announce(record, AnnouncedEnd(url or fallback, state, cause))

    def _result_kept(self, run_id: int) -> bool:
        try:
            return self.store.architect_result(run_id) is not None
        except ThirdshiftError:
            return False
