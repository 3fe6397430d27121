"""Harnesses: the agent CLIs thirdshift drives, one adapter each, registered by name.

An adapter owns every fact about its CLI: the argv of a fresh session and of a resume, the
environment it is given (only what it needs: never a GitHub token), the signals that stop it,
how to tell that a resume id is unknown to it, and a stream reader that turns its stdout into
progress lines, Session events and one ``StreamOutcome``. Nothing outside an adapter knows a
CLI's flags or its stream's shapes.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from thirdshift.harnesses.model_gateway import GatewayPlan
from thirdshift.network import HostPattern
from thirdshift.records import ProviderOutage, SessionEvent, Usage

__all__ = ["Usage"]  # the record lives with the others; Harness adapters make it


@dataclass(frozen=True)
class Observation:
    """What one stdout line meant: zero or more condensed progress lines and Session events.
    ``seq`` of each event is assigned by the reader, from 1, in stream order."""

    progress: tuple[str, ...] = ()
    events: tuple[SessionEvent, ...] = ()


NOTHING = Observation()


@dataclass(frozen=True)
class StreamOutcome:
    """How a session ended, as its stream (and exit status) tell it.

    ``failed`` is True for an error result, a failed turn, or a non-zero exit that the stream
    does not explain as success; ``failure_cause`` then says why in one line. ``killed_work``
    names background work that was still running and killed when the session ended, in the
    order it was started, each by its description (Claude) or command (Codex).
    ``provider_outage`` is set when the session failed because the model provider refused it
    after the CLI's own retries (429, 529, 503, or a rate-limit event saying rejected).
    """

    session_id: str | None
    final_message: str | None
    failed: bool
    failure_cause: str | None = None
    killed_work: tuple[str, ...] = ()
    usage: Usage = field(default_factory=Usage)
    result_seen: bool = False
    provider_outage: ProviderOutage | None = None


class StreamReader(Protocol):
    """Follows one session's stdout, line by line. Never raises on input: unknown event types,
    non-JSON lines, empty lines and over-long lines are skipped (they stay in the Session log)."""

    @property
    def session_id(self) -> str | None:
        """The session id, once the stream has said it (Claude's init, Codex's thread.started)."""
        ...

    @property
    def result_seen(self) -> bool:
        """True once the final result of the turn is out (Claude: a ``result`` line; Codex:
        ``turn.completed`` or ``turn.failed``). The post-result watchdog starts from here."""
        ...

    @property
    def usage_so_far(self) -> Usage:
        """What the session has consumed so far, as far as the stream has said (for budgets
        checked while it runs); ``finish`` gives the final figure."""
        ...

    def feed(self, line: bytes) -> Observation:
        """Read one line of stdout (without its newline)."""
        ...

    def finish(self, exit_status: int | None, stopped_after_result: bool) -> StreamOutcome:
        """The outcome once the process has exited. ``exit_status`` is the process's return code
        (negative for a signal, None if unknown); ``stopped_after_result`` is True when thirdshift
        stopped the process itself after the final result (the post-result watchdog), in which
        case background work still running then counts as killed."""
        ...


class Harness(Protocol):
    """One agent CLI. Adapters are stateless; ``reader()`` gives a fresh reader per session."""

    name: str
    executable: str
    reports_cost: bool
    """Whether its stream states what a session cost (else thirdshift prices the tokens)."""

    def argv(self, prompt: str, *, model: str | None, resume_id: str | None) -> list[str]:
        """The full argv (executable first) of a fresh session, or of a native resume of
        ``resume_id``. The prompt is an argv element, never a shell string."""
        ...

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """The CLI's environment, built from ``base`` (the daemon's own): only the variables the
        CLI needs (PATH, HOME, locale, temp dir) and the provider's (base URL, API key, config
        home). Never ``GITHUB_TOKEN``, ``THIRDSHIFT_*`` or other credentials."""
        ...

    @property
    def stop_signals(self) -> Sequence[signal.Signals]:
        """Signals sent in order, a grace period apart, before the whole tree is killed."""
        ...

    def reader(self, scrub: Callable[[str], str] | None = None) -> StreamReader:
        """A new reader for one session's stdout. ``scrub`` (the composition root's scrubber),
        when given, is applied to every text the reader shortens before it is cut: progress
        lines, and the summaries, tools and targets of Session events and failure causes. So a
        secret near a cut is removed whole, not left with its first characters in clear. The
        final message and killed work are not cut; scrubbing them is the caller's job."""
        ...

    def version_argv(self) -> list[str] | None:
        """The argv that prints the CLI's version, when its stream does not say it (None: the
        stream does, as claude's init line)."""
        ...

    def parse_version(self, output: str) -> str | None:
        """The version in what ``version_argv`` printed, or None."""
        ...

    def resume_usage(self, reported: Usage, resumed: Usage) -> Usage:
        """What a native Resume used itself, from what its stream ``reported`` and the usage
        recorded for the session it ``resumed`` (a CLI may report the conversation's totals)."""
        ...

    def resume_unknown(self, outcome: StreamOutcome, stderr_tail: str) -> bool:
        """True when a native resume failed because the CLI no longer knows the session
        (Claude: "No conversation found"; Codex: "no rollout found")."""
        ...

    def provider_endpoints(self, env: Mapping[str, str]) -> tuple[HostPattern, ...]:
        """Where the CLI, started with ``env`` (what ``environment`` gave), reaches its model
        provider: the provider's own hosts and the base URL the operator configured. The egress
        proxy lets a sealed session reach these (adr/0023)."""
        ...

    def private_home(
        self, base: Mapping[str, str], home: Path, *, login: bool = True
    ) -> dict[str, str]:
        """Make ``home`` the CLI's home for the sessions of one Run: copy in the CLI's own
        configuration and, when ``login``, its login files from where ``base`` says they live
        (never its transcripts or history, and never over a file already there, so a Resume
        finds its session), and return the variables that point the CLI at it (``HOME`` and the
        CLI's own). Without ``login`` no credential enters the home (the model gateway holds
        the key)."""
        ...

    def behind_gateway(self, env: Mapping[str, str]) -> GatewayPlan:
        """How the CLI, started with ``env`` (what ``environment`` gave), runs with its model
        key outside the sandbox: its base URLs pointed at the model gateway, a stand-in key in
        place of each real one, and the routes the gateway serves (adr/0038).
        ``ModelKeyInside`` when its credential is one the CLI must read itself (a login file),
        naming the fix."""
        ...
