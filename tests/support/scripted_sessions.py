"""Scripted sessions for the orchestration tests: a ``SessionSource`` whose sessions are
Python functions that edit the Worktree with real git, under the real Resume rules
(``thirdshift.sessions.Sessions``), recorded in the real store like a Harness CLI's.

A play gets the Worktree and the prompt; it may write files, commit, write the Pull request
file, or raise (``SessionFailed``, ``SessionInterrupted``) as a failing CLI would.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from thirdshift.issue_url import IssueRef, RunRef
from thirdshift.records import SessionEvent
from thirdshift.runs.ports import SessionSource
from thirdshift.sessions import SessionEnding, SessionFailed, Sessions
from thirdshift.sessions.rules import ProviderUnavailable
from thirdshift.store import Store

Play = Callable[[Path, str], str | None]
"""(worktree, prompt) -> the session's final message."""


def git(cwd: Path, *args: str) -> str:
    """Plain git, as an agent would run it."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(cwd),
            "GIT_AUTHOR_NAME": "agent",
            "GIT_AUTHOR_EMAIL": "agent@example.test",
            "GIT_COMMITTER_NAME": "agent",
            "GIT_COMMITTER_EMAIL": "agent@example.test",
        },
    )
    return done.stdout.strip()


def commit_file(name: str, text: str, message: str, *, pull_request: str | None = None) -> Play:
    """A session that writes ``name`` and commits it, and (optionally) the Pull request file."""

    def play(worktree: Path, prompt: str) -> str:
        (worktree / name).write_text(text)
        git(worktree, "add", name)
        git(worktree, "commit", "-q", "-m", message)
        if pull_request is not None:
            (worktree / ".thirdshift-pull-request.md").write_text(pull_request)
        return f"committed {name}"

    return play


@dataclass
class _ScriptedOutside:
    store: Store
    run_id: int
    worktree: Path
    plays: dict[str, Play]
    prompts: dict[str, str]
    lines: list[str]
    killed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    harness: str = "scripted"

    def run_session(
        self, kind: str, resume_id: str | None, prompt: str, log_path: Path
    ) -> SessionEnding:
        self.prompts[kind] = prompt
        record = self.store.start_session(
            self.run_id, kind, harness="scripted", model=None, log_path=str(log_path), prompt=prompt
        )
        log_path.parent.mkdir(parents=True, exist_ok=True)
        play = self.plays.get(kind)
        if play is None:
            raise AssertionError(f"the scenario has no session {kind!r}")
        with log_path.open("a") as log:
            log.write(json.dumps({"type": "scripted", "kind": kind}) + "\n")
            try:
                message = play(self.worktree, prompt)
            except ProviderUnavailable as refused:  # its kind matters to what follows
                log.write(json.dumps({"type": "failed", "cause": refused.cause}) + "\n")
                self.store.end_session(record.id, state="failed", error=refused.cause)
                raise
            except SessionFailed as failure:
                log.write(json.dumps({"type": "failed", "cause": failure.cause}) + "\n")
                # As a Harness's reader would: the failure is the Session's last event.
                self.store.add_session_events(
                    record.id, [SessionEvent(seq=1, kind="error", summary=failure.cause)]
                )
                self.store.end_session(record.id, state="failed", error=failure.cause)
                raise SessionFailed(failure.cause, log_path) from failure
            log.write(json.dumps({"type": "result", "message": message}) + "\n")
        self.store.end_session(record.id, state="ended", final_message=message)
        return SessionEnding(
            session_id=f"scripted-{record.id}",
            killed_work=self.killed.get(kind, ()),
            final_message=message,
        )

    def progress(self, line: str) -> None:
        self.lines.append(line)


@dataclass
class ScriptedSessions:
    """Sessions by kind: ``plays["implement"]``, ``plays["repair-1"]``, ..."""

    logs_dir: Path
    store: Store
    plays: dict[str, Play] = field(default_factory=dict)
    prompts: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    harness_name: str = "scripted"
    executable: str = Path(sys.executable).name
    model: str | None = None

    killed: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """The background work a session of each kind ends with killed (none unless named)."""

    busy: tuple[int, ...] = ()
    """What ``still_working_in`` answers: pids a test pretends outlived an earlier Run."""

    key_inside: str | None = None
    """What ``key_problem`` answers: why the model key could not stay outside the sandbox."""

    def key_problem(self) -> str | None:
        return self.key_inside

    def still_working_in(self, worktree: Path) -> tuple[int, ...]:
        return self.busy

    def turn_ended(self, harness: str, log_path: Path) -> bool:
        try:
            lines = log_path.read_text().splitlines()
        except OSError:
            return False
        return any(json.loads(line).get("type") == "result" for line in lines if line)

    def sessions(self, run_id: int, worktree: Path, ref: RunRef) -> Sessions:
        outside = _ScriptedOutside(
            self.store, run_id, worktree, self.plays, self.prompts, self.lines, self.killed
        )

        subject = f"issue-{ref.number}" if isinstance(ref, IssueRef) else "architect"

        def log_path_for(kind: str) -> Path:
            return self.logs_dir / f"{ref.owner}-{ref.repo}-{subject}-{kind}.jsonl"

        return Sessions(outside, log_path_for)


def _conforms(source: ScriptedSessions) -> SessionSource:
    """mypy holds the scripted source to the seam it stands in for."""
    return source
