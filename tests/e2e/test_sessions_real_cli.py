"""The Sessions module end to end: the REAL claude, codex and qwen CLIs, the real process
supervisor, the real store, against the scripted model server."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support.real_cli import Harness, cli_path, make_git_repo
from thirdshift.clock import SystemClock
from thirdshift.harnesses import SealedPaths, harness_named, install_dirs, probe
from thirdshift.records import Watchdogs
from thirdshift.sandbox.model.server import (
    ModelScript,
    ScriptedModelServer,
    claude_env,
    codex_config_args,
    codex_env,
    qwen_env,
)
from thirdshift.scrub import Scrubber
from thirdshift.sessions import SessionEnding, SessionInterrupted, Sessions
from thirdshift.sessions.cli_outside import CliOutside
from thirdshift.sessions.cli_parts import SessionBounds, SessionParts
from thirdshift.sessions.cli_sessions import log_stamp, session_log_paths
from thirdshift.sessions.preamble import count_tokens
from thirdshift.sessions.sealed_space import SealedSpace
from thirdshift.store import Store

pytestmark = pytest.mark.real_cli

MARKER = "ISSUE-42-MARKER"
PROMPT = f"Implement issue #42 ({MARKER}): make the suite pass."


@dataclass
class World:
    """One Run's worth of real parts: a worktree, a store, a model server and a Harness."""

    harness_name: Harness
    tmp: Path
    server: ScriptedModelServer
    store: Store
    run_id: int
    worktree: Path
    environ: dict[str, str]
    lines: list[str] = field(default_factory=list)
    interrupt: threading.Event = field(default_factory=threading.Event)

    @property
    def agent_home(self) -> Path:
        """The Harness's home (HOME, and CODEX_HOME inside it), kept across a Resume."""
        return self.tmp / "agent-home"

    def outside(self, *, post_result: float = 2.0, idle: float = 60.0) -> CliOutside:
        extra = codex_config_args(self.server.url) if self.harness_name == "codex" else []
        harness = harness_named(
            self.harness_name, executable=str(cli_path(self.harness_name)), extra_args=extra
        )
        return CliOutside(
            harness,
            run_id=self.run_id,
            parts=SessionParts(
                store=self.store,
                environ=self.environ,
                scrub=Scrubber(["planted-secret-value-123"]),
                clock=SystemClock(self.interrupt),
                progress=self.lines.append,
                interrupt=self.interrupt,
            ),
            bounds=SessionBounds(
                watchdogs=Watchdogs(
                    idle_seconds=idle, wall_seconds=120, post_result_seconds=post_result
                ),
                grace_seconds=3,
            ),
            space=SealedSpace(
                probe(self.environ.get("PATH")),
                SealedPaths(
                    worktree=self.worktree,
                    clone=self.worktree,
                    agent_home=self.agent_home,
                    hidden=(self.tmp / "thirdshift-home",),
                    readable=install_dirs(str(cli_path(self.harness_name)), None),
                ),
            ),
        )

    def sessions(self, outside: Any) -> Sessions:
        logs = self.tmp / "logs"
        return Sessions(
            outside, session_log_paths(logs, "acme", "widgets", 42, log_stamp(SystemClock().now()))
        )

    def conversation_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.server.requests() if r.get("kind") not in ("probe", "models")]


def start_world(tmp_path: Path, harness: Harness, turns: list[dict[str, Any]]) -> World:
    script = ModelScript.from_dict(
        {"sessions": [{"name": "delivery", "marker": MARKER, "turns": turns}]}
    )
    server = ScriptedModelServer(script, tmp_path / "requests.jsonl")
    server.start()
    store = Store.open(f"sqlite:///{tmp_path / 'thirdshift.db'}")
    repository = store.ensure_repository("acme", "widgets")
    run = store.start_run(repository, 42, harness=harness)
    home = tmp_path / "agent-home"
    home.mkdir()
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC", "CLAUDE", "CODEX", "OPENAI"))
    }
    environ["HOME"] = str(home)
    environ["GITHUB_TOKEN"] = "planted-secret-value-123"
    if harness == "claude":
        environ.update(claude_env(server.url, home))
    elif harness == "qwen":
        environ.update(qwen_env(server.url, home))
    else:
        (home / ".codex").mkdir()
        environ.update(codex_env(home / ".codex"))
    worktree = make_git_repo(tmp_path / "worktree")
    return World(harness, tmp_path, server, store, run.id, worktree, environ)


