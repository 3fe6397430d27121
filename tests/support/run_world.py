"""A whole Run's world for end-to-end tests: the GitHub stand-in with a repository, its CI and a
maintainer, the scripted model server, and the `thirdshift` command run as a subprocess with
the real claude CLI on its PATH."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.git_client import git_as
from tests.support.real_cli import BIN_DIR, cli_path
from tests.support.warm_start import Started, start_thirdshift
from thirdshift.sandbox.client import SandboxClient
from thirdshift.sandbox.github import GitHubStandIn
from thirdshift.sandbox.model.server import ModelScript, ScriptedModelServer, claude_env

OWNER = "acme"
NAME = "calculator"
TOKEN = "sandbox_maintainer_token_0123456789"
CHECK = "unit tests"
CHECK_COMMAND = "python3 -m unittest -v"
# How long a test waits for an agent's command to start: a real CLI starting beside five other
# tests on two cores has taken over a minute. Only a failing test waits this long.
WAIT_SECONDS = float(os.environ.get("THIRDSHIFT_TEST_WAIT_SECONDS", "180"))
SHELLS = frozenset({"sh", "bash", "dash", "zsh"})

CALC_BROKEN = '"""Arithmetic."""\n\n\ndef add(a: int, b: int) -> int:\n    return a - b\n'
CALC_FIXED = '"""Arithmetic."""\n\n\ndef add(a: int, b: int) -> int:\n    return a + b\n'
TEST_CALC = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class AddTest(unittest.TestCase):\n"
    "    def test_adds_two_numbers(self) -> None:\n"
    "        self.assertEqual(add(2, 3), 5)\n"
)
PROJECT = {"README.md": "# calculator\n", "calc.py": CALC_BROKEN, "test_calc.py": TEST_CALC}


def bash(command: str, description: str = "run a command") -> dict[str, Any]:
    return {"name": "Bash", "input": {"command": command, "description": description}}


def write_file_command(path: str, text: str) -> str:
    """A shell command writing ``text`` to ``path`` exactly (no quoting surprises)."""
    return f"printf '%s' {_shell_quote(text)} > {path}"


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def pull_request_file(title: str, body: str) -> str:
    return write_file_command(".thirdshift-pull-request.md", f"{title}\n\n{body}\n")


@dataclass
class RunWorld:
    tmp: Path
    stand_in: GitHubStandIn
    model: ScriptedModelServer
    client: SandboxClient
    home: Path
    agent_home: Path
    issue_number: int = 0
    settings: dict[str, str] = field(default_factory=dict)
    processes: list[Started] = field(default_factory=list)
    python: str = sys.executable
    """The interpreter ``thirdshift`` runs with (``python_without_clis`` for an install that
    lacks the agent CLIs)."""

    @property
    def api_url(self) -> str:
        return self.stand_in.api_url

    @property
    def remote_url(self) -> str:
        return f"{self.stand_in.web_url}/{OWNER}/{NAME}.git"

    def restart_model(self, script: ModelScript) -> None:
        """Play ``script`` from now on (for sessions that need the world's paths)."""
        self.model.stop()
        self.model = ScriptedModelServer(script, self.tmp / "model.jsonl")
        self.model.start()

    @property
    def issue_url(self) -> str:
        return f"{self.stand_in.web_url}/{OWNER}/{NAME}/issues/{self.issue_number}"

    def env(self) -> dict[str, str]:
        base = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("THIRDSHIFT_", "ANTHROPIC", "CLAUDE", "CODEX", "OPENAI"))
        }
        base.update(claude_env(self.model.url, self.agent_home))
        base["PATH"] = (
            f"{BIN_DIR}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{base['PATH']}"
        )
        base["THIRDSHIFT_HOME"] = str(self.home)
        base["THIRDSHIFT_GITHUB_API_URL"] = self.api_url
        base["GITHUB_TOKEN"] = TOKEN
        # The simulated CI registers a push's checks before the push returns, so no check
        # comes late; each green CI would still wait out the whole grace.
        base["THIRDSHIFT_CI_GRACE_SECONDS"] = "0.5"
        base["THIRDSHIFT_CI_POLL_SECONDS"] = "0.2"
        base["THIRDSHIFT_SESSION_POST_RESULT_SECONDS"] = "5"
        base["THIRDSHIFT_SESSION_STOP_GRACE_SECONDS"] = "3"
        base.update(self.settings)
        return base

    def start_thirdshift(self, *args: str, new_group: bool = False) -> Started:
        """``thirdshift args`` in the background; ``new_group`` gives it a process group of its
        own, as a shell gives a foreground job (for Ctrl-C to the whole group)."""
        process = start_thirdshift(
            args, env=self.env(), cwd=self.tmp, python=self.python, new_group=new_group
        )
        self.processes.append(process)
        return process

    def thirdshift(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
        process = self.start_thirdshift(*args)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            stdout, stderr = process.communicate()
            raise AssertionError(f"thirdshift did not finish in {timeout}s\n{stderr}") from None
        return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)

    def rest(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = json.dumps(payload).encode() if payload is not None else None
        request = urllib.request.Request(
            self.api_url + path,
            data=data,
            method=method,
            headers={"Authorization": f"token {TOKEN}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = response.read()
        return json.loads(body) if body else None

    def issue(self) -> Any:
        return self.rest("GET", f"/repos/{OWNER}/{NAME}/issues/{self.issue_number}")

    def pulls(self, state: str = "all") -> list[Any]:
        return list(self.rest("GET", f"/repos/{OWNER}/{NAME}/pulls?state={state}"))

    def check_runs(self, sha: str) -> list[Any]:
        return list(
            self.rest("GET", f"/repos/{OWNER}/{NAME}/commits/{sha}/check-runs")["check_runs"]
        )

    def comments(self) -> list[Any]:
        return list(self.rest("GET", f"/repos/{OWNER}/{NAME}/issues/{self.issue_number}/comments"))

    def git(self, *args: str, cwd: Path | None = None) -> str:
        """git against the stand-in as the maintainer."""
        return git_as(TOKEN, *args, cwd=cwd or self.tmp, login="maintainer").stdout.strip()

    def clone(self, into: str = "inspect") -> Path:
        target = self.tmp / into
        if not target.exists():
            self.git("clone", "-q", f"{self.stand_in.web_url}/{OWNER}/{NAME}.git", str(target))
        else:
            self.git("fetch", "-q", "origin", cwd=target)
        return target

    def wait_for_process(self, needle: str, timeout: float = WAIT_SECONDS) -> None:
        """Until a process of this world runs ``needle``: another test's, running beside it
        with the same command, does not count, nor does the shell that will start it (the
        shell's command line names it before the commands ahead of it have run)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if running(needle, within=self.tmp, shells=False):
                return
            time.sleep(0.1)
        raise AssertionError(f"no process running {needle!r} within {timeout}s")

    def model_requests(self, session: str) -> list[dict[str, Any]]:
        return [r for r in self.model.requests() if r.get("session") == session]


def python_without_clis(tmp: Path) -> str:
    """The interpreter of a virtual environment under ``tmp`` that holds thirdshift's packages
    but has no ``node_modules`` beside it: an install whose agent CLIs are missing (thirdshift
    looks beside its own virtual environment before PATH, so the suite's would be found)."""
    venv = tmp / "bare-install" / ".venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
        own = sysconfig.get_path("purelib")
        target = Path(sysconfig.get_path("purelib", vars={"base": str(venv)}))
        # Its site-packages' .pth files (thirdshift's editable install among them) run too.
        (target / "thirdshift-tests.pth").write_text(f"import site; site.addsitedir({own!r})\n")
    return str(venv / "bin" / "python")


def running(needle: str, *, within: Path | None = None, shells: bool = True) -> bool:
    """Is a live process running a command line containing ``needle``? With ``within``, only
    one started with a path under that directory in its environment (thirdshift gives its
    agents their HOME there): a CLI of another test, running in parallel, is not this one's.
    With ``shells=False``, a shell whose ``-c`` script merely names ``needle`` does not count."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The command line first: it rules out nearly every process with one read.
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cmdline = b" ".join(argv).decode()
            if needle not in cmdline or "pytest" in cmdline:
                continue
            if (entry / "stat").read_text().split(") ", 1)[1].startswith("Z"):
                continue
            if not shells and Path(argv[0].decode()).name in SHELLS:
                continue
            if within is not None and f"{within}/".encode() not in (entry / "environ").read_bytes():
                continue
        except (OSError, IndexError):
            continue
        return True
    return False


def start_world(
    tmp: Path,
    sessions: list[dict[str, Any]],
    *,
    files: dict[str, str] | None = None,
    checks: dict[str, str] | None = None,
    issue_title: str = "add() subtracts instead of adding",
    issue_body: str = "calc.add(2, 3) returns -1; it should return 5.",
) -> RunWorld:
    cli_path("claude")
    stand_in = GitHubStandIn(tmp / "github")
    stand_in.start()
    model = ScriptedModelServer(ModelScript.from_dict({"sessions": sessions}), tmp / "model.jsonl")
    model.start()
    client = SandboxClient(stand_in.api_url)
    client.add_user("maintainer", TOKEN, {f"{OWNER}/{NAME}": "admin"})
    source = tmp / "source"
    source.mkdir()
    for relative, text in (files or PROJECT).items():
        (source / relative).write_text(text)
    client.add_repo(OWNER, NAME, source, {CHECK: CHECK_COMMAND} if checks is None else checks)
    agent_home = tmp / "agent-home"
    agent_home.mkdir()
    world = RunWorld(tmp, stand_in, model, client, tmp / "home", agent_home)
    world.rest(
        "POST",
        f"/repos/{OWNER}/{NAME}/labels",
        {"name": "ready-for-agent", "color": "0e8a16", "description": "thirdshift may take this"},
    )
    issue = world.rest(
        "POST",
        f"/repos/{OWNER}/{NAME}/issues",
        {"title": issue_title, "body": issue_body, "labels": ["ready-for-agent"]},
    )
    world.issue_number = int(issue["number"])
    return world


def stop_world(world: RunWorld) -> None:
    """Stop the servers, and any `thirdshift` a failed test left running."""
    for process in world.processes:
        if process.poll() is None:
            process.kill()
            process.communicate()
    world.model.stop()
    world.stand_in.stop()
