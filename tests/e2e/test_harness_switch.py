"""A Harness switch, end to end: the real claude CLI meets a burst of 529s that outlasts its own
retries, and the Run continues on the real codex CLI in a fresh session opened with the resume
brief; the stand-in, the scripted model server."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.real_cli import BIN_DIR, argv_logging, logged_argvs
from tests.support.run_world import (
    CALC_FIXED,
    RunWorld,
    bash,
    pull_request_file,
    start_world,
    write_file_command,
)
from thirdshift.sandbox.model.server import SANDBOX_CODEX_MODEL, codex_config_args, codex_env
from thirdshift.store import Store

pytestmark = pytest.mark.real_cli

MARKER = "calc.add(2, 3) returns -1"
# Only the brief of a session continuing after claude's outage says this.
SWITCHED = "stopped when its model provider was overloaded (529)"
CLAUDE_MODEL = "claude-sonnet-4-5"
STEP = "echo claude-step > NOTES.md"
FIX = (
    write_file_command("calc.py", CALC_FIXED)
    + " && git commit -qam 'Make add() add' && "
    + pull_request_file("Make add() add", "Fixed.\n\nCloses #1")
)


@pytest.fixture
def argv_logging_codex() -> Iterator[Path]:
    """A directory to put first on PATH whose ``codex`` logs its argv (``argv_logging``)."""
    with argv_logging("codex") as directory:
        yield directory


def codex_argvs(world: RunWorld) -> list[list[str]]:
    return logged_argvs(world.home, "codex")


def pinned(package: str) -> str:
    """The version of a CLI package the tests pin."""
    manifest = json.loads((BIN_DIR.parents[1] / "package.json").read_text())
    return str(manifest["devDependencies"][package])


def test_a_run_whose_claude_provider_is_overloaded_continues_on_codex(
    tmp_path: Path, worlds: list[RunWorld], argv_logging_codex: Path
) -> None:
    """claude commits a step, then its provider answers 529 past its retries: the Run goes on
    with codex, whose request holds the resume brief with claude's step, whose argv has the
    codex Model and no resume; the Run ends ready, no Repair ran, and the sessions are
    recorded as claude's then codex's."""
    world = start_world(
        tmp_path,
        [
            {
                "name": "codex",
                "marker": SWITCHED,
                "turns": [
                    {"tool_calls": [{"name": "exec_command", "input": {"cmd": FIX}}]},
                    {"text": "Fixed add() on codex."},
                ],
            },
            {
                "name": "claude",
                "marker": MARKER,
                # With CLAUDE_CODE_MAX_RETRIES=1, claude asks twice before it gives up.
                "turns": [
                    {"tool_calls": [bash(STEP, "notes")]},
                    {"error": "overloaded"},
                    {"error": "overloaded"},
                ],
            },
        ],
    )
    worlds.append(world)
    codex_home = world.agent_home / ".codex"
    codex_home.mkdir()
    wrappers = argv_logging_codex
    provider = codex_config_args(world.model.url)
    assert provider[-2:] == ["-m", SANDBOX_CODEX_MODEL]  # the Model comes from harness_models
    world.settings.update(codex_env(codex_home))
    world.settings.update(
        {
            # claude retries a 529 ten times by default, for minutes; once is enough here.
            "CLAUDE_CODE_MAX_RETRIES": "1",
            "PATH": f"{wrappers}{os.pathsep}{world.env()['PATH']}",
            "THIRDSHIFT_HARNESS_PATHS": json.dumps([str(wrappers)]),
            "THIRDSHIFT_HARNESS_FALLBACKS": json.dumps(["codex"]),
            "THIRDSHIFT_MODEL": CLAUDE_MODEL,
            "THIRDSHIFT_HARNESS_MODELS": json.dumps({"codex": SANDBOX_CODEX_MODEL}),
            "THIRDSHIFT_HARNESS_OPTIONS": json.dumps({"codex": provider[:-2]}),
        }
    )

    result = world.thirdshift("run", world.issue_url)

    assert result.returncode == 0, result.stderr
    assert (
        "implement: claude's provider is overloaded (529) after its retries; continuing on "
        "codex in a fresh session" in result.stderr
    )
    [pull] = world.pulls()
    assert pull["draft"] is False
    assert result.stdout == pull["html_url"] + "\n"
    # The codex conversation opens with the resume brief: the request and claude's step.
    [opening, *_] = [r for r in world.model_requests("codex") if r.get("turn") == 0]
    request = json.dumps(opening["body"])
    assert MARKER in request
    assert "This session continues an earlier one" in request
    assert "claude-step" in request.split("What it did, oldest first:", 1)[1]
    assert opening["body"]["model"] == SANDBOX_CODEX_MODEL
    assert CLAUDE_MODEL not in request
    # Its argv: the codex Model, never the claude one, and no resume of any id.
    [argv] = codex_argvs(world)
    assert argv[argv.index("-m") + 1] == SANDBOX_CODEX_MODEL
    assert CLAUDE_MODEL not in argv
    assert "resume" not in argv
    store = Store.open(f"sqlite:///{world.home / 'thirdshift.db'}")
    try:
        [run] = store.list_runs()
        sessions = store.run_sessions(run.id)
    finally:
        store.close()
    assert run.state == "succeeded"
    assert [(s.kind, s.harness, s.model, s.state) for s in sessions] == [
        ("implement", "claude", CLAUDE_MODEL, "failed"),
        ("implement", "codex", SANDBOX_CODEX_MODEL, "ended"),
    ]
    assert sessions[1].harness_session_id != sessions[0].harness_session_id
    assert sessions[1].resumed_from_id is None
    assert not any(s.kind.startswith("repair") for s in sessions)  # the Repair budget is whole
    # The usage ledger shows the Run on both Harnesses, each with its own Model and tokens.
    ledger = world.thirdshift("usage", "--by", "run", "--json")
    assert ledger.returncode == 0, ledger.stderr
    [line] = [json.loads(text) for text in ledger.stdout.splitlines()]
    assert line["harnesses"] == [f"claude ({CLAUDE_MODEL})", f"codex ({SANDBOX_CODEX_MODEL})"]
    assert line["sessions"] == 2
    assert line["input_tokens"] > 0
    assert sessions[1].usage.input_tokens
    # Each line names its CLI's version: claude's stream says it, codex is asked once.
    assert sessions[0].usage.cli_version == pinned("@anthropic-ai/claude-code")
    assert sessions[1].usage.cli_version == pinned("@openai/codex")