@pytest.fixture
def worlds() -> Iterator[list[World]]:
    made: list[World] = []
    yield made
    for world in made:
        world.server.stop()
        world.store.close()


SLEEPS = {"claude": "sleep 317", "codex": "sleep 318", "qwen": "sleep 319"}
"""The slow work each Harness's session starts: a command of its own, so a test that looks for
what is left of its session on this machine never sees another's, running beside it."""


def background_then_foreground(harness: Harness, sleep: str = "") -> list[dict[str, Any]]:
    """Start slow work (``sleep``, by default the Harness's own) in the background and end the
    turn; after the Resume, run it in the foreground and finish."""
    sleep = sleep or SLEEPS[harness]
    if harness == "claude":
        start = {
            "name": "Bash",
            "input": {
                "command": sleep,
                "run_in_background": True,
                "description": "slow test suite",
            },
        }
        again = {"name": "Bash", "input": {"command": "echo suite passed", "description": "suite"}}
    elif harness == "qwen":
        start = {
            "name": "run_shell_command",
            "input": {"command": sleep, "is_background": True},
        }
        again = {"name": "run_shell_command", "input": {"command": "echo suite passed"}}
    else:
        start = {"name": "exec_command", "input": {"cmd": sleep, "yield_time_ms": 300}}
        again = {"name": "exec_command", "input": {"cmd": "echo suite passed"}}
    return [
        {"tool_calls": [start]},
        {"text": "The suite is running in the background."},
        {"tool_calls": [again]},
        {"text": "The suite passed; done."},
    ]


def killed_work_name(harness: Harness) -> str:
    return "slow test suite" if harness == "claude" else SLEEPS[harness]


@pytest.mark.parametrize("harness", ["claude", "codex", "qwen"])
def test_killed_background_work_gets_exactly_one_native_resume(
    tmp_path: Path, worlds: list[World], harness: Harness
) -> None:
    """The session's background work is killed as it ends; one native Resume (a continued
    conversation) re-runs it in the foreground and its final message is returned."""
    world = start_world(tmp_path, harness, background_then_foreground(harness))
    worlds.append(world)
    sessions = world.sessions(world.outside())

    ending = sessions.run("implement", PROMPT)

    assert ending.final_message == "The suite passed; done."
    assert ending.killed_work == ()
    rows = world.store.run_sessions(world.run_id)
    assert [(row.kind, row.state) for row in rows] == [
        ("implement", "ended"),
        ("implement-resume", "ended"),
    ]
    assert rows[0].killed_work == killed_work_name(harness)
    assert rows[1].harness_session_id == rows[0].harness_session_id
    assert rows[1].resumed_from_id == rows[0].id
    assert any(
        line.startswith("implement: the session ended with background work killed")
        and line.endswith("resuming it once")
        for line in world.lines
    ), world.lines
    assert sessions.last_log is not None
    assert sessions.last_log.name.endswith("-implement-resume.jsonl")
    assert sessions.last_log.exists()

    requests = world.conversation_requests()
    resumed = requests[2]["body"]  # the first request of the Resume
    key = "input" if harness == "codex" else "messages"  # Responses, or Anthropic Messages
    history = resumed[key]
    opening = requests[0]["body"][key]
    assert len(history) > len(opening), "the Resume did not continue the conversation"
    assert len(requests) == 4
    assert not _running(SLEEPS[harness], exact=True)

    events = world.store.session_events(rows[0].id)
    assert any(event.kind == "tool_call" for event in events)
    for row in rows:
        assert "planted-secret-value-123" not in row.prompt


