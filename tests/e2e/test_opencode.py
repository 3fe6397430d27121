"""OpenCode end to end: `thirdshift run --harness opencode` with the real pinned CLI, on the
GitHub stand-in, pointed at the scripted model server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from tests.support.real_cli import argv_logging, cli_path, logged_argvs, make_git_repo
from tests.support.run_world import (
    CALC_FIXED,
    TEST_CALC,
    RunWorld,
    bash,
    pull_request_file,
    running,
    start_world,
    write_file_command,
)
from thirdshift.harnesses import StreamOutcome
from thirdshift.harnesses.opencode import OpenCodeHarness, unbundled_provider_packages
from thirdshift.sandbox.model.opencode import opencode_env
from thirdshift.sandbox.model.server import ModelScript, ScriptedModelServer
from thirdshift.store import Store

pytestmark = pytest.mark.real_cli

ISSUE_MARKER = "calc.add(2, 3) returns -1"
CLAUDE_MODEL = "claude-sonnet-4-5"
# OpenCode's own Model in these tests: one its bundled table knows, and not claude's.
OPENCODE_MODEL = "anthropic/claude-haiku-4-5-20251001"
FIX = (
    write_file_command("calc.py", CALC_FIXED)
    + " && git commit -qam 'Make add() add' && "
    + pull_request_file("Make add() add", "Fixed.\n\nCloses #1")
)


@pytest.fixture
def wrappers() -> Iterator[Path]:
    """A directory to put first on PATH whose ``opencode`` and ``claude`` log their argv."""
    with argv_logging("opencode", "claude") as directory:
        yield directory


def sessions_of(world: RunWorld) -> list[tuple[str, str, str | None, str]]:
    store = Store.open(f"sqlite:///{world.home / 'thirdshift.db'}")
    try:
        [run] = store.list_runs()
        return [(s.kind, s.harness, s.model, s.state) for s in store.run_sessions(run.id)]
    finally:
        store.close()


def opencode_bash(command: str, description: str) -> dict[str, object]:
    """OpenCode's shell tool is ``bash``, lower case."""
    return {"name": "bash", "input": {"command": command, "description": description}}


def test_a_run_with_the_opencode_harness_reaches_a_ready_pull_request(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """--harness opencode: the Run's session is the real OpenCode CLI, configured inline
    (OPENCODE_CONFIG_CONTENT), sealed, whose commit and pull request file make a ready PR.
    It takes no snapshots of the Worktree into its home (the command fails if it did)."""
    fix = (
        'test ! -e "$XDG_DATA_HOME/opencode/snapshot" && '
        + write_file_command("calc.py", CALC_FIXED)
        + " && git commit -qam 'Make add() add' && "
        + pull_request_file("Make add() add", "Fixed.\n\nCloses #1")
    )
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": ISSUE_MARKER,
                "turns": [{"tool_calls": [opencode_bash(fix, "fix")]}, {"text": "Fixed add()."}],
            }
        ],
    )
    worlds.append(world)
    world.settings.update(opencode_env(world.model.url))

    result = world.thirdshift("run", "--harness", "opencode", world.issue_url)

    assert result.returncode == 0, result.stderr
    assert "implement: commit" in result.stderr
    pull = world.pulls()[0]
    assert pull["title"] == "Make add() add"
    assert result.stdout == pull["html_url"] + "\n"
    # Every model request is the agent's: OpenCode asked for no title of its own.
    assert {r.get("session") for r in world.model.requests()} == {"implement"}


