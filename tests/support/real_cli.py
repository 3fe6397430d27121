"""Drive the REAL pinned ``claude``, ``codex`` and ``qwen`` CLIs against a scripted model server.

The binaries come from ``node_modules/.bin`` at the repository root (``scripts/install`` puts
them there). A missing binary fails the test instead of skipping it: CI must run these tests.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from thirdshift.harnesses.qwen import QwenHarness
from thirdshift.sandbox.model.server import (
    ScriptedModelServer,
    claude_env,
    codex_config_args,
    codex_env,
    qwen_env,
)

Harness = Literal["claude", "codex", "opencode", "qwen"]

REPO_ROOT = Path(__file__).resolve().parents[2]
BIN_DIR = REPO_ROOT / "node_modules" / ".bin"

# Variables of the developer's own setup that must not leak into a CLI under test. GIT_* stays:
# the suite's conftest isolates git (no global config, a fixed identity) through it.
_LEAKY_PREFIXES = ("ANTHROPIC_", "CLAUDE", "OPENAI_", "CODEX_", "XDG_")


@dataclass
class CliResult:
    """What one real CLI session produced."""

    returncode: int
    stdout_lines: list[str]
    stderr: str
    events: list[dict[str, Any]]
    elapsed_s: float = 0.0
    argv: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """Everything worth printing when an assertion about this run fails."""
        return (
            f"argv: {self.argv}\nexit {self.returncode} after {self.elapsed_s:.2f}s\n"
            "--- stdout\n" + "\n".join(self.stdout_lines) + f"\n--- stderr\n{self.stderr}"
        )


def cli_path(harness: Harness) -> Path:
    """The pinned binary; fails the test with the fix when it is not installed."""
    path = BIN_DIR / harness
    if not path.exists():
        pytest.fail(
            f"{path.relative_to(REPO_ROOT)} is missing: run `scripts/install` in the repository "
            "root to install the pinned agent CLIs (claude, codex, opencode, qwen)",
            pytrace=False,
        )
    return path


@contextmanager
def argv_logging(*names: Harness) -> Iterator[Path]:
    """A directory to put first on PATH holding, for each of ``names``, a wrapper that writes
    its argv (NUL-separated) into its HOME (the agent home, writable inside the Agent sandbox),
    then runs the pinned CLI. It lives inside the repository's ``node_modules``, so the Agent
    sandbox, which keeps a CLI's ``node_modules`` readable, shows the agent the pinned CLI too,
    wherever the checkout is (under /tmp the sandbox hides everything else)."""
    directory = BIN_DIR.parent / f".argv-logging-{uuid.uuid4().hex[:8]}"
    directory.mkdir()
    for name in names:
        wrapper = directory / name
        wrapper.write_text(
            f'#!/bin/sh\nprintf \'%s\\0\' "$@" > "$HOME/{name}-argv-$$"\n'
            f'exec "{BIN_DIR / name}" "$@"\n'
        )
        wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    try:
        yield directory
    finally:
        shutil.rmtree(directory)


def logged_argvs(home: Path, name: Harness) -> list[list[str]]:
    """The argv of each ``name`` process the wrappers of ``argv_logging`` saw under a
    thirdshift ``home`` (its agent homes), but ``--version`` (asked for the ledger, no
    session)."""
    found = sorted((home / "agent-homes").glob(f"*/{name}-argv-*"))
    argvs = [path.read_bytes().decode().split("\0")[:-1] for path in found]
    return [argv for argv in argvs if argv != ["--version"]]


def make_git_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A git repository at ``path`` on branch main with one commit and a local identity."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "Sandbox Tester")
    git(path, "config", "user.email", "tester@sandbox.invalid")
    git(path, "config", "commit.gpgsign", "false")
    for name, text in (files or {"README.md": "# Widgets\n\nA small project.\n"}).items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "Initial commit")
    return path


def git(repo: Path, *args: str) -> str:
    """Run git in ``repo`` and return its stdout; a failure fails loudly."""
    done = subprocess.run(
        ["git", *args], cwd=repo, capture_output=True, text=True, check=False, env=_base_env()
    )
    if done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {repo}: {done.stderr}")
    return done.stdout


def cli_argv(
    harness: Harness, prompt: str, server_url: str, resume_id: str | None = None
) -> list[str]:
    """The headless argv of a real session (stream output, no approvals)."""
    binary = str(cli_path(harness))
    if harness == "claude":
        argv = [
            binary,
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]
        return [*argv, "--resume", resume_id] if resume_id else argv
    if harness == "qwen":
        argv = [binary, prompt, "--output-format", "stream-json", "--approval-mode", "yolo"]
        argv += ["--auth-type", "anthropic"]
        return [*argv, "--resume", resume_id] if resume_id else argv
    argv = [
        binary,
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        *codex_config_args(server_url),
    ]
    return [*argv, "resume", resume_id, prompt] if resume_id else [*argv, prompt]


def cli_env(harness: Harness, server_url: str, home: Path) -> dict[str, str]:
    """A clean environment for one CLI: its own HOME (and CODEX_HOME), the server, no leaks."""
    home.mkdir(parents=True, exist_ok=True)
    env = _base_env()
    env["HOME"] = str(home)
    if harness == "claude":
        env.update(claude_env(server_url, home))
    elif harness == "qwen":
        env.update(qwen_env(server_url, home))
        # The settings thirdshift's adapter writes (no memory extraction: no extra request).
        env.update(QwenHarness().private_home(env, home))
        env["QWEN_CODE_NO_RELAUNCH"] = "true"  # one node process, as thirdshift's adapter asks
    else:
        codex_home = home / ".codex"
        codex_home.mkdir(exist_ok=True)
        env.update(codex_env(codex_home))
    return env


def run_cli(
    harness: Harness,
    prompt: str,
    workdir: Path,
    server: ScriptedModelServer,
    home: Path,
    resume_id: str | None = None,
    timeout: float = 60,
) -> CliResult:
    """Run one real headless session in ``workdir`` and return its stream.

    stdin is /dev/null; the CLI runs in its own process group, which is killed (and the test
    failed) when ``timeout`` passes.
    """
    argv = cli_argv(harness, prompt, server.url, resume_id)
    started = time.monotonic()
    with subprocess.Popen(
        argv,
        cwd=workdir,
        env=cli_env(harness, server.url, home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            partial = CliResult(proc.returncode, stdout.splitlines(), stderr, [], argv=argv)
            pytest.fail(f"{harness} did not finish within {timeout}s\n{partial.describe()}")
    lines = [line for line in stdout.splitlines() if line.strip()]
    events: list[dict[str, Any]] = []
    for line in lines:
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return CliResult(
        returncode=proc.returncode,
        stdout_lines=lines,
        stderr=stderr,
        events=events,
        elapsed_s=time.monotonic() - started,
        argv=argv,
    )


def session_id(harness: Harness, result: CliResult) -> str:
    """The session (claude) or thread (codex) id the stream announces."""
    for event in result.events:
        claude_like = harness in ("claude", "qwen")
        if claude_like and event.get("type") == "system" and event.get("subtype") == "init":
            return str(event["session_id"])
        if harness == "codex" and event.get("type") == "thread.started":
            return str(event["thread_id"])
    raise AssertionError(f"no session id in the stream\n{result.describe()}")


def final_text(harness: Harness, result: CliResult) -> str | None:
    """The last ``result`` text (claude) or the last agent message (codex)."""
    text: str | None = None
    for event in result.events:
        if harness in ("claude", "qwen") and event.get("type") == "result":
            text = event.get("result")
        item = event.get("item")
        if (
            harness == "codex"
            and event.get("type") == "item.completed"
            and isinstance(item, dict)
            and item.get("type") == "agent_message"
        ):
            text = item.get("text")
    return text


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_LEAKY_PREFIXES)}
    env.setdefault("GIT_CONFIG_NOSYSTEM", "1")
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env
