"""``thirdshift demo``: a whole sandbox on one machine, with no accounts.

It starts the GitHub stand-in and the scripted model server on free loopback ports, creates a
small Python repository whose one test fails and whose CI runs that test, and files an issue
labelled ``ready-for-agent`` by a maintainer with write permission. The model script it loads
fixes the bug the way an agent would (edit, run the tests, commit), for a Run to play.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from thirdshift.bootstrap import RunRequest, check_demo_harness, run_issue
from thirdshift.clock import SystemClock
from thirdshift.errors import SandboxError
from thirdshift.github import GitHub
from thirdshift.issue_url import parse_issue_url
from thirdshift.sandbox.client import SandboxClient
from thirdshift.sandbox.github.server import GitHubStandIn
from thirdshift.sandbox.model.opencode import opencode_env
from thirdshift.sandbox.model.server import (
    ModelScript,
    ScriptedModelServer,
    claude_env,
    codex_config_args,
    codex_env,
)
from thirdshift.scrub import Scrubber
from thirdshift.settings import Settings
from thirdshift.store import Store

OWNER = "demo"
NAME = "calculator"
MAINTAINER = "maintainer"
READY_LABEL = "ready-for-agent"
CHECK_NAME = "unit tests"
CHECK_COMMAND = "python3 -m unittest -v"
ISSUE_MARKER = "DEMO-CALCULATOR-ADD"

PROJECT_FILES = {
    "README.md": "# calculator\n\nA tiny library the thirdshift demo lets an agent fix.\n",
    "calc.py": (
        '"""Arithmetic on two numbers."""\n\n\ndef add(a: int, b: int) -> int:\n    return a - b\n'
    ),
    "test_calc.py": (
        "import unittest\n\nfrom calc import add\n\n\n"
        "class AddTest(unittest.TestCase):\n"
        "    def test_adds_two_numbers(self) -> None:\n"
        "        self.assertEqual(add(2, 3), 5)\n\n\n"
        'if __name__ == "__main__":\n'
        "    unittest.main()\n"
    ),
    ".gitignore": "__pycache__/\n",
}

ISSUE_TITLE = "add() subtracts instead of adding"
ISSUE_BODY = (
    "`calc.add(2, 3)` returns -1; it should return 5. The unit test `test_adds_two_numbers` "
    f"shows it.\n\n<!-- {ISSUE_MARKER} -->\n"
)

MODEL_SCRIPT: dict[str, Any] = {
    "final_text": "Nothing more to do.",
    "sessions": [
        {
            "name": "demo-fix",
            "marker": ISSUE_MARKER,
            "final_text": "Fixed add() and committed the fix with its test passing.",
            "turns": [
                {
                    "text": "Let me look at the failing test first.",
                    "tool_calls": [
                        {
                            "name": "Bash",
                            "input": {
                                "command": f"{CHECK_COMMAND} 2>&1 | tail -5",
                                "description": "Run the unit tests",
                            },
                        }
                    ],
                },
                {
                    "text": "add() subtracts; fixing the operator.",
                    "tool_calls": [
                        {
                            "name": "Bash",
                            "input": {
                                "command": "sed -i 's/return a - b/return a + b/' calc.py "
                                f"&& {CHECK_COMMAND}",
                                "description": "Fix add() and run the tests",
                            },
                        }
                    ],
                },
                {
                    "tool_calls": [
                        {
                            "name": "Bash",
                            "input": {
                                "command": "git add calc.py && git commit -q -m "
                                "'Make add() add (fixes the failing unit test)'",
                                "description": "Commit the fix",
                            },
                        }
                    ],
                },
                {
                    "tool_calls": [
                        {
                            "name": "Bash",
                            "input": {
                                "command": "printf '%s\\n\\n%s\\n' 'Make add() add' "
                                "'add() subtracted its arguments; it adds them now and the unit "
                                "test passes. Closes #1' > .thirdshift-pull-request.md",
                                "description": "Write the pull request",
                            },
                        }
                    ],
                },
            ],
        }
    ],
}


# Each Harness's shell tool and the name of its command field, for the script's tool calls.
_SHELL_TOOLS = {
    "claude": ("Bash", "command"),
    "codex": ("exec_command", "cmd"),
    "opencode": ("bash", "command"),
    "qwen": ("run_shell_command", "command"),
}
_LABELS = {"claude": "Claude Code", "codex": "Codex", "opencode": "OpenCode", "qwen": "Qwen Code"}


def model_script(harness: str, written: Mapping[str, Any] = MODEL_SCRIPT) -> dict[str, Any]:
    """A demo's model script (the single-Run demo's unless ``written`` says another), its
    tool calls, written as Claude Code's Bash, named as ``harness``'s CLI names its shell."""
    tool, field = _SHELL_TOOLS[harness]
    script = json.loads(json.dumps(written))
    for turn in (turn for session in script["sessions"] for turn in session["turns"]):
        for call in turn.get("tool_calls", []):
            call["name"] = tool
            if field != "command":
                call["input"] = {field: call["input"]["command"]}
    return dict(script)


@dataclass(frozen=True)
class DemoWorld:
    """What the demo set up, for a person (or a Run) to use."""

    root: Path
    token: str
    api_url: str
    model_url: str
    clone_url: str
    issue_url: str
    env_file: Path


def run_demo(
    root: Path | None,
    progress: Callable[[str], None],
    interrupt: threading.Event,
    *,
    emit_url: Callable[[str], None],
    keep: Callable[[str], None] | None = None,
    harness: str = "claude",
) -> int:
    """Set the sandbox up, run thirdshift on its issue with the real CLI of ``harness``, show
    what came of it, and return the Run's exit status. With ``keep``, serve on until
    interrupted."""
    check_demo_harness(harness, os.environ)  # before any server: a missing CLI ends it at once
    root = Path(tempfile.mkdtemp(prefix="thirdshift-demo-")) if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    script_path = root / "model-script.json"
    script_path.write_text(json.dumps(model_script(harness), indent=2) + "\n")
    script = ModelScript.load(script_path)
    with (
        GitHubStandIn(root / "github") as stand_in,
        ScriptedModelServer(script, root / "model-requests.jsonl") as model,
    ):
        world = set_up(root, stand_in.api_url, model.url, progress)
        settings = demo_settings(root, world, harness)
        label = _LABELS.get(harness, harness)
        progress(f"running thirdshift on {world.issue_url} with the real {label} CLI")
        status = run_issue(
            settings,
            RunRequest(issue=parse_issue_url(world.issue_url)),
            environ=dict(os.environ),
            agent_environ=agent_environment(os.environ, model.url, root / "agent-home", harness),
            progress=progress,
            emit_url=emit_url,
            interrupt=interrupt,
        ).exit_code
        show_outcome(settings, world, progress)
        if keep is not None and not interrupt.is_set():
            keep("the demo's servers are still up")
        return status


def demo_settings(root: Path, world: DemoWorld, harness: str = "claude") -> Settings:
    """Settings of the demo's own: its own home and the sandbox, with short CI waits (the
    sandbox's CI starts at once, so a long grace period would only make the demo slow). Built
    from these values alone (``Settings`` reads no environment or file by itself), so the demo
    runs on embedded defaults whatever the user's THIRDSHIFT_* variables and config.toml say."""
    return Settings(
        home=root / "home",
        github_api_url=world.api_url,
        github_token=SecretStr(world.token),
        ci_grace_seconds=10,
        ci_poll_seconds=0.5,
        session_post_result_seconds=15,
        harness=harness,
        # codex reaches the scripted model server through a provider of its command line.
        harness_options={"codex": codex_config_args(world.model_url)} if harness == "codex" else {},
    )


