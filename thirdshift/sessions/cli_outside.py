"""The real adapter behind the Sessions module's Outside seam: one session of a Harness's CLI.

It builds the CLI's argv and environment from the Harness, spawns it in its sealed space
(``sealed_space``) under the process supervisor, copies every stdout line (scrubbed) to the
Session log as it arrives, feeds the Harness's stream reader, records the session and its
Session events in the database as they happen, prints condensed progress lines and the
session-ended line, and turns the outcome into a ``SessionEnding`` or the right
``SessionFailed``. What a session does while its CLI runs (its Session log, its Session events,
its cost so far) is ``live_session``'s; what it is built from is ``cli_parts``'s; a Run's
``CliOutside`` for each of its Harnesses comes from ``cli_sessions.CliSessions``. Only the
composition root imports these modules (the ``sessions`` package does not re-export them,
adr/0008).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any, NoReturn

from thirdshift.console import format_duration
from thirdshift.errors import ThirdshiftError
from thirdshift.harnesses import Harness, ProcessEnding, StreamOutcome, run_supervised
from thirdshift.harnesses.limits import limit_cause
from thirdshift.home import disk_problem, disk_short
from thirdshift.network import EgressAllowlist
from thirdshift.records import Usage
from thirdshift.sessions.cli_parts import SessionBounds, SessionParts
from thirdshift.sessions.event_writer import EventWriter
from thirdshift.sessions.ledger import Spent, budget_reached, priced
from thirdshift.sessions.live_session import FileFailure, LiveSession, Meter, SessionLog
from thirdshift.sessions.rules import (
    BudgetReached,
    ProviderUnavailable,
    ResumeUnknown,
    SessionEnding,
    SessionFailed,
    SessionInterrupted,
)
from thirdshift.sessions.sealed_space import SealedSpace
from thirdshift.store.retry import retrying

RECENT_EVENTS = 50
FILE_FAILURE_WAIT_SECONDS = 5.0
"""How long a session stopped by a file error waits for the store (its events, its end)."""


class CliOutside:
    """Runs sessions of one Harness, with its Model, in the sealed space of Run ``run_id`` of
    ``repository`` (``owner/name``: its daily cost budget counts them), built from the Run's
    session parts and bounds."""

    def __init__(
        self,
        harness: Harness,
        *,
        run_id: int,
        parts: SessionParts,
        bounds: SessionBounds,
        space: SealedSpace,
        model: str | None = None,
        repository: str = "",
    ) -> None:
        self._harness = harness
        self._run_id = run_id
        self._parts = parts
        self._bounds = bounds
        self._space = space
        self._model = model
        self._repository = repository
        # Harness session id -> our session row, so a Resume records what it resumed.
        self._rows_by_session_id: dict[str, int] = {}

    @property
    def harness(self) -> str:
        return self._harness.name

    def progress(self, line: str) -> None:
        self._parts.progress(self._parts.scrub(line))

    def run_session(
        self, kind: str, resume_id: str | None, prompt: str, log_path: Path
    ) -> SessionEnding:
        spent = self._spent()
        if spent is not None and (cause := budget_reached(self._bounds.budgets, spent, None)):
            self._refuse(kind, cause, log_path)
        for place in (self._space.worktree, log_path.parent):
            if (short := disk_short(place, self._bounds.min_free_disk_mb)) is not None:
                self._refuse(kind, short, log_path, budget=False)
        resumed_row = self._rows_by_session_id.get(resume_id) if resume_id else None
        record_id = self._record_start(kind, resume_id, prompt, log_path, resumed_row)
        meter = Meter(
            self._harness, self._usage_of(resumed_row), self._priced, self._bounds.budgets, spent
        )
        reader = self._harness.reader(scrub=self._parts.scrub)
        # Written from a thread of its own: a store error here must never reach the process
        # supervisor, which would kill an agent doing its work (adr/0028).
        writer = EventWriter(
            lambda events: self._parts.store.add_session_events(record_id, events),
            warn=self.progress,
        )
        with self._session_log(kind, record_id, writer, log_path) as log:
            live = LiveSession(
                kind,
                log=log,
                reader=reader,
                writer=writer,
                meter=meter,
                worktree=self._space.worktree,
                scrub=self._parts.scrub,
                progress=self.progress,
            )
            try:
                ending = self._run_cli(live, prompt, resume_id)
            except ThirdshiftError as error:
                cause = self._parts.scrub(str(error))
                self._drain(writer, kind)
                self._end_session(record_id, state="failed", error=cause)
                raise SessionFailed(cause, log_path) from error
            except OSError as error:  # the agent's home, say, on a full disk
                cause = f"{kind} session failed: " + self._parts.scrub(
                    disk_problem(error, "running the session")
                )
                self.progress(cause)
                self._drain(writer, kind, FILE_FAILURE_WAIT_SECONDS)
                self._end_after_file_error(record_id, state="failed", error=cause)
                raise SessionFailed(cause, log_path) from error
            live.log.end(ending.stderr_tail)
        failed_file = live.file_failure
        # A store on the full disk cannot take the events: the Session log's failure is the
        # news, and waiting for the store would only hold the disk full for longer.
        self._drain(writer, kind, FILE_FAILURE_WAIT_SECONDS if failed_file else None)
        outcome = reader.finish(
            ending.exit_status, stopped_after_result=ending.stopped_by == "post-result"
        )
        usage = meter.measured(outcome.usage)
        self.progress(
            f"{kind}: session ended after {format_duration(ending.duration_seconds)}: "
            f"{usage.describe()}"
        )
        if failed_file is not None:
            self._stop_on_file(kind, record_id, failed_file, outcome, usage, log_path)
        if live.limit_hit is not None and ending.stopped_by != "interrupt":
            cause = self._parts.scrub(limit_cause(kind, live.limit_hit, self._space.limits))
            self._stop_for(cause, record_id, outcome, usage, log_path)
        if live.proxy_failure is not None and ending.stopped_by != "interrupt":
            cause = (
                f"{kind} session stopped: {live.proxy_failure}; run "
                "it again, and report it if it happens again"
            )
            self._stop_for(self._parts.scrub(cause), record_id, outcome, usage, log_path)
        if ending.stopped_by == "halt" and meter.over is not None:
            self._stop_at_budget(kind, record_id, meter.over, outcome, usage, log_path)
        failure = self._failure(kind, resume_id, outcome, ending, log_path)
        if failure is not None:
            self._fail(record_id, failure, outcome, usage, writer, log_path)
        return self._ended(record_id, outcome, usage, writer)

    def _record_start(
        self,
        kind: str,
        resume_id: str | None,
        prompt: str,
        log_path: Path,
        resumed_row: int | None,
    ) -> int:
        """Record the session as started (what it resumes, when a Resume); its row's id."""
        record = self._parts.store.start_session(
            self._run_id,
            kind,
            harness=self._harness.name,
            model=self._model,
            log_path=str(log_path),
            prompt=self._parts.scrub(prompt),
            harness_session_id=resume_id,
            resumed_from_id=resumed_row,
        )
        return record.id

    def _run_cli(self, live: LiveSession, prompt: str, resume_id: str | None) -> ProcessEnding:
        """Run the CLI to its end in the Agent sandbox, with its private home and its egress
        proxy, under the process supervisor; ``live`` takes its output."""
        self._space.paths.agent_home.mkdir(parents=True, exist_ok=True, mode=0o700)
        provider_env = self._harness.environment(self._parts.environ)
        plan = self._space.gateway_plan(self._harness, provider_env)
        home = self._harness.private_home(
            self._parts.environ, self._space.paths.agent_home, login=plan is None
        )
        cli_env = {**provider_env, **home}
        allowlist = EgressAllowlist.of(
            self._harness.provider_endpoints(cli_env), self._space.network_allow
        )
        argv = self._harness.argv(prompt, model=self._model, resume_id=resume_id)
        if plan is not None:
            cli_env, argv = plan.environment(cli_env), plan.argv(argv)
        live.meter.probed = self._space.cli_version(self._harness, cli_env)
        with (
            self._space.network(allowlist, live.refused, live.proxy_failed, plan) as egress,
            self._space.bounded(self._run_id, live.meter.halt, live.limits_watched) as group,
        ):
            argv, env = self._space.sandbox.wrap(argv, cli_env, self._space.paths, egress)
            return run_supervised(
                group.enter(argv),
                cwd=self._space.worktree,
                env=env,
                on_line=live.on_line,
                result_seen=lambda: live.reader.result_seen,
                watchdogs=self._bounds.watchdogs,
                stop_signals=self._harness.stop_signals,
                grace_seconds=self._bounds.grace_seconds,
                interrupt=self._parts.interrupt,
                clock=self._parts.clock,
                halt=live.meter.halt,
                on_cut=live.on_cut,
                line_cap_bytes=self._bounds.output_caps.line_bytes,
            )

    def _stop_for(
        self,
        cause: str,
        session_id: int,
        outcome: StreamOutcome,
        usage: Usage,
        log_path: Path,
        *,
        file_error: OSError | None = None,
    ) -> NoReturn:
        """thirdshift stopped the session for ``cause``: one of its limits (adr/0039, naming the
        setting to raise), its egress proxy's failure (adr/0040) or ``file_error`` (its Session
        log or events could not be written, adr/0041), whatever the CLI said as it was
        stopped."""
        self.progress(cause)
        end = self._end_session if file_error is None else self._end_after_file_error
        end(
            session_id,
            state="failed",
            harness_session_id=outcome.session_id,
            final_message=self._scrub_optional(outcome.final_message),
            killed_work=[self._parts.scrub(work) for work in outcome.killed_work],
            error=cause,
            usage=usage,
        )
        raise SessionFailed(cause, log_path) from file_error

    def _stop_at_budget(
        self,
        kind: str,
        session_id: int,
        over: str,
        outcome: StreamOutcome,
        usage: Usage,
        log_path: Path,
    ) -> NoReturn:
        """The session was stopped on reaching a cost budget (``over`` says which)."""
        killed = [self._parts.scrub(work) for work in outcome.killed_work]
        cause = f"{kind} session stopped: {over}"
        if killed:
            cause += f"; its background work was killed ({', '.join(killed)})"
        self.progress(cause)
        self._end_session(
            session_id,
            state="failed",
            harness_session_id=outcome.session_id,
            final_message=self._scrub_optional(outcome.final_message),
            killed_work=killed,
            error=cause,
            usage=usage,
        )
        raise BudgetReached(cause, log_path)

    def _fail(
        self,
        session_id: int,
        failure: SessionFailed,
        outcome: StreamOutcome,
        usage: Usage,
        writer: EventWriter,
        log_path: Path,
    ) -> NoReturn:
        """Record the session failed and raise ``failure``, or ``ProviderUnavailable`` when
        the model provider refused it."""
        self._end_session(
            session_id,
            state="failed",
            harness_session_id=outcome.session_id,
            final_message=self._scrub_optional(outcome.final_message),
            error=self._parts.scrub(failure.cause),
            usage=usage,
        )
        # A watchdog's or an interrupt's stop is ours, whatever the stream said last.
        if outcome.provider_outage is not None and type(failure) is SessionFailed:
            self._parts.on_outage(outcome.provider_outage)
            raise ProviderUnavailable(
                failure.cause,
                outcome.provider_outage,
                log_path,
                recent_events=writer.recent()[-RECENT_EVENTS:],
                event_count=writer.count,
            ) from failure
        raise failure

    def _ended(
        self, session_id: int, outcome: StreamOutcome, usage: Usage, writer: EventWriter
    ) -> SessionEnding:
        """Record the session ended, and say what it ended with."""
        self._end_session(
            session_id,
            state="ended",
            harness_session_id=outcome.session_id,
            final_message=self._scrub_optional(outcome.final_message),
            killed_work=[self._parts.scrub(work) for work in outcome.killed_work],
            usage=usage,
        )
        # Summed again with this session recorded: Runs side by side spend meanwhile.
        now_spent = retrying(self._spent, seconds=self._bounds.store_wait_seconds)
        over_budget = (
            None if now_spent is None else budget_reached(self._bounds.budgets, now_spent, None)
        )
        if outcome.session_id:
            self._rows_by_session_id.setdefault(outcome.session_id, session_id)
        return SessionEnding(
            session_id=outcome.session_id,
            killed_work=tuple(self._parts.scrub(work) for work in outcome.killed_work),
            final_message=outcome.final_message,
            recent_events=writer.recent()[-RECENT_EVENTS:],
            event_count=writer.count,
            over_budget=over_budget,
        )

    @contextmanager
    def _session_log(
        self, kind: str, session_id: int, writer: EventWriter, log_path: Path
    ) -> Iterator[SessionLog]:
        """The session's Session log, open while the CLI runs; a log that cannot even be
        opened (a full disk) fails the session before the CLI starts."""
        stack = contextlib.ExitStack()
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            log = stack.enter_context(
                SessionLog.opened(log_path, self._bounds.output_caps.log_bytes, self._parts.scrub)
            )
        except OSError as error:
            cause = f"{kind} session not started: " + disk_problem(
                error, "opening the Session log", log_path.parent
            )
            self.progress(cause)
            self._drain(writer, kind, FILE_FAILURE_WAIT_SECONDS)
            self._end_after_file_error(session_id, state="failed", error=cause)
            raise SessionFailed(cause, log_path) from error
        with stack:
            yield log

    def _stop_on_file(
        self,
        kind: str,
        session_id: int,
        failure: FileFailure,
        outcome: StreamOutcome,
        usage: Usage,
        log_path: Path,
    ) -> NoReturn:
        """The session was stopped because its Session log or events could not be written: a
        Failed run naming the disk and the fix, never a crash (adr/0041)."""
        cause = f"{kind} session stopped: " + disk_problem(
            failure.error, failure.doing, failure.where
        )
        self._stop_for(cause, session_id, outcome, usage, log_path, file_error=failure.error)

    def _end_after_file_error(self, session_id: int, **fields: Any) -> None:
        """Record the end of a session a file error stopped, within a short bound: a store on
        the same full disk takes it only once the salvage has made room, and the salvage
        ends every session of the Run still recorded running (adr/0041)."""
        try:
            retrying(
                lambda: self._parts.store.end_session(session_id, **fields),
                seconds=FILE_FAILURE_WAIT_SECONDS,
            )
        except ThirdshiftError as error:
            self.progress(
                f"warning: could not record the session's end ({error}); the Failed run records it"
            )

    def _drain(self, writer: EventWriter, kind: str, seconds: float | None = None) -> None:
        """The session's end waits for its events to be written, within the store's bound
        (or ``seconds``)."""
        unwritten = writer.close(self._bounds.store_wait_seconds if seconds is None else seconds)
        if unwritten:
            self.progress(
                f"warning: {kind}: {unwritten} Session event(s) not recorded (the store stayed "
                "away); the Session log holds them"
            )

    def _end_session(self, session_id: int, **fields: Any) -> None:
        """Record the session's end, tried again while the store is away (within its
        bound): a finished session's usage and result must not be lost to a blip."""
        retrying(
            lambda: self._parts.store.end_session(session_id, **fields),
            seconds=self._bounds.store_wait_seconds,
            on_retry=lambda error: self.progress(
                f"warning: could not record the session's end ({error}); trying again"
            ),
        )

    def _usage_of(self, session_row: int | None) -> Usage | None:
        """The recorded usage of one of this Run's sessions (the one a Resume resumes)."""
        if session_row is None:
            return None
        rows = [
            row for row in self._parts.store.run_sessions(self._run_id) if row.id == session_row
        ]
        return rows[0].usage if rows else None

    def _priced(self, usage: Usage) -> Usage:
        return priced(usage, self._bounds.prices, self._model)

    def _spent(self) -> Spent | None:
        """What was spent before this session, when a budget is set (None: nothing to check)."""
        if not self._bounds.budgets.any:
            return None
        owner, _, name = self._repository.partition("/")
        day = (
            self._parts.clock.now()
            .astimezone(UTC)
            .replace(hour=0, minute=0, second=0, microsecond=0)
        )
        return Spent(
            run_usd=self._parts.store.run_cost(self._run_id),
            repository_today_usd=self._parts.store.repository_cost(
                owner, name, day, day + timedelta(days=1)
            ),
            repository=self._repository,
        )

    def _refuse(self, kind: str, cause: str, log_path: Path, *, budget: bool = True) -> NoReturn:
        """Start no session: the budget is reached already (or, not ``budget``, the disk is
        short of room). The Session log says why, so the Failed run's log is never a missing
        file, unless the disk cannot take even that."""
        cause = f"{kind} session not started: {cause}"
        with contextlib.suppress(OSError):
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with log_path.open("ab") as log:
                note = {"type": "thirdshift.budget" if budget else "thirdshift.disk", "text": cause}
                log.write(json.dumps(note).encode() + b"\n")
        self.progress(cause)
        raise (BudgetReached if budget else SessionFailed)(cause, log_path)

    def _failure(
        self,
        kind: str,
        resume_id: str | None,
        outcome: StreamOutcome,
        ending: ProcessEnding,
        log_path: Path,
    ) -> SessionFailed | None:
        if ending.stopped_by == "interrupt":
            return SessionInterrupted(f"{kind} session interrupted", log_path)
        if ending.stopped_by == "idle":
            return SessionFailed(
                f"{kind} session stopped: no output for {self._bounds.watchdogs.idle_seconds:g}s "
                "(raise session_idle_seconds if the agent needs longer)",
                log_path,
            )
        if ending.stopped_by == "wall":
            return SessionFailed(
                f"{kind} session stopped: still running after "
                f"{format_duration(self._bounds.watchdogs.wall_seconds)} "
                "(raise session_wall_seconds if the agent needs longer)",
                log_path,
            )
        if not outcome.failed:
            return None
        cause = self._parts.scrub(outcome.failure_cause or f"{self._harness.name} session failed")
        stderr = ending.stderr_tail
        last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
        if last and last not in cause:
            cause = f"{cause} ({self._parts.scrub(last[:300])})"
        if resume_id and self._harness.resume_unknown(outcome, stderr):
            return ResumeUnknown(cause, log_path)
        return SessionFailed(cause, log_path)

    def _scrub_optional(self, text: str | None) -> str | None:
        return None if text is None else self._parts.scrub(text)
