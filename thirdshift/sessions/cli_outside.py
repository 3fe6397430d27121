"""The real adapter behind the Sessions module's Outside seam: one session of a Harness's CLI.

It builds the CLI's argv and environment from the Harness, spawns it in the Worktree under the
process supervisor, copies every stdout line (scrubbed) to the Session log as it arrives,
feeds the Harness's stream reader, records the session and its Session events in the database
as they happen, prints condensed progress lines and the session-ended line, and turns the
outcome into a ``SessionEnding`` or the right ``SessionFailed``. What a session does while its
CLI runs (its Session log, its Session events, its cost so far) is ``live_session``'s.

About 600 lines: ``CliOutside`` is one session's steps, from the budget check before it starts
to its recorded end, read top to bottom in one class, and ``CliSessions``, which builds a
``CliOutside`` for each Harness of a Run, has to sit beside it: the composition root imports
both from here (the ``sessions`` package does not re-export them, adr/0008).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

from thirdshift.clock import Clock
from thirdshift.console import format_duration
from thirdshift.errors import ThirdshiftError
from thirdshift.harnesses import (
    AgentSandbox,
    Harness,
    ProcessEnding,
    SealedPaths,
    StreamOutcome,
    install_dirs,
    run_supervised,
    working_in,
)
from thirdshift.harnesses.egress import EgressProxy, Refusal
from thirdshift.home import Home
from thirdshift.issue_url import IssueRef
from thirdshift.network import EgressAllowlist
from thirdshift.records import (
    DEFAULT_OUTPUT_CAPS,
    OutputCaps,
    ProviderOutage,
    Usage,
    Watchdogs,
)
from thirdshift.scrub import Scrubber
from thirdshift.sessions.event_writer import EventWriter
from thirdshift.sessions.ledger import (
    NO_BUDGETS,
    Budgets,
    Spent,
    budget_reached,
    priced,
)
from thirdshift.sessions.live_session import LiveSession, Meter, SessionLog
from thirdshift.sessions.preamble import RESUME_CAP_TOKENS
from thirdshift.sessions.rules import (
    BudgetReached,
    ProviderUnavailable,
    ResumeUnknown,
    SessionEnding,
    SessionFailed,
    SessionInterrupted,
    Sessions,
)
from thirdshift.settings import ModelPrice
from thirdshift.store import Store
from thirdshift.store.retry import retrying

RECENT_EVENTS = 50
VERSION_SECONDS = 30.0

# A CLI's version, by its resolved executable, for the Harnesses whose stream does not say it:
# asked once per process, since it cannot change under a running thirdshift.
_versions: dict[str, str | None] = {}
_versions_lock = threading.Lock()


def log_stamp(moment: datetime) -> str:
    """The stamp shared by every Session log of one Run: UTC, to the second."""
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def session_log_paths(
    logs_dir: Path, owner: str, repo: str, issue_number: int, stamp: str
) -> Callable[[str], Path]:
    """``kind -> $THIRDSHIFT_HOME/logs/<owner>-<repo>-issue-<n>-<stamp>-<kind>.jsonl``, or
    ``<owner>-<repo>-architect-<stamp>-<kind>.jsonl`` for an Architect run (issue 0: none)."""
    subject = f"issue-{issue_number}" if issue_number else "architect"

    def path_for(kind: str) -> Path:
        return logs_dir / f"{owner}-{repo}-{subject}-{stamp}-{kind}.jsonl"

    return path_for


class CliOutside:
    """Runs sessions of one Harness in one Worktree for one Run."""

    def __init__(
        self,
        *,
        harness: Harness,
        worktree: Path,
        store: Store,
        run_id: int,
        environ: Mapping[str, str],
        watchdogs: Watchdogs,
        grace_seconds: float,
        interrupt: threading.Event,
        progress: Callable[[str], None],
        scrub: Scrubber,
        clock: Clock,
        sandbox: AgentSandbox,
        sealed: SealedPaths,
        model: str | None = None,
        repository: str = "",
        budgets: Budgets = NO_BUDGETS,
        prices: Mapping[str, ModelPrice] | None = None,
        on_outage: Callable[[ProviderOutage], None] = lambda _outage: None,
        network_allow: tuple[str, ...] = (),
        store_wait_seconds: float = 120.0,
        output_caps: OutputCaps = DEFAULT_OUTPUT_CAPS,
    ) -> None:
        self._store_wait_seconds = store_wait_seconds
        self._output_caps = output_caps
        self._network_allow = network_allow
        self._on_outage = on_outage
        self._repository = repository
        self._budgets = budgets
        self._prices: Mapping[str, ModelPrice] = prices or {}
        self._clock = clock
        self._sandbox = sandbox
        self._sealed = sealed
        self._harness = harness
        self._worktree = worktree
        self._store = store
        self._run_id = run_id
        self._environ = environ
        self._watchdogs = watchdogs
        self._grace_seconds = grace_seconds
        self._interrupt = interrupt
        self._progress = progress
        self._scrub = scrub
        self._model = model
        # Harness session id -> our session row, so a Resume records what it resumed.
        self._rows_by_session_id: dict[str, int] = {}

    @property
    def harness(self) -> str:
        return self._harness.name

    def progress(self, line: str) -> None:
        self._progress(self._scrub(line))

    def run_session(
        self, kind: str, resume_id: str | None, prompt: str, log_path: Path
    ) -> SessionEnding:
        spent = self._spent()
        if spent is not None and (cause := budget_reached(self._budgets, spent, None)):
            self._refuse(kind, cause, log_path)
        resumed_row = self._rows_by_session_id.get(resume_id) if resume_id else None
        record_id = self._record_start(kind, resume_id, prompt, log_path, resumed_row)
        meter = Meter(
            self._harness, self._usage_of(resumed_row), self._priced, self._budgets, spent
        )
        reader = self._harness.reader(scrub=self._scrub)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        # Written from a thread of its own: a store error here must never reach the process
        # supervisor, which would kill an agent doing its work (adr/0028).
        writer = EventWriter(
            lambda events: self._store.add_session_events(record_id, events),
            warn=self.progress,
        )
        with log_path.open("ab") as log:
            live = LiveSession(
                kind,
                log=SessionLog(log, self._output_caps.log_bytes, self._scrub),
                reader=reader,
                writer=writer,
                meter=meter,
                worktree=self._worktree,
                scrub=self._scrub,
                progress=self.progress,
            )
            try:
                ending = self._run_cli(live, prompt, resume_id)
            except ThirdshiftError as error:
                cause = self._scrub(str(error))
                self._drain(writer, kind)
                self._end_session(record_id, state="failed", error=cause)
                raise SessionFailed(cause, log_path) from error
            live.log.end(ending.stderr_tail)
        self._drain(writer, kind)
        outcome = reader.finish(
            ending.exit_status, stopped_after_result=ending.stopped_by == "post-result"
        )
        usage = meter.measured(outcome.usage)
        self.progress(
            f"{kind}: session ended after {format_duration(ending.duration_seconds)}: "
            f"{usage.describe()}"
        )
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
        record = self._store.start_session(
            self._run_id,
            kind,
            harness=self._harness.name,
            model=self._model,
            log_path=str(log_path),
            prompt=self._scrub(prompt),
            harness_session_id=resume_id,
            resumed_from_id=resumed_row,
        )
        return record.id

    def _run_cli(self, live: LiveSession, prompt: str, resume_id: str | None) -> ProcessEnding:
        """Run the CLI to its end in the Agent sandbox, with its private home and its egress
        proxy, under the process supervisor; ``live`` takes its output."""
        self._sealed.agent_home.mkdir(parents=True, exist_ok=True, mode=0o700)
        home = self._harness.private_home(self._environ, self._sealed.agent_home)
        cli_env = {**self._harness.environment(self._environ), **home}
        live.meter.probed = self._cli_version(cli_env)
        allowlist = EgressAllowlist.of(
            self._harness.provider_endpoints(cli_env), self._network_allow
        )
        with self._network(allowlist, live.refused) as egress:
            argv, env = self._sandbox.wrap(
                self._harness.argv(prompt, model=self._model, resume_id=resume_id),
                cli_env,
                self._sealed,
                egress,
            )
            return run_supervised(
                argv,
                cwd=self._worktree,
                env=env,
                on_line=live.on_line,
                result_seen=lambda: live.reader.result_seen,
                watchdogs=self._watchdogs,
                stop_signals=self._harness.stop_signals,
                grace_seconds=self._grace_seconds,
                interrupt=self._interrupt,
                clock=self._clock,
                halt=live.meter.halt,
                on_cut=live.on_cut,
                line_cap_bytes=self._output_caps.line_bytes,
            )

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
        killed = [self._scrub(work) for work in outcome.killed_work]
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
            error=self._scrub(failure.cause),
            usage=usage,
        )
        # A watchdog's or an interrupt's stop is ours, whatever the stream said last.
        if outcome.provider_outage is not None and type(failure) is SessionFailed:
            self._on_outage(outcome.provider_outage)
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
            killed_work=[self._scrub(work) for work in outcome.killed_work],
            usage=usage,
        )
        # Summed again with this session recorded: Runs side by side spend meanwhile.
        now_spent = retrying(self._spent, seconds=self._store_wait_seconds)
        over_budget = None if now_spent is None else budget_reached(self._budgets, now_spent, None)
        if outcome.session_id:
            self._rows_by_session_id.setdefault(outcome.session_id, session_id)
        return SessionEnding(
            session_id=outcome.session_id,
            killed_work=tuple(self._scrub(work) for work in outcome.killed_work),
            final_message=outcome.final_message,
            recent_events=writer.recent()[-RECENT_EVENTS:],
            event_count=writer.count,
            over_budget=over_budget,
        )

    def _drain(self, writer: EventWriter, kind: str) -> None:
        """The session's end waits for its events to be written, within the store's bound."""
        unwritten = writer.close(self._store_wait_seconds)
        if unwritten:
            self.progress(
                f"warning: {kind}: {unwritten} Session event(s) not recorded (the store stayed "
                "away); the Session log holds them"
            )

    def _end_session(self, session_id: int, **fields: Any) -> None:
        """Record the session's end, tried again while the store is away (within its
        bound): a finished session's usage and result must not be lost to a blip."""
        retrying(
            lambda: self._store.end_session(session_id, **fields),
            seconds=self._store_wait_seconds,
            on_retry=lambda error: self.progress(
                f"warning: could not record the session's end ({error}); trying again"
            ),
        )

    @contextmanager
    def _network(
        self, allowlist: EgressAllowlist, refused: Callable[[Refusal], None]
    ) -> Iterator[Path | None]:
        """The socket of the session's egress proxy while it runs (None: the sandbox leaves
        the agent on the host's network, or gives it none)."""
        if not self._sandbox.network_sealed:
            yield None
            return
        try:
            proxy = EgressProxy(allowlist, on_refused=refused).__enter__()
        except OSError as error:
            raise ThirdshiftError(
                f"the agent's egress proxy cannot be started ({error.strerror or error}); check "
                "that the temporary directory is writable"
            ) from error
        try:
            yield proxy.socket_path
        finally:
            proxy.close()

    def _cli_version(self, env: Mapping[str, str]) -> str | None:
        """The CLI's version from ``version_argv``, run sealed as its sessions are, once per
        process (None when its stream names it, or the CLI would not say)."""
        argv = self._harness.version_argv()
        if argv is None:
            return None
        key = shutil.which(argv[0], path=env.get("PATH")) or argv[0]
        with _versions_lock:
            if key in _versions:
                return _versions[key]
        wrapped, wrapped_env = self._sandbox.wrap(argv, env, self._sealed)
        version = None
        try:
            done = subprocess.run(
                wrapped,
                cwd=self._worktree,
                env=wrapped_env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=VERSION_SECONDS,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            pass  # a ledger line without a version; the session itself will say what is wrong
        else:
            if done.returncode == 0:
                version = self._harness.parse_version(done.stdout)
        with _versions_lock:
            _versions.setdefault(key, version)
            return _versions[key]

    def _usage_of(self, session_row: int | None) -> Usage | None:
        """The recorded usage of one of this Run's sessions (the one a Resume resumes)."""
        if session_row is None:
            return None
        rows = [row for row in self._store.run_sessions(self._run_id) if row.id == session_row]
        return rows[0].usage if rows else None

    def _priced(self, usage: Usage) -> Usage:
        return priced(usage, self._prices, self._model)

    def _spent(self) -> Spent | None:
        """What was spent before this session, when a budget is set (None: nothing to check)."""
        if not self._budgets.any:
            return None
        owner, _, name = self._repository.partition("/")
        day = self._clock.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        return Spent(
            run_usd=self._store.run_cost(self._run_id),
            repository_today_usd=self._store.repository_cost(
                owner, name, day, day + timedelta(days=1)
            ),
            repository=self._repository,
        )

    def _refuse(self, kind: str, cause: str, log_path: Path) -> NoReturn:
        """Start no session: the budget is reached already. The Session log says why, so the
        Failed run's log is never a missing file."""
        cause = f"{kind} session not started: {cause}"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("ab") as log:
            note = {"type": "thirdshift.budget", "text": cause}
            log.write(json.dumps(note).encode() + b"\n")
        self.progress(cause)
        raise BudgetReached(cause, log_path)

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
                f"{kind} session stopped: no output for {self._watchdogs.idle_seconds:g}s "
                "(raise session_idle_seconds if the agent needs longer)",
                log_path,
            )
        if ending.stopped_by == "wall":
            return SessionFailed(
                f"{kind} session stopped: still running after "
                f"{format_duration(self._watchdogs.wall_seconds)} "
                "(raise session_wall_seconds if the agent needs longer)",
                log_path,
            )
        if not outcome.failed:
            return None
        cause = self._scrub(outcome.failure_cause or f"{self._harness.name} session failed")
        stderr = ending.stderr_tail
        last = next((line.strip() for line in reversed(stderr.splitlines()) if line.strip()), "")
        if last and last not in cause:
            cause = f"{cause} ({self._scrub(last[:300])})"
        if resume_id and self._harness.resume_unknown(outcome, stderr):
            return ResumeUnknown(cause, log_path)
        return SessionFailed(cause, log_path)

    def _scrub_optional(self, text: str | None) -> str | None:
        return None if text is None else self._scrub(text)