def agent_environment(
    base: Mapping[str, str], model_url: str, agent_home: Path, harness: str = "claude"
) -> dict[str, str]:
    """The environment a Run's Harness is built from: the user's own, without any provider
    settings of theirs, pointed at the scripted model server with a home of its own."""
    agent_home.mkdir(parents=True, exist_ok=True)
    environ = {
        key: value
        for key, value in base.items()
        if not key.startswith(("ANTHROPIC_", "CLAUDE", "OPENAI_", "CODEX_", "OPENCODE_"))
    }
    # claude's variables serve qwen too (its default provider is Anthropic's API).
    environ.update(claude_env(model_url, agent_home))
    if harness == "codex":
        (agent_home / ".codex").mkdir(exist_ok=True)
        environ.update(codex_env(agent_home / ".codex"))
    if harness == "opencode":
        environ.update(opencode_env(model_url))
    return environ


def show_outcome(settings: Settings, world: DemoWorld, progress: Callable[[str], None]) -> None:
    """The pull request's state, its checks and the last Session log, for the person watching."""
    github = GitHub(world.api_url, world.token, scrub=Scrubber([world.token]), clock=SystemClock())
    pulls = github.pulls_for_head(OWNER, NAME, "issue-1")
    if not pulls:
        progress("no pull request was opened")
    else:
        pull = github.pull(OWNER, NAME, pulls[0].number)
        state = "merged" if pull.merged else ("draft" if pull.draft else pull.state)
        progress(f"pull request #{pull.number}: {state}, {pull.head_ref} into {pull.base_ref}")
        for check in github.check_runs(OWNER, NAME, pull.head_sha):
            progress(
                f"check '{check.name}' on {pull.head_sha[:7]}: {check.conclusion or check.status}"
            )
    store = Store.open(settings.effective_database_url)
    try:
        runs = store.list_runs(limit=1)
    finally:
        store.close()
    if runs and runs[0].last_session_log:
        progress(f"session log: {runs[0].last_session_log}")