def test_a_claude_run_whose_provider_is_overloaded_continues_on_opencode_through_the_preamble(
    tmp_path: Path, worlds: list[RunWorld], wrappers: Path
) -> None:
    """claude commits a step, then 529s outlast its retries: OpenCode (harness_fallbacks) goes
    on in a fresh session opened with the resume preamble, with its own Model, no --session
    and no claude Model in its argv, and finishes the Run."""
    world = start_world(
        tmp_path,
        [
            {
                "name": "opencode",
                "marker": "stopped when its model provider was overloaded (529)",
                "turns": [
                    {"tool_calls": [opencode_bash(FIX, "fix")]},
                    {"text": "Fixed add() on OpenCode."},
                ],
            },
            {
                "name": "claude",
                "marker": ISSUE_MARKER,
                "turns": [
                    {"tool_calls": [bash("echo claude-step > NOTES.md", "notes")]},
                    {"error": "overloaded"},
                    {"error": "overloaded"},
                ],
            },
        ],
    )
    worlds.append(world)
    world.settings.update(opencode_env(world.model.url))
    world.settings.update(
        {
            "CLAUDE_CODE_MAX_RETRIES": "1",
            "PATH": f"{wrappers}{os.pathsep}{world.env()['PATH']}",
            "THIRDSHIFT_HARNESS_PATHS": json.dumps([str(wrappers)]),
            "THIRDSHIFT_HARNESS_FALLBACKS": json.dumps(["opencode"]),
            "THIRDSHIFT_MODEL": CLAUDE_MODEL,
            "THIRDSHIFT_HARNESS_MODELS": json.dumps({"opencode": OPENCODE_MODEL}),
        }
    )

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 0, result.stderr
    assert "continuing on opencode in a fresh session" in result.stderr
    [pull] = world.pulls()
    assert result.stdout == pull["html_url"] + "\n"
    [opening, *_] = [r for r in world.model_requests("opencode") if r.get("turn") == 0]
    request = json.dumps(opening["body"])
    assert "This session continues an earlier one" in request
    assert "claude-step" in request
    assert opening["body"]["model"] == OPENCODE_MODEL.split("/", 1)[1]
    [argv] = logged_argvs(world.home, "opencode")
    assert argv[argv.index("--model") + 1] == OPENCODE_MODEL
    assert not any(CLAUDE_MODEL in arg for arg in argv)
    assert "--session" not in argv
    assert "--resume" not in argv
    assert sessions_of(world) == [
        ("implement", "claude", CLAUDE_MODEL, "failed"),
        ("implement", "opencode", OPENCODE_MODEL, "ended"),
    ]


def test_an_opencode_run_rate_limited_past_its_retries_continues_on_claude(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """A 429 storm outlasts OpenCode's own retries: the Run switches to claude, which finishes
    it in a fresh session opened with the resume preamble."""
    world = start_world(
        tmp_path,
        [
            {
                "name": "claude",
                "marker": "stopped when its model provider was rate-limited (429)",
                "turns": [{"tool_calls": [bash(FIX, "fix")]}, {"text": "Fixed add() on claude."}],
            },
            {
                "name": "opencode",
                "marker": ISSUE_MARKER,
                "turns": [{"error": "rate_limit", "retry_after_s": 0}] * 6,
            },
        ],
    )
    worlds.append(world)
    world.settings.update(opencode_env(world.model.url))
    world.settings["THIRDSHIFT_HARNESS_FALLBACKS"] = json.dumps(["claude"])

    result = world.thirdshift("run", "--harness", "opencode", world.issue_url)

    assert result.returncode == 0, result.stderr
    assert (
        "implement: opencode's provider is rate-limited (429) after its retries; continuing on "
        "claude in a fresh session" in result.stderr
    )
    [pull] = world.pulls()
    assert result.stdout == pull["html_url"] + "\n"
    assert [(kind, harness, state) for kind, harness, _, state in sessions_of(world)] == [
        ("implement", "opencode", "failed"),
        ("implement", "claude", "ended"),
    ]


def test_sigterm_mid_opencode_session_stops_its_whole_tree_and_saves_the_work(
    tmp_path: Path, worlds: list[RunWorld]
) -> None:
    """SIGTERM while OpenCode's shell tool runs (in a process group of its own, with a detached
    child): nothing of its tree is left, the work is committed and pushed, the Run failed as
    interrupted."""
    stall = (
        "echo 'half done' > WIP.md && (python3 -c 'import time; time.sleep(347)' &) && "
        "python3 -c 'import time; time.sleep(343)'"
    )
    world = start_world(
        tmp_path,
        [
            {
                "name": "implement",
                "marker": ISSUE_MARKER,
                "turns": [{"tool_calls": [opencode_bash(stall, "long check")]}],
            }
        ],
    )
    worlds.append(world)
    world.settings.update(opencode_env(world.model.url))

    process = world.start_thirdshift("run", "--harness", "opencode", world.issue_url)
    world.wait_for_process("time.sleep(347)")
    world.wait_for_process("time.sleep(343)")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)

    assert process.returncode == 1, stderr
    assert "SIGTERM: stopping; the work will be saved" in stderr
    assert not running("time.sleep(343)", within=world.tmp)
    assert not running("time.sleep(347)", within=world.tmp)
    assert not running("opencode run", within=world.tmp)
    clone = world.clone()
    assert world.git("log", "-1", "--format=%s", "origin/issue-1", cwd=clone) == (
        "thirdshift: failed run (interrupted)"
    )
    assert world.git("show", "origin/issue-1:WIP.md", cwd=clone) == "half done"
    assert sessions_of(world) == [("implement", "opencode", None, "failed")]