@dataclass(frozen=True)
class Fallback:
    """A Harness a Run may switch to on a provider outage, with its own Model (never the
    Model of the Harness it switches from)."""

    harness: Harness
    model: str | None = None


@dataclass(frozen=True)
class CliSessions:
    """Where a Run gets its Sessions (``runs.ports.SessionSource``) for real: sessions of one
    Harness CLI in the Run's Worktree, recorded in the store, their logs under ``logs_dir``.
    Built by the composition root; ``environ`` is what the CLI's environment is made from (the
    Harness adapter keeps only what it needs)."""

    harness: Harness
    store: Store
    environ: Mapping[str, str]
    logs_dir: Path
    watchdogs: Watchdogs
    grace_seconds: float
    interrupt: threading.Event
    progress: Callable[[str], None]
    scrub: Scrubber
    clock: Clock
    sandbox: AgentSandbox
    home: Home
    hidden: tuple[Path, ...]
    """Directories the agent must not see besides thirdshift's home (the user's home)."""
    model: str | None = None
    resume_cap_tokens: int = RESUME_CAP_TOKENS
    budgets: Budgets = NO_BUDGETS
    prices: Mapping[str, ModelPrice] = field(default_factory=dict)
    fallbacks: tuple[Fallback, ...] = ()
    """The Harnesses to switch to on a provider outage, in order (adr/0014)."""
    provider_wait_seconds: float = 0.0
    """The longest announced provider reset a session waits for before switching."""
    on_outage: Callable[[ProviderOutage], None] = lambda _outage: None
    """Told of every provider outage (the daemon pauses pickups for that Harness)."""
    network_allow: Callable[[str, str], tuple[str, ...]] = lambda _owner, _name: ()
    """``agent_network_allow`` of a repository: hosts its sessions may reach besides the
    provider (adr/0023)."""
    store_wait_seconds: float = 120.0
    """How long a session's end waits for the store (its events, its record) when it is
    away: ``salvage_wait_seconds`` (adr/0028)."""
    output_caps: OutputCaps = DEFAULT_OUTPUT_CAPS
    """The cut of a long stdout line and the cap of a Session log (adr/0029)."""

    @property
    def harness_name(self) -> str:
        return self.harness.name

    @property
    def executable(self) -> str:
        return self.harness.executable

    def still_working_in(self, worktree: Path) -> tuple[int, ...]:
        return tuple(working_in(worktree))

    def turn_ended(self, harness: str, log_path: Path) -> bool:
        # The Session log read again by the Harness's own reader, as the session read it live.
        known = [self.harness, *(fallback.harness for fallback in self.fallbacks)]
        found = next((h for h in known if h.name == harness), None)
        if found is None:
            return False
        reader = found.reader(scrub=self.scrub)
        try:
            with log_path.open("rb") as log:
                for line in log:
                    reader.feed(line.rstrip(b"\n"))
                    if reader.result_seen:
                        return True
        except OSError:
            return False
        return False

    def sessions(self, run_id: int, worktree: Path, ref: IssueRef) -> Sessions:
        sealed = SealedPaths(
            worktree=worktree,
            clone=self.home.repos / ref.owner / ref.repo,
            agent_home=self.home.agent_home(ref.owner, ref.repo, run_id),
            hidden=(self.home.root, *self.hidden),
            readable=install_dirs(self.harness.executable, self.environ.get("PATH")),
        )

        def outside(harness: Harness, model: str | None) -> CliOutside:
            return CliOutside(
                harness=harness,
                worktree=worktree,
                store=self.store,
                run_id=run_id,
                environ=self.environ,
                watchdogs=self.watchdogs,
                grace_seconds=self.grace_seconds,
                interrupt=self.interrupt,
                progress=self.progress,
                scrub=self.scrub,
                model=model,
                clock=self.clock,
                sandbox=self.sandbox,
                sealed=replace(
                    sealed, readable=install_dirs(harness.executable, self.environ.get("PATH"))
                ),
                repository=f"{ref.owner}/{ref.repo}",
                budgets=self.budgets,
                prices=self.prices,
                on_outage=self.on_outage,
                network_allow=self.network_allow(ref.owner, ref.repo),
                store_wait_seconds=self.store_wait_seconds,
                output_caps=self.output_caps,
            )

        stamp = log_stamp(self.clock.now())
        return Sessions(
            outside(self.harness, self.model),
            session_log_paths(self.logs_dir, ref.owner, ref.repo, ref.number, stamp),
            resume_cap_tokens=self.resume_cap_tokens,
            fallbacks=[outside(f.harness, f.model) for f in self.fallbacks],
            provider_wait_seconds=self.provider_wait_seconds,
            clock=self.clock,
        )