def set_up(root: Path, api_url: str, model_url: str, progress: Callable[[str], None]) -> DemoWorld:
    """Create the demo's user, repository and Ready issue on a running stand-in."""
    token = "demo_" + secrets.token_hex(16)
    client = SandboxClient(api_url)
    full_name = f"{OWNER}/{NAME}"
    client.add_user(MAINTAINER, token, {full_name: "write"})
    source = root / "source"
    source.mkdir(exist_ok=True)
    for relative, text in PROJECT_FILES.items():
        (source / relative).write_text(text)
    sha = client.add_repo(OWNER, NAME, source, {CHECK_NAME: CHECK_COMMAND})
    progress(f"GitHub stand-in: {api_url}")
    progress(f"scripted model server: {model_url}")
    repo = rest(api_url, token, "GET", f"/repos/{full_name}")
    progress(
        f"repository {full_name}: {repo['clone_url']} (main at {sha[:7]}, check '{CHECK_NAME}')"
    )
    rest(
        api_url,
        token,
        "POST",
        f"/repos/{full_name}/labels",
        {"name": READY_LABEL, "color": "0e8a16", "description": "thirdshift may take this"},
    )
    issue = rest(
        api_url,
        token,
        "POST",
        f"/repos/{full_name}/issues",
        {"title": ISSUE_TITLE, "body": ISSUE_BODY},
    )
    rest(
        api_url,
        token,
        "POST",
        f"/repos/{full_name}/issues/{issue['number']}/labels",
        {"labels": [READY_LABEL]},
    )
    progress(f"issue #{issue['number']} '{ISSUE_TITLE}', labelled {READY_LABEL} by {MAINTAINER}")
    env_file = root / "demo.env"
    # The sandbox token is throwaway, but it still goes to a private file, not to the screen.
    env_file.write_text(
        f"export THIRDSHIFT_GITHUB_API_URL={api_url}\n"
        f"export GITHUB_TOKEN={token}\n"
        f"export ANTHROPIC_BASE_URL={model_url}\n"
    )
    os.chmod(env_file, 0o600)
    progress(f"to look around with the maintainer's token: source {env_file}")
    return DemoWorld(
        root=root,
        token=token,
        api_url=api_url,
        model_url=model_url,
        clone_url=str(repo["clone_url"]),
        issue_url=str(issue["html_url"]),
        env_file=env_file,
    )


def rest(
    api_url: str, token: str, method: str, path: str, payload: dict[str, Any] | None = None
) -> Any:
    """One REST call as the demo's maintainer, the way a person's client would make it."""
    data = json.dumps(payload).encode() if payload is not None else None
    request = urllib.request.Request(  # noqa: S310 - the stand-in is on loopback http
        api_url.rstrip("/") + path,
        data=data,
        method=method,
        headers={
            "Authorization": f"token {token}",
            "Accept": "application/vnd.github+json",
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return json.loads(response.read() or b"null")
    except OSError as exc:
        raise SandboxError(f"the demo could not {method} {path} on the stand-in: {exc}") from exc
