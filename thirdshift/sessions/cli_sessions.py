"""Where a Run gets its Sessions for real (``runs.ports.SessionSource``): ``CliSessions`` builds,
for each Run, a ``CliOutside`` for its Harness and for each Harness a provider outage switches
to, each in the Run's sealed space, and names the Run's Session logs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from thirdshift.harnesses import Harness, working_in
from thirdshift.harnesses.model_gateway import ModelKeyInside
from thirdshift.issue_url import IssueRef, RunRef
from thirdshift.sessions.cli_outside import CliOutside
from thirdshift.sessions.cli_parts import SessionBounds, SessionParts
from thirdshift.sessions.preamble import RESUME_CAP_TOKENS
from thirdshift.sessions.rules import Sessions
from thirdshift.sessions.sealed_space import AgentSeal


def log_stamp(moment: datetime) -> str:
    """The stamp shared by every Session log of one Run: UTC, to the second."""
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def session_log_paths(
    logs_dir: Path, owner: str, repo: str, issue_number: int | None, stamp: str
) -> Callable[[str], Path]:
    """``kind -> $THIRDSHIFT_HOME/logs/<owner>-<repo>-issue-<n>-<stamp>-<kind>.jsonl``, or
    ``<owner>-<repo>-architect-<stamp>-<kind>.jsonl`` for an Architect run (no issue)."""
    subject = "architect" if issue_number is None else f"issue-{issue_number}"

    def path_for(kind: str) -> Path:
        return logs_dir / f"{owner}-{repo}-{subject}-{stamp}-{kind}.jsonl"

    return path_for


@dataclass(frozen=True)
class Fallback:
    """A Harness a Run may switch to on a provider outage, with its own Model (never the
    Model of the Harness it switches from)."""

    harness: Harness
    model: str | None = None


@dataclass(frozen=True)
class HarnessChoice:
    """The Harness a Run's sessions run, with its Model; the Harnesses to switch to on a
    provider outage, in order (adr/0014); and the longest announced provider reset a session
    waits for before switching."""

    harness: Harness
    model: str | None = None
    fallbacks: tuple[Fallback, ...] = ()
    provider_wait_seconds: float = 0.0

    @property
    def every(self) -> tuple[Harness, ...]:
        """The Harness, then its fallbacks."""
        return (self.harness, *(fallback.harness for fallback in self.fallbacks))


@dataclass(frozen=True)
class CliSessions:
    """Sessions of a Harness CLI in the Run's Worktree, sealed by ``seal``, recorded in the
    store, their logs under ``logs_dir``. Built by the composition root."""

    harnesses: HarnessChoice
    parts: SessionParts
    bounds: SessionBounds
    seal: AgentSeal
    logs_dir: Path
    resume_cap_tokens: int = RESUME_CAP_TOKENS

    @property
    def harness_name(self) -> str:
        return self.harnesses.harness.name

    @property
    def executable(self) -> str:
        return self.harnesses.harness.executable

    @property
    def model(self) -> str | None:
        return self.harnesses.model

    def still_working_in(self, worktree: Path) -> tuple[int, ...]:
        return tuple(working_in(worktree))

    def key_problem(self) -> str | None:
        # The fallbacks too: a switch in the middle of a Run must not be where it fails.
        sandbox = self.seal.sandbox
        if not sandbox.network_sealed or sandbox.agent_may_hold_key:
            return None
        for harness in self.harnesses.every:
            try:
                harness.behind_gateway(harness.environment(self.parts.environ))
            except ModelKeyInside as error:
                role = "" if harness is self.harnesses.harness else "fallback "
                return self.parts.scrub(
                    f"the {role}{harness.name} Harness cannot start with its model key outside "
                    f"the sandbox: {error}"
                )
        return None

    def turn_ended(self, harness: str, log_path: Path) -> bool:
        # The Session log read again by the Harness's own reader, as the session read it live.
        found = next((h for h in self.harnesses.every if h.name == harness), None)
        if found is None:
            return False
        reader = found.reader(scrub=self.parts.scrub)
        try:
            with log_path.open("rb") as log:
                for line in log:
                    reader.feed(line.rstrip(b"\n"))
                    if reader.result_seen:
                        return True
        except OSError:
            return False
        return False

    def sessions(self, run_id: int, worktree: Path, ref: RunRef) -> Sessions:
        space = self.seal.space(run_id, worktree, ref)

        def outside(harness: Harness, model: str | None) -> CliOutside:
            return CliOutside(
                harness,
                run_id=run_id,
                parts=self.parts,
                bounds=self.bounds,
                space=space.for_cli(harness.executable, self.parts.environ.get("PATH")),
                model=model,
                repository=f"{ref.owner}/{ref.repo}",
            )

        stamp = log_stamp(self.parts.clock.now())
        choice = self.harnesses
        return Sessions(
            outside(choice.harness, choice.model),
            session_log_paths(
                self.logs_dir,
                ref.owner,
                ref.repo,
                ref.number if isinstance(ref, IssueRef) else None,
                stamp,
            ),
            resume_cap_tokens=self.resume_cap_tokens,
            fallbacks=[outside(f.harness, f.model) for f in choice.fallbacks],
            provider_wait_seconds=choice.provider_wait_seconds,
            clock=self.parts.clock,
        )