@pytest.mark.parametrize("harness", ["claude", "codex", "qwen"])
def test_a_resume_the_harness_no_longer_knows_opens_a_fresh_session_with_the_brief(
    tmp_path: Path, worlds: list[World], harness: Harness
) -> None:
    """With the CLI's own transcript gone, the Resume fails as unknown and a fresh session opens
    with the original prompt and what the first session did, built from our database. The
    issue is 30 KB (the reported case: such a prompt once crowded every step out of the brief);
    the preamble after it keeps its 4,000-token budget and lists the steps."""
    sleep = f"sleep {327 + list(SLEEPS).index(harness)}"
    world = start_world(tmp_path, harness, background_then_foreground(harness, sleep))
    worlds.append(world)
    forgetful = ForgetfulOutside(world.outside(), Path(world.environ["HOME"]))
    sessions = world.sessions(forgetful)
    prompt = (
        PROMPT
        + "\n\n"
        + "\n".join(f"Requirement {i}: the widget must " + "hold " * 12 for i in range(420))
    )
    assert len(prompt.encode()) > 30_000

    ending = sessions.run("implement", prompt)

    assert ending.final_message == "The suite passed; done."
    rows = world.store.run_sessions(world.run_id)
    assert [(row.kind, row.state) for row in rows] == [
        ("implement", "ended"),
        ("implement-resume", "failed"),
        ("implement-resume", "ended"),
    ]
    assert rows[1].harness_session_id == rows[0].harness_session_id
    assert rows[2].harness_session_id != rows[0].harness_session_id  # a fresh session
    assert rows[2].prompt.startswith(PROMPT)
    preamble = rows[2].prompt.split("\n---\n", 1)[1]
    assert count_tokens(preamble) <= 4000
    assert "What it did, oldest first:" in preamble
    assert sleep in preamble  # the first session's step, from our database
    # The model saw it: the fresh session's first request holds the preamble and the step.
    sent = [json.dumps(r["body"]) for r in world.conversation_requests()]
    fresh = [body for body in sent if "This session continues an earlier one" in body]
    assert fresh, "no request carried the resume brief"
    assert sleep in fresh[0].split("What it did, oldest first:", 1)[1]
    assert any("no longer has session" in line for line in world.lines), world.lines


@pytest.mark.parametrize("harness", ["claude", "qwen"])
def test_interrupting_a_session_leaves_no_process_of_its_tree(
    tmp_path: Path, worlds: list[World], harness: Harness
) -> None:
    """Ctrl-C during a session stops the CLI and the command it was running."""
    # Claude Code blocks a standalone foreground `sleep`; a slow program is what a suite is.
    # Seconds of its own per Harness: the variants run side by side, each looks for its own.
    waited = f"time.sleep({331 + list(SLEEPS).index(harness)})"
    slow = f"python3 -c 'import time; {waited}'"
    tool = "Bash" if harness == "claude" else "run_shell_command"
    turns = [{"tool_calls": [{"name": tool, "input": {"command": slow, "description": "wait"}}]}]
    world = start_world(tmp_path, harness, turns)
    worlds.append(world)
    sessions = world.sessions(world.outside())
    seen: list[bool] = []
    timer = threading.Timer(0.2, _interrupt_when_running, args=(world.interrupt, waited, seen))
    timer.start()
    try:
        with pytest.raises(SessionInterrupted, match="implement session interrupted"):
            sessions.run("implement", PROMPT)
    finally:
        timer.cancel()
    assert seen == [True], "the slow command never started, so the interrupt proved nothing"
    assert not _running(waited)
    assert [row.state for row in world.store.run_sessions(world.run_id)] == ["failed"]


class ForgetfulOutside:
    """Delegates to the real adapter, but wipes the CLI's own transcripts before a Resume, as
    when the Run continues on another machine."""

    def __init__(self, inner: CliOutside, home: Path) -> None:
        self._inner = inner
        self._home = home

    @property
    def harness(self) -> str:
        return self._inner.harness

    def run_session(
        self, kind: str, resume_id: str | None, prompt: str, log_path: Path
    ) -> SessionEnding:
        if resume_id:
            shutil.rmtree(self._home / ".claude" / "projects", ignore_errors=True)
            shutil.rmtree(self._home / ".codex" / "sessions", ignore_errors=True)
            shutil.rmtree(self._home / ".qwen" / "projects", ignore_errors=True)
        return self._inner.run_session(kind, resume_id, prompt, log_path)

    def progress(self, line: str) -> None:
        self._inner.progress(line)


def _running(command: str, *, exact: bool = False) -> bool:
    """Is any live process on the machine running ``command`` (or a command line containing
    it)? Zombies awaiting their reaper count as gone."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        if cmdline == command or (not exact and command in cmdline):
            return True
    return False


def _interrupt_when_running(interrupt: threading.Event, command: str, seen: list[bool]) -> None:
    deadline = time.monotonic() + 60
    while not _running(command) and time.monotonic() < deadline:
        time.sleep(0.1)
    seen.append(_running(command))
    interrupt.set()
