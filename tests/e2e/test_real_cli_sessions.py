"""The REAL pinned claude and codex CLIs, driven through scripted sessions on a loopback server.

Each test starts a ScriptedModelServer with its own script, runs a real headless session in a
temporary git repository (own HOME / CODEX_HOME, stdin /dev/null) and checks the repository,
the CLI's stream and the server's request log.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.real_cli import (
    CliResult,
    Harness,
    cli_path,
    final_text,
    git,
    make_git_repo,
    run_cli,
    session_id,
)
from thirdshift.harnesses.qwen import QwenHarness
from thirdshift.sandbox.model.server import SANDBOX_API_KEY, ModelScript, ScriptedModelServer

pytestmark = pytest.mark.real_cli

UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_git_repo(tmp_path / "widgets")


@pytest.fixture
def cli_home(tmp_path: Path) -> Path:
    """HOME (and CODEX_HOME under it) of the CLI under test."""
    return tmp_path / "cli-home"


def serve(tmp_path: Path, sessions: list[dict[str, Any]]) -> ScriptedModelServer:
    server = ScriptedModelServer(
        ModelScript.from_dict({"sessions": sessions}), tmp_path / "requests.jsonl"
    )
    server.start()
    return server


@pytest.fixture
def servers() -> Iterator[list[ScriptedModelServer]]:
    started: list[ScriptedModelServer] = []
    yield started
    for server in started:
        server.stop()


def model_requests(server: ScriptedModelServer) -> list[dict[str, Any]]:
    return [r for r in server.requests() if r["kind"] not in ("count_tokens", "models", "probe")]


def assert_clean_stream(harness: Harness, result: CliResult, expected_final: str) -> None:
    assert result.returncode == 0, result.describe()
    assert result.stdout_lines, result.describe()
    for line in result.stdout_lines:
        assert isinstance(json.loads(line), dict), line
    assert session_id(harness, result)
    assert final_text(harness, result) == expected_final, result.describe()


# --- a session that edits a file and commits it -------------------------------------------


def test_claude_edits_and_commits(
    tmp_path: Path, repo: Path, cli_home: Path, servers: list[ScriptedModelServer]
) -> None:
    readme = repo / "README.md"
    server = serve(
        tmp_path,
        [
            {
                "name": "edit",
                "marker": "E2E-CLAUDE-EDIT",
                "turns": [
                    {"tool_calls": [{"name": "Read", "input": {"file_path": str(readme)}}]},
                    {
                        "text": "Editing the README and adding notes.",
                        "tool_calls": [
                            {
                                "name": "Edit",
                                "input": {
                                    "file_path": str(readme),
                                    "old_string": "A small project.",
                                    "new_string": "A small, scripted project.",
                                },
                            },
                            {
                                "name": "Write",
                                "input": {
                                    "file_path": str(repo / "NOTES.md"),
                                    "content": "Written by a scripted claude.\n",
                                },
                            },
                        ],
                    },
                    {
                        "tool_calls": [
                            {
                                "name": "Bash",
                                "input": {
                                    "command": "git add -A"
                                    " && git commit -q -m 'Describe the project'",
                                    "description": "Commit the change",
                                },
                            }
                        ]
                    },
                    {"text": "Committed the README change."},
                ],
            }
        ],
    )
    servers.append(server)

    result = run_cli("claude", "Work on E2E-CLAUDE-EDIT please.", repo, server, cli_home)

    assert_clean_stream("claude", result, "Committed the README change.")
    assert git(repo, "log", "-1", "--format=%s").strip() == "Describe the project"
    assert "A small, scripted project." in git(repo, "show", "HEAD:README.md")
    assert git(repo, "show", "HEAD:NOTES.md") == "Written by a scripted claude.\n"
    assert git(repo, "status", "--porcelain") == ""

    requests = model_requests(server)
    assert [(r["session"], r["turn"]) for r in requests] == [("edit", i) for i in range(4)]
    last = requests[-1]["body"]["messages"]
    results = [
        block
        for message in last
        if message["role"] == "user" and isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert len(results) == 4  # Read, Edit, Write, Bash all came back
    assert not any(block.get("is_error") for block in results), results
    tool_use_ids = {
        block["id"]
        for message in last
        if message["role"] == "assistant"
        for block in message["content"]
        if block.get("type") == "tool_use"
    }
    assert {block["tool_use_id"] for block in results} == tool_use_ids


def test_codex_edits_and_commits(
    tmp_path: Path, repo: Path, cli_home: Path, servers: list[ScriptedModelServer]
) -> None:
    patch = (
        "*** Begin Patch\n"
        "*** Update File: README.md\n"
        "@@\n"
        "-A small project.\n"
        "+A small, scripted project.\n"
        "*** End Patch\n"
    )
    server = serve(
        tmp_path,
        [
            {
                "name": "edit",
                "marker": "E2E-CODEX-EDIT",
                "turns": [
                    {"tool_calls": [{"name": "apply_patch", "input": patch}]},
                    {
                        "tool_calls": [
                            {
                                "name": "exec_command",
                                "input": {
                                    "cmd": "printf 'Written by a scripted codex.\\n' > NOTES.md"
                                    " && git add -A && git commit -q -m 'Describe the project'",
                                    "yield_time_ms": 10000,
                                },
                            }
                        ]
                    },
                    {"text": "Committed the README change."},
                ],
            }
        ],
    )
    servers.append(server)

    result = run_cli("codex", "Work on E2E-CODEX-EDIT please.", repo, server, cli_home)

    assert_clean_stream("codex", result, "Committed the README change.")
    assert git(repo, "log", "-1", "--format=%s").strip() == "Describe the project"
    assert "A small, scripted project." in git(repo, "show", "HEAD:README.md")
    assert git(repo, "show", "HEAD:NOTES.md") == "Written by a scripted codex.\n"

    requests = model_requests(server)
    assert [(r["session"], r["turn"]) for r in requests] == [("edit", i) for i in range(3)]
    items = requests[-1]["body"]["input"]
    outputs = {item["type"]: item for item in items if item["type"].endswith("_call_output")}
    assert set(outputs) == {"custom_tool_call_output", "function_call_output"}, items
    assert "exited with code 0" in json.dumps(outputs["function_call_output"]["output"])
    calls = [item for item in items if item["type"] in ("custom_tool_call", "function_call")]
    assert {c["call_id"] for c in calls} == {o["call_id"] for o in outputs.values()}


# --- resume -------------------------------------------------------------------------------


def resume_script(harness: Harness, marker: str) -> list[dict[str, Any]]:
    tool = {
        "claude": {
            "name": "Bash",
            "input": {"command": "echo first > first.txt", "description": "note"},
        },
        "codex": {"name": "exec_command", "input": {"cmd": "echo first > first.txt"}},
        "qwen": {"name": "run_shell_command", "input": {"command": "echo first > first.txt"}},
    }[harness]
    return [
        {
            "name": "resumable",
            "marker": marker,
            "turns": [{"tool_calls": [tool]}, {"text": "First part done."}, {"text": "Resumed."}],
        }
    ]


@pytest.mark.parametrize("harness", ["claude", "codex", "qwen"])
def test_native_resume_carries_the_earlier_conversation(
    harness: Harness,
    tmp_path: Path,
    repo: Path,
    cli_home: Path,
    servers: list[ScriptedModelServer],
) -> None:
    marker = f"E2E-{harness.upper()}-RESUME"
    server = serve(tmp_path, resume_script(harness, marker))
    servers.append(server)

    first = run_cli(harness, f"Start {marker}.", repo, server, cli_home)
    assert_clean_stream(harness, first, "First part done.")
    sid = session_id(harness, first)

    second = run_cli(harness, "Carry on where you stopped.", repo, server, cli_home, resume_id=sid)
    assert_clean_stream(harness, second, "Resumed.")
    assert session_id(harness, second) == sid
    if harness == "claude":  # a zero-turn result may come first: the LAST result counts
        assert [e for e in second.events if e.get("type") == "result"][-1]["session_id"] == sid

    requests = model_requests(server)
    assert [(r["session"], r["turn"]) for r in requests] == [("resumable", i) for i in range(3)]
    before, after = requests[1]["body"], requests[2]["body"]
    key = "input" if harness == "codex" else "messages"
    assert len(after[key]) > len(before[key])
    carried = json.dumps(after[key])
    assert marker in carried
    assert "echo first" in carried
    assert "Carry on where you stopped." in carried
    assert (repo / "first.txt").read_text() == "first\n"


@pytest.mark.parametrize("harness", ["claude", "codex", "qwen"])
def test_resume_of_an_unknown_id_fails(
    harness: Harness,
    tmp_path: Path,
    repo: Path,
    cli_home: Path,
    servers: list[ScriptedModelServer],
) -> None:
    server = serve(tmp_path, [{"name": "unused", "turns": [{"text": "never asked"}]}])
    servers.append(server)

    result = run_cli(harness, "Carry on.", repo, server, cli_home, resume_id=UNKNOWN_ID)

    assert result.returncode == 1, result.describe()
    if harness == "claude":
        assert len(result.events) == len(result.stdout_lines) == 1, result.describe()
        (event,) = result.events
        assert event["type"] == "result"
        assert event["is_error"] is True
        assert event["num_turns"] == 0
        assert f"No conversation found with session ID: {UNKNOWN_ID}" in result.stderr
    elif harness == "qwen":
        assert result.stdout_lines == [], result.describe()
        assert f"No saved session found with ID {UNKNOWN_ID}" in result.stderr
    else:
        assert result.stdout_lines == [], result.describe()
        assert f"no rollout found for thread id {UNKNOWN_ID}" in result.stderr
    assert model_requests(server) == []


def test_cli_path_names_the_install_step(tmp_path: Path) -> None:
    # Sanity for the helper itself: both pinned binaries are present in this checkout.
    assert cli_path("claude").name == "claude"
    assert cli_path("codex").name == "codex"
    assert cli_path("qwen").name == "qwen"


# --- provider errors ----------------------------------------------------------------------


@pytest.mark.parametrize("harness", ["claude", "codex", "qwen"])
def test_an_overloaded_provider_is_retried(
    harness: Harness,
    tmp_path: Path,
    repo: Path,
    cli_home: Path,
    servers: list[ScriptedModelServer],
) -> None:
    server = serve(tmp_path, [{"name": "s", "turns": [{"error": "overloaded"}, {"text": "Back."}]}])
    servers.append(server)

    result = run_cli(harness, "Say something.", repo, server, cli_home)

    assert_clean_stream(harness, result, "Back.")
    assert [r["kind"] for r in model_requests(server)] == ["error", "text"]


def test_codex_gives_up_on_a_rate_limit_without_retry_after(
    tmp_path: Path, repo: Path, cli_home: Path, servers: list[ScriptedModelServer]
) -> None:
    server = serve(tmp_path, [{"name": "s", "turns": [{"error": "rate_limit"}, {"text": "no"}]}])
    servers.append(server)

    result = run_cli("codex", "Say something.", repo, server, cli_home)

    assert result.returncode == 1, result.describe()
    failed = [e for e in result.events if e.get("type") == "turn.failed"]
    assert len(failed) == 1, result.describe()
    assert "429" in failed[0]["error"]["message"]
    assert [r["kind"] for r in model_requests(server)] == ["error"]


# --- qwen on an OpenAI provider -----------------------------------------------------------


def test_qwen_with_an_openai_auth_type_speaks_the_responses_api(
    tmp_path: Path, repo: Path, cli_home: Path, servers: list[ScriptedModelServer]
) -> None:
    """``--auth-type openai-responses`` in the options: the adapter passes the OpenAI variables
    (not the Anthropic ones) and qwen asks the server's Responses API; its stream reads the
    same."""
    server = serve(
        tmp_path,
        [
            {
                "name": "openai",
                "marker": "E2E-QWEN-OPENAI",
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "run_shell_command", "input": {"command": "echo hi"}}
                        ]
                    },
                    {"text": "Done over Responses."},
                ],
            }
        ],
    )
    servers.append(server)
    qwen = QwenHarness(
        executable=str(cli_path("qwen")), extra_args=("--auth-type", "openai-responses")
    )
    base = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC", "OPENAI"))},
        "OPENAI_BASE_URL": f"{server.url}/v1",
        "OPENAI_API_KEY": SANDBOX_API_KEY,
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/never",
    }
    env = {**qwen.environment(base), **qwen.private_home(base, cli_home)}
    assert "ANTHROPIC_BASE_URL" not in env
    done = subprocess.run(
        qwen.argv("Start E2E-QWEN-OPENAI.", model="gpt-5.5", resume_id=None),
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    reader = qwen.reader()
    for line in done.stdout.splitlines():
        reader.feed(line)
    outcome = reader.finish(done.returncode, stopped_after_result=False)
    assert not outcome.failed, done.stderr.decode()
    assert outcome.final_message == "Done over Responses."
    assert outcome.usage.model == "gpt-5.5"
    requests = model_requests(server)
    assert [(r["path"], r["kind"]) for r in requests] == [
        ("/v1/responses", "tool_calls"),
        ("/v1/responses", "text"),
    ]
