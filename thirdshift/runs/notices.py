"""Announcing a Run's end to the notification targets, at most once per Run.

The right to announce is taken in the database first (``Store.claim_notice``, one conditional
statement): a Run end recorded twice, two processes, or a daemon restarted after it announced
never send a second message. A message lost because its process died between the mark and the
send is not sent again; ADR 0018 weighs that against a repeat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from thirdshift.errors import ThirdshiftError
from thirdshift.records import Run
from thirdshift.runs.ports import Notifier
from thirdshift.runs.post_mortem import PostMortem, RunEnd, post_mortem, run_end_notification
from thirdshift.scrub import Scrubber
from thirdshift.store import Store


def announce_run_end(
    *,
    store: Store,
    notifier: Notifier,
    scrub: Scrubber,
    progress: Callable[[str], None],
    run: Run,
    end: RunEnd,
) -> None:
    """Send the message of ``run``'s end unless it was sent already or no target is
    configured. ``end.report`` is the Post-mortem when the caller has it; else it is read
    here. Never raises."""
    if not notifier.configured:
        return
    try:
        if not store.claim_notice(run.id):
            recorded = store.get_run(run.id)
            if recorded is not None and recorded.state == "running":
                # Its end could not be recorded (the database failed meanwhile): say so, since
                # this is when the team most needs to hear of it.
                progress(
                    f"warning: could not announce the end of Run {run.id}: the database does "
                    "not record that it ended"
                )
            return
        sessions = store.run_sessions(run.id)
    except ThirdshiftError as problem:
        progress(f"warning: could not announce the end of Run {run.id}: {problem}")
        return
    report = end.report
    if report is None:
        report = post_mortem(run.id, end.cause, sessions, (), scrub)
    costs = [s.usage.cost_usd for s in sessions if s.usage.cost_usd is not None]
    notifier.notify(
        run_end_notification(
            run_id=run.id,
            repository=run.repository.full_name,
            issue_number=run.issue_number,
            kind=run.kind,
            end=replace(end, report=report),
            cost_usd=round(sum(costs), 6) if costs else None,
        )
    )


class Announcer:
    """``announce_run_end`` with what stays the same for every Run of one process."""

    def __init__(
        self, store: Store, notifier: Notifier, scrub: Scrubber, say: Callable[[str], None]
    ) -> None:
        self._store = store
        self._notifier = notifier
        self._scrub = scrub
        self._say = say

    def announce(
        self,
        run: Run,
        issue_url: str,
        state: str,
        *,
        cause: str | None = None,
        pull_request_url: str | None = None,
        report: PostMortem | None = None,
    ) -> None:
        end = RunEnd(issue_url, state, cause, pull_request_url, report)
        announce_run_end(
            store=self._store,
            notifier=self._notifier,
            scrub=self._scrub,
            progress=self._say,
            run=run,
            end=end,
        )