class _Registry(BaseHTTPRequestHandler):
    """A package registry that only counts what asks it."""

    hits: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.hits.append(self.path)
        self.send_error(404)

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_provider_package_the_binary_lacks_is_never_fetched_from_a_registry(
    tmp_path: Path,
) -> None:
    """A configuration naming a provider package OpenCode does not carry fails its session
    ("Failed to initialize provider") and asks no package registry, even one configured."""
    registry = HTTPServer(("127.0.0.1", 0), _Registry)
    threading.Thread(target=registry.serve_forever, daemon=True).start()
    repo = make_git_repo(tmp_path / "repo")
    config = {
        "model": "local/m",
        "provider": {
            "local": {
                "npm": "ollama-ai-provider-v2",
                "options": {"baseURL": "http://127.0.0.1:9/v1"},
                "models": {"m": {}},
            }
        },
    }
    harness = OpenCodeHarness(executable=str(cli_path("opencode")))
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path / "user"),
        "OPENCODE_CONFIG_CONTENT": json.dumps(config),
    }
    assert unbundled_provider_packages(base) == ["ollama-ai-provider-v2"]
    env = harness.environment(base)
    env.update(harness.private_home(base, tmp_path / "agent-home"))
    registry_url = f"http://127.0.0.1:{registry.server_address[1]}/"
    env["npm_config_registry"] = registry_url  # as if the operator's npm pointed at one
    try:
        done = subprocess.run(
            harness.argv("Say hi.", model=None, resume_id=None),
            cwd=repo,
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
    finally:
        registry.shutdown()
    reader = harness.reader()
    for line in done.stdout.splitlines():
        reader.feed(line)
    outcome = reader.finish(done.returncode, stopped_after_result=False)
    assert outcome.failed
    assert "Failed to initialize provider: local" in (outcome.failure_cause or "")
    assert _Registry.hits == []


def run_opencode(
    prompt: str, repo: Path, home: Path, server_url: str, resume_id: str | None = None
) -> tuple[StreamOutcome, str]:
    """One real session through the adapter (its argv, environment and private home in
    ``home``): the reader's outcome and the stderr."""
    harness = OpenCodeHarness(executable=str(cli_path("opencode")))
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(home.parent / "user"),
        **opencode_env(server_url),
    }
    env = harness.environment(base)
    env.update(harness.private_home(base, home))
    done = subprocess.run(
        harness.argv(prompt, model=None, resume_id=resume_id),
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    reader = harness.reader()
    for line in done.stdout.splitlines():
        reader.feed(line)
    return reader.finish(done.returncode, stopped_after_result=False), done.stderr.decode()


def test_a_native_resume_continues_the_conversation_and_a_lost_one_is_known_as_unknown(
    tmp_path: Path,
) -> None:
    """--session continues the same session in the same agent home (the model sees the earlier
    turns); from another agent home, whose database lacks it, the resume fails as unknown, which
    is what sends the Resume rules to the preamble."""
    marker = "E2E-OPENCODE-RESUME"
    script = ModelScript.from_dict(
        {
            "sessions": [
                {
                    "name": "resumable",
                    "marker": marker,
                    "turns": [
                        {"tool_calls": [opencode_bash("echo first > first.txt", "first")]},
                        {"text": "First part done."},
                        {"text": "Resumed."},
                    ],
                }
            ]
        }
    )
    repo = make_git_repo(tmp_path / "repo")
    home = tmp_path / "agent-home"
    with ScriptedModelServer(script, tmp_path / "requests.jsonl") as server:
        first, _ = run_opencode(f"Start {marker}.", repo, home, server.url)
        second, _ = run_opencode("-Carry on.", repo, home, server.url, first.session_id)
        lost, stderr = run_opencode(
            "Carry on.", repo, tmp_path / "other-home", server.url, first.session_id
        )
        requests = server.requests()

    assert first.final_message == "First part done."
    assert not first.failed
    assert second.final_message == "Resumed."
    assert not second.failed
    assert second.session_id == first.session_id
    assert [(r["session"], r["turn"]) for r in requests] == [("resumable", i) for i in range(3)]
    carried = json.dumps(requests[2]["body"]["messages"])
    assert marker in carried
    assert "echo first" in carried
    assert "-Carry on." in carried
    assert lost.failed
    assert OpenCodeHarness().resume_unknown(lost, stderr)


SUBTRACT_ISSUE = "Add subtract(a, b) to calc.py, with a test."
TEST_SUBTRACT = (
    "import unittest\n\nfrom calc import subtract\n\n\n"
    "class SubtractTest(unittest.TestCase):\n"
    "    def test_subtracts(self) -> None:\n"
    "        self.assertEqual(subtract(5, 3), 2)\n"
)
CALC_WITH_SUBTRACT = CALC_FIXED + "\n\ndef subtract(a: int, b: int) -> int:\n    return a - b\n"
TEST_FIRST = (
    write_file_command("test_subtract.py", TEST_SUBTRACT)
    + " && git add test_subtract.py && git commit -qm 'Test subtract()'"
)


def test_a_claude_run_whose_repair_runs_on_opencode_carries_the_thread_in_the_preamble(
    tmp_path: Path, worlds: list[RunWorld], wrappers: Path
) -> None:
    """claude implements and CI goes red; the Repair's claude session meets 529s past its
    retries and the Repair goes on on OpenCode: a fresh session opened with the repair prompt
    and the resume preamble, OpenCode's own Model, no --session or --resume and no claude Model
    in its argv; its fix turns CI green."""
    implement_subtract = (
        write_file_command("calc.py", CALC_WITH_SUBTRACT)
        + " && python3 -m unittest -q && git add calc.py && git commit -qm 'Add subtract()'"
    )
    world = start_world(
        tmp_path,
        [
            {
                "name": "opencode",
                "marker": "stopped when its model provider was overloaded (529)",
                "turns": [
                    {"tool_calls": [opencode_bash(implement_subtract, "implement")]},
                    {"text": "subtract() is in; the tests pass."},
                ],
            },
            {
                "name": "repair",
                "marker": "CI is red on",
                "turns": [{"error": "overloaded"}, {"error": "overloaded"}],
            },
            {
                "name": "implement",
                "marker": SUBTRACT_ISSUE,
                "turns": [
                    {"tool_calls": [bash(TEST_FIRST, "test first")]},
                    {"text": "Done."},
                ],
            },
        ],
        files={"README.md": "# calculator\n", "calc.py": CALC_FIXED, "test_calc.py": TEST_CALC},
        issue_title="Add subtract()",
        issue_body=SUBTRACT_ISSUE,
    )
    worlds.append(world)
    world.settings.update(opencode_env(world.model.url))
    world.settings.update(
        {
            "CLAUDE_CODE_MAX_RETRIES": "1",
            "PATH": f"{wrappers}{os.pathsep}{world.env()['PATH']}",
            "THIRDSHIFT_HARNESS_PATHS": json.dumps([str(wrappers)]),
            "THIRDSHIFT_HARNESS_FALLBACKS": json.dumps(["opencode"]),
            "THIRDSHIFT_MODEL": CLAUDE_MODEL,
            "THIRDSHIFT_HARNESS_MODELS": json.dumps({"opencode": OPENCODE_MODEL}),
        }
    )

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 0, result.stderr
    assert "continuing on opencode in a fresh session" in result.stderr
    [pull] = world.pulls()
    assert [c["conclusion"] for c in world.check_runs(pull["head"]["sha"])] == ["success"]
    [opening, *_] = [r for r in world.model_requests("opencode") if r.get("turn") == 0]
    request = json.dumps(opening["body"]["messages"])
    assert "This session continues an earlier one" in request
    assert "Check 'unit tests' failed" in request
    assert opening["body"]["model"] == OPENCODE_MODEL.split("/", 1)[1]
    [argv] = logged_argvs(world.home, "opencode")
    assert argv[argv.index("--model") + 1] == OPENCODE_MODEL
    assert not any(CLAUDE_MODEL in arg for arg in argv)
    assert "--session" not in argv
    assert "--resume" not in argv
    kinds = [(kind, harness) for kind, harness, _, _ in sessions_of(world)]
    assert kinds[0] == ("implement", "claude")
    assert kinds[-1][1] == "opencode"
    assert kinds[-1][0].startswith("repair")
    assert kinds[-2][1] == "claude"
    assert kinds[-2][0].startswith("repair")
